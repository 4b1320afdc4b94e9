// defines: AmaxAlgo, InitialScale, DelayedScalingConfig, DelayedScaler: Transformer
// Engine's DelayedScaling for one (layer, role): the scale of step t comes from the amax
// history of steps < t.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "fp8wb/kernels/format.h"
#include "fp8wb/kernels/name_table.h"

namespace fp8wb {

enum class AmaxAlgo : uint8_t {
  Max,         // the largest amax of the history
  MostRecent,  // the newest amax
};
struct AmaxAlgoEntry {
  AmaxAlgo value;
  std::string_view name;  // as configs spell it
};
inline constexpr AmaxAlgoEntry kAmaxAlgos[] = {{AmaxAlgo::Max, "max"},
                                               {AmaxAlgo::MostRecent, "most_recent"}};
static_assert(names_cover_enum(kAmaxAlgos, AmaxAlgo::MostRecent));
enum class InitialScale : uint8_t {
  One,              // TE: step 0 runs with scale 1
  BootstrapCurrent  // step 0 uses current scaling from its own amax
};

inline std::string_view amax_algo_name(AmaxAlgo a) {  // "max", "most_recent"
  return table_name(kAmaxAlgos, a);
}

struct DelayedScalingConfig {
  int window = 1024;  // amax_history_len (TE default 1024)
  int margin = 0;
  AmaxAlgo algo = AmaxAlgo::Max;
  InitialScale initial = InitialScale::One;
};

// Throws std::invalid_argument for window < 1 or margin outside [-64, 64].
void validate_delayed_config(const DelayedScalingConfig& c);

class DelayedScaler {
 public:
  DelayedScaler(Format format, const DelayedScalingConfig& config);

  // The scale to quantize step t with (from steps < t). For InitialScale::BootstrapCurrent
  // and no step recorded yet, pass the step's own amax to get its current scale.
  float scale() const { return scale_; }
  float scale_for_step(float current_amax) const;
  // Records step t's amax (max |x| over finite values) and computes the scale for t + 1:
  // roll the history, put amax in front, amax_h = max(history) or the newest entry,
  // scale = (fmax / amax_h) / 2^margin; amax_h <= 0 or non-finite keeps the previous
  // scale; an infinite scale becomes FLT_MAX.
  void update(float amax);

  // Newest first, `window` entries (zeros before the window fills), as TE stores it.
  std::vector<float> history() const;
  float history_amax() const;  // the amax_h the current scale came from
  int64_t steps() const { return steps_; }
  const DelayedScalingConfig& config() const { return config_; }

 private:
  Format format_;
  DelayedScalingConfig config_;
  std::vector<float> ring_;  // ring_[(head_ + i) % window] is the i-th newest
  int head_ = 0;
  int64_t steps_ = 0;
  float scale_ = 1.0f;
  float amax_h_ = 0.0f;
};

}  // namespace fp8wb
