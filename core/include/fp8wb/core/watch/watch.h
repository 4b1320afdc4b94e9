// defines: WatchSettings, watch_run_config(), watch_config_json(), watched_run_config(),
// watch_float8_config(), stored_float8_config(), Watch: a training loop that is not the
// engine's (a user's PyTorch script, through the fp8wb Python package and the C ABI of
// watch_abi.h) recorded into the run store as one of its runs: each observed tensor of a
// layer's role is quantized by the project's kernels under the chosen recipe (delayed
// scaling keeps its amax history every step), its statistics taken every stats_interval
// steps, and each step's scalars stored. Plain types, no torch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/metrics.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/kernels/delayed_scaling.h"
#include "fp8wb/kernels/quantize_cpu.h"

namespace fp8wb {

// What a watched run quantizes with, as the caller gives it: `settings_json` holds the
// RunConfig keys recipe, formats, scaling, window, margin, amax_algo and stats_interval
// (each optional: RunConfig's defaults), checked as a run config is (messages name the
// field); `config_json` is the user's own settings (a JSON object, stored as given).
struct WatchSettings {
  std::string name = "python";
  std::string settings_json = "{}";
  std::string config_json = "{}";
  std::string model;   // the model's class, as the script names it
  std::string device;  // where its tensors are ("cpu", "cuda:0")
};

// The settings as a RunConfig (the FP8 keys set, no reference model). Throws
// std::invalid_argument naming the field.
RunConfig watch_run_config(const WatchSettings& s);
// What the run store keeps as a watched run's config: {"source": "python", "model": ...,
// the FP8 keys, "config": the user's object}.
std::string watch_config_json(const WatchSettings& s, const RunConfig& c);
// A stored config of a watched run read back as a RunConfig (its FP8 keys; the rest
// RunConfig's defaults, no reference); nullopt for any other text.
std::optional<RunConfig> watched_run_config(const std::string& config_json);
// What a watched run quantizes with: the config's FP8 settings, where a block recipe's
// last block along a dimension may be smaller (a user's tensors have any shape).
Float8LinearConfig watch_float8_config(const RunConfig& c);
// What a stored run's tensor statistics were measured under (RunStore fills each row's
// recipe and scaling mode with it): a training run's config (parse_run_config()) or a
// watched script's (watched_run_config()); for any other text, RunConfig's default
// formats and recipe with current scaling (nothing says a scale came from a history).
Float8LinearConfig stored_float8_config(const std::string& config_json);

// The config's "source" of a watched run: its run kind's name (RunKind::Python).
inline constexpr char kWatchRunKind[] = "python";

class Watch {
 public:
  // Opens (or creates) the run database and starts a run of kind "python". Throws
  // StoreError (the database) or std::invalid_argument (the settings).
  Watch(const std::string& db_path, const WatchSettings& settings);
  ~Watch();  // a run not ended ends 'interrupted'
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  int64_t run_id() const { return run_id_; }
  int64_t step() const { return step_; }  // the step being observed
  const RunConfig& config() const { return config_; }
  // Whether the current step takes the full statistics.
  bool sampling() const;

  // A layer's role at the current step: a row-major rows x cols host tensor (K = cols).
  // Every step its amax goes into delayed scaling's history and the run's per-step amax
  // (where records_amax()); a sampled step keeps the statistics of the role's first tensor
  // of the step, quantized with the scale of the history (delayed) or its own (current).
  void observe(const std::string& layer, Role role, const TensorRef& x);
  // Whether a role's amax counts between samples: delayed scaling's history, and the
  // per-step amax of a tensorwise recipe (what `fp8wb replay` replays).
  bool records_amax(Role role) const;
  bool records_amax() const;  // of any role
  // What observe() does between samples, for an amax measured elsewhere (on the GPU, read
  // back later): `step` is the current step or an earlier one, in step order for a role.
  void observe_amax(const std::string& layer, Role role, int64_t step, float amax);
  // Whether the current step still takes this layer's role's statistics.
  bool takes_stats(const std::string& layer, Role role);
  // The scale delayed scaling gives this layer's role at the current step; 0 for current
  // scaling (each tensor its own).
  float delayed_scale(const std::string& layer, Role role);
  // What observe() does at a sampled step, for statistics taken elsewhere (on the GPU)
  // with the recipe of `role` and `scale` (delayed_scale(), or the tensor's own).
  void observe_stats(const std::string& layer, Role role, const TensorStats& taken, float scale);
  const QuantRecipe& recipe(Role role) const;
  // Tensors first seen after the per-step amax's columns were fixed (at the end of the
  // first step): their amax is in delayed scaling's history, not in the per-step table.
  int64_t unrecorded_amax() const { return unrecorded_; }
  // A step's scalars (this step or an earlier one, whose values came later: a loss still
  // on the GPU when its step ended): StepMetrics fields by their series name ("loss",
  // "lr", "step_ms", ...; "tokens" gives tokens_per_s), any other name stored as the
  // series "scalar/<name>". NaN for the fields not named.
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& named);
  // Ends the current step: the statistics it took go to the store.
  void next_step();
  void event(const std::string& kind, const std::string& message);
  // Ends the run (finished, stopped, failed with the message); waits for the store.
  void end(RunStatus status, const std::string& message);
  bool ended() const { return ended_; }

 private:
  struct RoleState {
    std::optional<DelayedScaler> scaler;
    int64_t stats_step = -1;  // the step whose statistics were taken
    int64_t amax_step = -1;   // the step of the last amax taken in
  };
  RoleState& state(const std::string& layer, Role role);
  void take_amax(const std::string& layer, Role role, RoleState& s, int64_t step, float amax);
  void record_amax(const std::string& layer, Role role, int64_t step, float amax);
  void flush_amax_row();

  std::unique_ptr<RunStore> store_;
  RunConfig config_;
  Float8LinearConfig fp8_;
  int64_t run_id_ = 0;
  int64_t step_ = 0;
  bool ended_ = false;
  std::map<std::pair<std::string, Role>, RoleState> roles_;
  MetricBatch pending_;
  // The per-step amax: its columns (fixed when the first step's row is written) and the
  // row being filled.
  std::map<std::pair<std::string, Role>, size_t> amax_index_;
  std::vector<AmaxTensor> amax_tensors_;
  bool amax_columns_fixed_ = false;
  int64_t row_step_ = -1;
  std::vector<float> row_;
  int64_t unrecorded_ = 0;
};

}  // namespace fp8wb
