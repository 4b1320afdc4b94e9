// defines: ReplayRun, load_replay_run(), amax_tensor_label(), replay_notes(): a stored run
// made ready for replay_amax() (replay.h): its per-step amax, its own scaling settings, the
// sampled steps' scales and exponent histograms, and what the replay assumes. No torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8wb/core/replay/replay.h"
#include "fp8wb/core/store/run_store.h"

namespace fp8wb {

struct ReplayRun {
  int64_t run_id = 0;
  std::string name;
  ReplayInput input;
  RunScalingSettings run;             // the run's own scaling
  std::vector<ReplaySample> samples;  // at most kMaxReplaySampledSteps steps of them
  std::vector<StoredScale> stored;    // every sampled step's
  bool from_sampled_steps = false;    // built from the sampled statistics (an approximation)
  std::vector<std::string> notes;     // what the figures assume, said beside them
};

// The sampled steps whose histograms the estimates use, evenly spread over the run.
inline constexpr size_t kMaxReplaySampledSteps = 256;

// "blocks.0.mlp.fc1/input"
std::string amax_tensor_label(const AmaxTensor& t);

// The run's per-step amax (only the tensors `tensor` names: a layer, or LAYER/ROLE; empty:
// all). Throws ReplayError: an unknown run or tensor, a config that cannot be read, a run
// whose recipe is not tensorwise or that ran without FP8, and a run without per-step amax
// (made before it was recorded), which names its sampled steps and `sampled`; with
// `sampled` such a run is replayed from the amax of its sampled steps taken as
// consecutive steps (said in the notes).
ReplayRun load_replay_run(const RunStore& store, int64_t run_id, const std::string& tensor = {},
                          bool sampled = false);

// The assumption every replay makes, and the basis of the histogram estimates.
inline constexpr const char* kReplayAssumption =
    "the replay assumes the run's amax trajectory does not depend on the setting (in training a "
    "different scale changes the rounding, hence the gradients and later amaxes, a little)";
inline constexpr const char* kReplayEstimateBasis =
    "underflow/saturation %: the exponent histograms stored at the sampled steps, shifted by "
    "log2(replayed scale / stored scale), elements taken log-uniform within a bin (the amax's "
    "bin only up to the amax); underflow: "
    "below half the smallest subnormal, saturation: from the format's rounding threshold past "
    "its max";

}  // namespace fp8wb
