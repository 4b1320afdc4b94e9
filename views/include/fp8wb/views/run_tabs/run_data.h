// defines: TensorSeries, RunData: everything the run tabs plot, for one run, filled live
// from MetricBatches or at once from the run store. Plain data; the tabs read it on the
// GUI thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/metrics.h"
#include "fp8wb/core/replay/replay.h"
#include "fp8wb/core/store/run_store.h"

namespace fp8wb {

// A layer's role: its statistics at each sampled step, as published (the derived figures
// come from tensor_stats.h: underflow_pct(p.raw), ...).
struct TensorSeries {
  std::string layer;
  Role role = Role::Input;
  std::vector<TensorMetrics> points;  // by step
};

class RunData {
 public:
  void clear();
  void setRun(int64_t id, const std::string& name, const std::string& config_json);
  void append(const MetricBatch& b);
  void append(MetricBatch&& b);  // moves the statistics in
  // Reads a stored run whole (`cursor`, where given, is left where a follower of the run
  // goes on from). Throws StoreError.
  void load(const RunStore& store, int64_t run_id, RunCursor* cursor = nullptr);
  // Takes another run's data whole (read on another thread); the revision goes on
  // counting up, so that every tab redraws.
  void replace(RunData other);
  // A run followed live from another process: what it now says of itself.
  void setStatus(RunStatus status, const std::string& message);

  int64_t runId() const { return run_id_; }
  const std::string& name() const { return name_; }
  const RunConfig& config() const { return config_; }
  bool hasConfig() const { return has_config_; }
  // A watched script's run (fp8wb.watch()): config() holds its FP8 settings only (no model,
  // no step count).
  bool watched() const { return watched_; }
  RunStatus status() const { return status_; }
  const std::string& message() const { return message_; }

  // Scalars by step (NaN where a value does not apply).
  const std::vector<StepMetrics>& steps() const { return steps_; }
  // Layer/role series in the order they first appeared.
  const std::vector<TensorSeries>& tensors() const { return tensors_; }
  const TensorSeries* tensor(const std::string& layer, Role role) const;
  // The layers in the model's order where the run said it (its "layers" event), else by
  // name, numbers as numbers ("blocks.2" before "blocks.10"): one order for a run followed
  // live and the same run read from the store.
  std::vector<std::string> layers() const;
  const std::vector<SqnrMetrics>& sqnr() const { return sqnr_; }
  const std::vector<RunEvent>& events() const { return events_; }
  // A data-parallel run: every rank's amax and scale at the sampled steps, by step (empty
  // for a run of one rank).
  const std::vector<RankScale>& ranks() const { return ranks_; }
  // Every step's amax of every FP8 tensor, where the run recorded it (empty otherwise):
  // what the Scaling tab replays under another margin, window or algorithm.
  const ReplayInput& stepAmax() const { return step_amax_; }
  int64_t revision() const { return revision_; }  // bumps on every change
  // Bumps when the series are replaced (another run, a run reloaded); between two bumps
  // they only grow at their ends, so a plot may append what is new.
  int64_t generation() const { return generation_; }

 private:
  TensorSeries& series(const std::string& layer, Role role);
  template <class Batch>
  void append_batch(Batch&& b);
  int64_t run_id_ = 0;
  std::string name_, message_;
  RunStatus status_ = RunStatus::Running;
  RunConfig config_;
  bool has_config_ = false;
  bool watched_ = false;
  std::vector<StepMetrics> steps_;
  std::vector<TensorSeries> tensors_;
  std::map<std::pair<std::string, Role>, size_t> index_;
  std::vector<SqnrMetrics> sqnr_;
  std::vector<RunEvent> events_;
  std::vector<RankScale> ranks_;
  ReplayInput step_amax_;
  int64_t revision_ = 0;
  int64_t generation_ = 0;
};

}  // namespace fp8wb
