// defines: RunStatus, StepMetrics (and kStepSeries, StepTab), TensorMetrics (and
// kTensorStatFields, kTensorStatFigures), SqnrMetrics, RunEvent (and RunEventKind), MetricBatch,
// MetricConsumer, MetricBus: what a training run reports, step by step, to whoever
// listens (the run store, the console, the GUI). Plain structs, no torch.
#pragma once

#include <cstdint>
#include <exception>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8wb/core/config/float8_config.h"
#include "fp8wb/core/role.h"
#include "fp8wb/kernels/format.h"
#include "fp8wb/kernels/name_table.h"
#include "fp8wb/kernels/tensor_stats.h"

namespace fp8wb {

enum class RunStatus : uint8_t {
  Running,
  Paused,
  Finished,
  Stopped,
  Diverged,
  Failed,
  Interrupted
};
struct RunStatusEntry {
  RunStatus value;
  std::string_view name;  // as stored in the run database and shown to users
};
inline constexpr RunStatusEntry kRunStatuses[] = {
    {RunStatus::Running, "running"},         {RunStatus::Paused, "paused"},
    {RunStatus::Finished, "finished"},       {RunStatus::Stopped, "stopped"},
    {RunStatus::Diverged, "diverged"},       {RunStatus::Failed, "failed"},
    {RunStatus::Interrupted, "interrupted"},
};
static_assert(names_cover_enum(kRunStatuses, RunStatus::Interrupted));
inline const char* run_status_name(RunStatus s) {  // "running", ... (the names are literals)
  return table_name(kRunStatuses, s).data();
}
inline bool parse_run_status(const std::string& name, RunStatus& out) {
  const std::optional<RunStatus> s = parse_table_name(kRunStatuses, name);
  if (s) out = *s;
  return s.has_value();
}
inline std::string run_status_names() {
  return table_names(kRunStatuses);
}

// One step's scalars. NaN where a value does not apply (no reference model, say).
struct StepMetrics {
  int64_t step = 0;
  double loss = 0;
  double ref_loss = 0;  // the high-precision reference's loss on the same batch
  double loss_gap = 0;  // loss - ref_loss
  double grad_norm = 0;
  double lr = 0;
  // One model's step: the FP8 model's alone (on a GPU from when the GPU reached its first
  // work to its end), not its reference's, nor the rest of the run's loop.
  double tokens_per_s = 0;
  double step_ms = 0;
  // Per wall-clock step: the step's tokens over the time from the previous step's end to
  // this one's, everything the run does in it (both models, statistics, the hand-off to
  // the store). NaN for the first step.
  double wall_tokens_per_s = std::numeric_limits<double>::quiet_NaN();
  // Peak memory so far, in bytes. On a GPU: the caching allocator's peak of allocated
  // bytes while each model stepped, counting that model's parameters and optimizer state
  // but not the other model's. On the CPU both are NaN. peak_rss: the resident memory the
  // run added to its process (the largest resident set since the run started, less the
  // resident set at its start: both models, the data, the statistics; what the process
  // held before, a GUI's analyses or an earlier run, never counts).
  double mem_fp8 = std::numeric_limits<double>::quiet_NaN();
  double mem_ref = std::numeric_limits<double>::quiet_NaN();
  double peak_rss = std::numeric_limits<double>::quiet_NaN();
  // Runs on a token file, at each evaluation: the mean loss over the held-out windows of
  // the FP8 model and of its reference (NaN at other steps).
  double eval_loss = std::numeric_limits<double>::quiet_NaN();
  double ref_eval_loss = std::numeric_limits<double>::quiet_NaN();
};

// Which run tab draws a step series, step by step.
enum class StepTab : uint8_t {
  None,     // stored and exported only (peak memory: the Overview's bars, from its last value)
  Overview  // a curve on the Overview tab (views/src/run_tabs/run_tab_overview.cpp)
};

// The stored series of StepMetrics, one row each: the run store's series names, what
// the GUI reloads and what CSV export writes come from this one table, and the Overview
// tab draws every row marked for it. A new per-step plot is a StepMetrics member, its row
// here (tab Overview) and its value in the trainer.
struct StepSeries {
  const char* name;
  double StepMetrics::*field;
  bool only_where_measured;  // NaN takes no row (memory on another device, say)
  const char* label;         // for people: its curve's legend entry (its plot's axis)
  const char* unit;          // "" for a plain number
  StepTab tab;               // the run tab that draws it (None: not drawn step by step)
  const char* plot;  // on that tab: the row whose plot it shares, nullptr: a plot of its own
};
inline constexpr StepSeries kStepSeries[] = {
    {"loss", &StepMetrics::loss, false, "FP8 loss", "", StepTab::Overview, nullptr},
    {"ref_loss", &StepMetrics::ref_loss, false, "reference loss", "", StepTab::Overview, "loss"},
    {"loss_gap", &StepMetrics::loss_gap, false, "loss gap", "", StepTab::Overview, nullptr},
    {"grad_norm", &StepMetrics::grad_norm, false, "gradient norm", "", StepTab::None, nullptr},
    {"lr", &StepMetrics::lr, false, "learning rate", "", StepTab::None, nullptr},
    {"tokens_per_s", &StepMetrics::tokens_per_s, false, "tokens/s", "", StepTab::Overview, nullptr},
    {"step_ms", &StepMetrics::step_ms, false, "step time", "ms", StepTab::None, nullptr},
    {"wall_tokens_per_s", &StepMetrics::wall_tokens_per_s, true, "tokens/s per wall-clock step", "",
     StepTab::None, nullptr},
    {"mem_fp8", &StepMetrics::mem_fp8, true, "peak memory of the FP8 model", "bytes", StepTab::None,
     nullptr},
    {"mem_ref", &StepMetrics::mem_ref, true, "peak memory of the reference", "bytes", StepTab::None,
     nullptr},
    {"peak_rss", &StepMetrics::peak_rss, true, "resident memory the run added", "bytes",
     StepTab::None, nullptr},
    {"eval_loss", &StepMetrics::eval_loss, true, "held-out loss (FP8)", "", StepTab::Overview,
     "loss"},
    {"ref_eval_loss", &StepMetrics::ref_eval_loss, true, "held-out loss (reference)", "",
     StepTab::Overview, "loss"},
};

// Every row that shares a plot names an earlier row of the same tab with a plot of its own.
constexpr bool step_plots_resolve() {
  for (size_t i = 0; i < std::size(kStepSeries); ++i) {
    const StepSeries& r = kStepSeries[i];
    if (r.plot == nullptr) continue;
    if (r.tab == StepTab::None) return false;
    bool found = false;
    for (size_t j = 0; j < i; ++j) {
      const StepSeries& o = kStepSeries[j];
      if (std::string_view(o.name) == r.plot && o.tab == r.tab && o.plot == nullptr) found = true;
    }
    if (!found) return false;
  }
  return true;
}
static_assert(
    step_plots_resolve(),
    "a kStepSeries row's plot must name an earlier row of its tab with a plot of its own");

// Every statistic of one quantization (a layer's role at a sampled step).
struct TensorMetrics {
  int64_t step = 0;
  std::string layer;  // qualified module name, e.g. "blocks.0.attn.qkv"
  Role role = Role::Input;
  float amax = 0;
  float scale = 0;  // the (first group's) scale the quantization used
  StatsBuffer raw{};
  MapGrid map_grid;
  std::vector<float> map_rel_error;  // per cell; empty when no map was taken
  std::vector<float> amax_history;   // delayed scaling: the window, newest first (else empty)
  // What the statistics were measured under: the role's recipe (format, scaling kind,
  // margin, ...) and where its scale came from. The trainer and a watched script fill them
  // as they quantize; a stored run's rows get them from the run's config (RunStore), the
  // defaults' (HYBRID, current scaling) where it has none. Views read them here, not from
  // a config.
  QuantRecipe recipe;
  ScalingMode scaling = ScalingMode::Current;
};

// Sets `t`'s recipe and scaling mode to those `fc` quantizes t's role with.
inline void set_recipe(TensorMetrics& t, const Float8LinearConfig& fc) {
  t.recipe = fc.recipe(t.role);
  t.scaling = fc.scaling();
}

// The stored fields of TensorMetrics, one row each, in the order of the run store's
// tensor_stats columns: the store's CREATE, INSERT and SELECT, the reload into a
// TensorMetrics, and JSON and CSV export all come from this one table. A new statistic
// is a StatsBuffer member (filled by the kernels, added by merge_stats()) and a row here
// with `since` one above the current schema version: the store adds its column in that
// version's migration (RunStore::kSchemaVersion follows the table).
struct TensorStatField {
  enum class Type : uint8_t {
    Count,     // a StatsBuffer counter, an SQL INTEGER
    Sum,       // a StatsBuffer sum, an SQL REAL
    Value,     // a TensorMetrics float, an SQL REAL
    Histogram  // StatsBuffer::hist, an SQL BLOB (run_store_sql.h: pack_histogram())
  };
  const char* name;   // SQL column, JSON key, CSV header
  const char* label;  // for people (tables, axes)
  const char* unit;   // "" for a plain number
  Type type;
  uint64_t StatsBuffer::*count;  // Count
  double StatsBuffer::*sum;      // Sum
  float TensorMetrics::*value;   // Value
  int since;                     // the run store's schema version that added the column
};
inline constexpr TensorStatField kTensorStatFields[] = {
    {"amax", "amax", "", TensorStatField::Type::Value, nullptr, nullptr, &TensorMetrics::amax, 1},
    {"scale", "scale", "", TensorStatField::Type::Value, nullptr, nullptr, &TensorMetrics::scale,
     1},
    {"numel", "elements", "elements", TensorStatField::Type::Count, &StatsBuffer::numel, nullptr,
     nullptr, 1},
    {"zeros", "zeros", "elements", TensorStatField::Type::Count, &StatsBuffer::zeros, nullptr,
     nullptr, 1},
    {"underflow", "underflow", "elements", TensorStatField::Type::Count, &StatsBuffer::underflow,
     nullptr, nullptr, 1},
    {"saturated", "saturated", "elements", TensorStatField::Type::Count, &StatsBuffer::saturated,
     nullptr, nullptr, 1},
    {"nonfinite", "non-finite", "elements", TensorStatField::Type::Count, &StatsBuffer::nonfinite,
     nullptr, nullptr, 1},
    {"subnormal", "subnormal", "elements", TensorStatField::Type::Count, &StatsBuffer::subnormal,
     nullptr, nullptr, 1},
    {"sq_err", "sum of squared errors", "", TensorStatField::Type::Sum, nullptr,
     &StatsBuffer::sq_err, nullptr, 1},
    {"sq_sum", "sum of squares", "", TensorStatField::Type::Sum, nullptr, &StatsBuffer::sq_sum,
     nullptr, 1},
    {"histogram", "exponent histogram", "elements", TensorStatField::Type::Histogram, nullptr,
     nullptr, nullptr, 1},
};
inline constexpr size_t kTensorStatFieldCount = std::size(kTensorStatFields);

// A field's value as a number (a histogram has none: NaN).
inline double stat_value(const TensorMetrics& t, const TensorStatField& f) {
  switch (f.type) {
    case TensorStatField::Type::Count: return static_cast<double>(t.raw.*f.count);
    case TensorStatField::Type::Sum: return t.raw.*f.sum;
    case TensorStatField::Type::Value: return static_cast<double>(t.*f.value);
    case TensorStatField::Type::Histogram: break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// The newest schema version a field needs.
constexpr int tensor_stats_schema_version() {
  int v = 1;
  for (const TensorStatField& f : kTensorStatFields) v = f.since > v ? f.since : v;
  return v;
}

// The figures derived from a TensorMetrics (tensor_stats.h computes them), as the GUI
// plots them and tables name them.
struct TensorStatFigure {
  const char* name;   // underflow_pct, ...
  const char* label;  // a plot's series and axis
  const char* unit;   // "%", "dB"
  double (*of)(const StatsBuffer&);
};
inline constexpr TensorStatFigure kUnderflowPct{"underflow_pct", "underflow % (of nonzero)", "%",
                                                &underflow_pct};
inline constexpr TensorStatFigure kSaturatedPct{"saturated_pct", "saturated %", "%",
                                                &saturated_pct};
inline constexpr TensorStatFigure kSubnormalPct{"subnormal_pct", "subnormal %", "%",
                                                &subnormal_pct};
inline constexpr TensorStatFigure kSqnrDb{"sqnr_db", "SQNR (dB)", "dB", &sqnr_db};
inline constexpr TensorStatFigure kZerosPct{"zeros_pct", "zeros %", "%", &zeros_pct};
inline constexpr TensorStatFigure kTensorStatFigures[] = {kUnderflowPct, kSaturatedPct,
                                                          kSubnormalPct, kSqnrDb, kZerosPct};

struct SqnrMetrics {
  int64_t step = 0;
  std::string layer;
  double fprop_db = 0, dgrad_db = 0, wgrad_db = 0;
};

// What a run's event says (events.kind). The kinds that end or pause a run are named as
// the run status they set.
enum class RunEventKind : uint8_t {
  Started,  // the run began: its device, model and recipe
  Layers,   // the FP8 layers in the model's order, ", " between names
  Skipped,  // a step's update skipped (a non-finite loss, on_nonfinite=skip)
  Weights,  // the final weights written
  Paused,
  Resumed,
  Finished,
  Stopped,
  Diverged,
  Failed,
  Interrupted,  // a watched script's run that its process left unfinished
  Notice        // anything else a run says
};
struct RunEventKindEntry {
  RunEventKind value;
  std::string_view name;  // as stored in the run database (events.kind) and shown
};
inline constexpr RunEventKindEntry kRunEventKinds[] = {
    {RunEventKind::Started, "started"},         {RunEventKind::Layers, "layers"},
    {RunEventKind::Skipped, "skipped"},         {RunEventKind::Weights, "weights"},
    {RunEventKind::Paused, "paused"},           {RunEventKind::Resumed, "resumed"},
    {RunEventKind::Finished, "finished"},       {RunEventKind::Stopped, "stopped"},
    {RunEventKind::Diverged, "diverged"},       {RunEventKind::Failed, "failed"},
    {RunEventKind::Interrupted, "interrupted"}, {RunEventKind::Notice, "notice"},
};
static_assert(names_cover_enum(kRunEventKinds, RunEventKind::Notice));
inline std::string_view run_event_kind_name(RunEventKind k) {
  return table_name(kRunEventKinds, k);
}
// The event of a run's status: how the run ended (or paused; Running: resumed).
inline RunEventKind run_event_kind_of(RunStatus s) {
  switch (s) {
    case RunStatus::Running: return RunEventKind::Resumed;
    case RunStatus::Paused: return RunEventKind::Paused;
    case RunStatus::Finished: return RunEventKind::Finished;
    case RunStatus::Stopped: return RunEventKind::Stopped;
    case RunStatus::Diverged: return RunEventKind::Diverged;
    case RunStatus::Failed: return RunEventKind::Failed;
    case RunStatus::Interrupted: return RunEventKind::Interrupted;
  }
  return RunEventKind::Notice;
}
// Whether the kind is a run status's (paused, finished, ...): that status in `out`.
inline bool run_status_of(RunEventKind k, RunStatus& out) {
  return parse_run_status(std::string(run_event_kind_name(k)), out);
}

struct RunEvent {
  int64_t step = 0;
  RunEventKind kind = RunEventKind::Notice;
  std::string message;
  // A kind this fp8wb does not know (stored by a newer program, or given through the
  // watch ABI) reads as Notice with the name here, as stored; it is written back as it was
  // (run_event_kind_stored()) and shown as "unknown (NAME)" (run_event_kind_text()).
  std::string unknown_kind;  // empty where the kind was read
};
// An event as the run database holds it: its kind parsed, a name this fp8wb does not know
// kept in unknown_kind.
inline RunEvent stored_run_event(int64_t step, const std::string& kind, std::string message) {
  RunEvent e{step, RunEventKind::Notice, std::move(message), {}};
  if (const std::optional<RunEventKind> k = parse_table_name(kRunEventKinds, kind)) {
    e.kind = *k;
  } else {
    e.unknown_kind = kind.empty() ? "none" : kind;
  }
  return e;
}
// The kind as the database stores it: its name, or the unknown one as it was read.
inline std::string run_event_kind_stored(const RunEvent& e) {
  return e.unknown_kind.empty() ? std::string(run_event_kind_name(e.kind)) : e.unknown_kind;
}
// The kind as users read it: its name, or "unknown (NAME)" (at most 40 bytes of NAME).
inline std::string run_event_kind_text(const RunEvent& e) {
  if (e.unknown_kind.empty()) return std::string(run_event_kind_name(e.kind));
  return "unknown (" + e.unknown_kind.substr(0, 40) + ")";
}

// What a run publishes after each step (and once at its end, with `final` set).
// A data-parallel run: one rank's amax of a layer's role at a sampled step and the scale
// it quantized with (rank 0 gathers every rank's and writes them).
struct RankScale {
  int64_t step = 0;
  std::string layer;
  Role role = Role::Input;
  int rank = 0;
  float amax = 0;   // this rank's own amax (of its shard)
  float scale = 0;  // the scale it used (after the amax reduction, where it is on)
};

// A scalar of a step that StepMetrics has no field for (a watched script's own, stored as
// the series `name`).
struct NamedScalar {
  int64_t step = 0;
  std::string name;
  double value = 0;
};

// One FP8 tensor whose amax a run records every step (a layer's role quantized tensorwise),
// and its element format (whose max the scale maps the amax to).
struct AmaxTensor {
  std::string layer;
  Role role = Role::Input;
  Format format = Format::E4M3FN;
};
// One step's amax of every recorded tensor, in the order of the run's AmaxTensor list (NaN
// where a tensor was not quantized that step): the amax that set (current scaling) or
// entered the history behind (delayed scaling) its scale.
struct StepAmax {
  int64_t step = 0;
  std::vector<float> amax;
};

struct MetricBatch {
  int64_t run_id = 0;
  std::vector<StepMetrics> steps;
  std::vector<TensorMetrics> tensors;
  std::vector<SqnrMetrics> sqnr;
  std::vector<RunEvent> events;
  bool final = false;
  RunStatus status = RunStatus::Running;  // with final: how the run ended
  std::string message;                    // with final: why (the error for a failed run)
  std::vector<RankScale> ranks;           // data-parallel runs: every rank's amax and scale
  std::vector<NamedScalar> scalars;       // series of their own (stored, not read back by
                                          // read_new(): series() reads them)
  // The tensors whose amax the run records every step, in their order (once, before the
  // first step_amax), and the amax of each step (every step, whatever log_interval says).
  std::vector<AmaxTensor> amax_tensors;
  std::vector<StepAmax> step_amax;
};

class MetricConsumer {
 public:
  virtual ~MetricConsumer() = default;
  // Called on the engine thread: copy what is needed and return quickly.
  virtual void consume(const MetricBatch& batch) = 0;
  // The same, with the batch the consumer's to keep (MetricBus::publish(MetricBatch&&)
  // hands it to its last consumer): a consumer that keeps batches moves from it.
  virtual void take(MetricBatch&& batch) { consume(batch); }
};

// Fans batches out to its consumers, in the order they were added. A consumer that
// throws (the run store on a full disk) does not keep the batch from the others; the
// first exception is rethrown once every consumer has had the batch.
class MetricBus {
 public:
  void add(std::shared_ptr<MetricConsumer> c) {
    const std::lock_guard<std::mutex> lock(mutex_);
    consumers_.push_back(std::move(c));
  }
  void publish(const MetricBatch& b) { publish_to_all(b, nullptr); }
  // The same, and the last consumer takes the batch itself (take(): no copy where one
  // consumer listens); the others see it first, unchanged.
  void publish(MetricBatch&& b) { publish_to_all(b, &b); }

 private:
  void publish_to_all(const MetricBatch& b, MetricBatch* owned) {
    std::vector<std::shared_ptr<MetricConsumer>> cs;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      cs = consumers_;
    }
    std::exception_ptr first;
    for (size_t i = 0; i < cs.size(); ++i) {
      try {
        if (owned && i + 1 == cs.size()) {
          cs[i]->take(std::move(*owned));
        } else {
          cs[i]->consume(b);
        }
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  std::mutex mutex_;
  std::vector<std::shared_ptr<MetricConsumer>> consumers_;
};

}  // namespace fp8wb
