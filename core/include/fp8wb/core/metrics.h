// defines: RunStatus, StepMetrics, TensorMetrics, SqnrMetrics, RunEvent, MetricBatch,
// MetricConsumer, MetricBus: what a training run reports, step by step, to whoever
// listens (the run store, the console, the GUI). Plain structs, no torch.
#pragma once

#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fp8wb/core/role.h"
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
const char* run_status_name(RunStatus s);  // "running", ...
bool parse_run_status(const std::string& name, RunStatus& out);

// One step's scalars. NaN where a value does not apply (no reference model, say).
struct StepMetrics {
  int64_t step = 0;
  double loss = 0;
  double ref_loss = 0;  // the high-precision reference's loss on the same batch
  double loss_gap = 0;  // loss - ref_loss
  double grad_norm = 0;
  double lr = 0;
  double tokens_per_s = 0;
  double step_ms = 0;
  // Peak memory so far, in bytes. On a GPU: the caching allocator's peak of allocated
  // bytes while each model stepped, counting that model's parameters and optimizer state
  // but not the other model's. On the CPU both are NaN and peak_rss is the process's peak
  // resident set (every model, the data and the program itself).
  double mem_fp8 = std::numeric_limits<double>::quiet_NaN();
  double mem_ref = std::numeric_limits<double>::quiet_NaN();
  double peak_rss = std::numeric_limits<double>::quiet_NaN();
};

// The stored series of StepMetrics, one row each: the run store's series names, what
// the GUI reloads and what CSV export writes come from this one table.
struct StepSeries {
  const char* name;
  double StepMetrics::*field;
  bool only_where_measured;  // NaN takes no row (memory on another device, say)
};
inline constexpr StepSeries kStepSeries[] = {
    {"loss", &StepMetrics::loss, false},
    {"ref_loss", &StepMetrics::ref_loss, false},
    {"loss_gap", &StepMetrics::loss_gap, false},
    {"grad_norm", &StepMetrics::grad_norm, false},
    {"lr", &StepMetrics::lr, false},
    {"tokens_per_s", &StepMetrics::tokens_per_s, false},
    {"step_ms", &StepMetrics::step_ms, false},
    {"mem_fp8", &StepMetrics::mem_fp8, true},
    {"mem_ref", &StepMetrics::mem_ref, true},
    {"peak_rss", &StepMetrics::peak_rss, true},
};

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
};

struct SqnrMetrics {
  int64_t step = 0;
  std::string layer;
  double fprop_db = 0, dgrad_db = 0, wgrad_db = 0;
};

struct RunEvent {
  int64_t step = 0;
  std::string
      kind;  // started, diverged, skipped, paused, resumed, stopped, finished, failed, notice
  std::string message;
};

// What a run publishes after each step (and once at its end, with `final` set).
struct MetricBatch {
  int64_t run_id = 0;
  std::vector<StepMetrics> steps;
  std::vector<TensorMetrics> tensors;
  std::vector<SqnrMetrics> sqnr;
  std::vector<RunEvent> events;
  bool final = false;
  RunStatus status = RunStatus::Running;  // with final: how the run ended
  std::string message;                    // with final: why (the error for a failed run)
};

class MetricConsumer {
 public:
  virtual ~MetricConsumer() = default;
  // Called on the engine thread: copy what is needed and return quickly.
  virtual void consume(const MetricBatch& batch) = 0;
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
  void publish(const MetricBatch& b) {
    std::vector<std::shared_ptr<MetricConsumer>> cs;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      cs = consumers_;
    }
    std::exception_ptr first;
    for (const auto& c : cs) {
      try {
        c->consume(b);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<MetricConsumer>> consumers_;
};

}  // namespace fp8wb
