// defines: the parts of one training step, for the step loop in trainer.cpp: Stepper (a
// model's forward, backward and update, across ranks), StepReadback (its loss, gradient
// norm, amaxes and time on their way to the host), StepMemory (its peak memory on a GPU),
// LayerSample (the statistics taken off an FP8 layer at a sampled step), StepTrace
// (FP8WB_TRACE), shard() and gather_rank_scales() (data-parallel runs), add_role(). Torch
// translation units only (trainer.cpp, trainer_step.cpp); internal to core.
#pragma once

#include <torch/torch.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed_group.h"
#include "fp8wb/core/metrics.h"
#include "models.h"

// FP8WB_TRACE_SCOPE: a named span of host time in FP8WB_TRACE's trace (StepTrace), for the
// parts of a step that are the engine's own code rather than ATen operators; nothing
// without CUDA.
#if defined(FP8WB_TORCH_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/record_function.h>
#define FP8WB_TRACE_SCOPE(name) RECORD_USER_SCOPE(name)
#else
#define FP8WB_TRACE_SCOPE(name) \
  do {                          \
  } while (false)
#endif

namespace fp8wb::train {

// What a step's forward and backward leave: the loss (over the global batch) and the
// gradient norm as 0-d tensors on the model's device, which the host reads when it needs
// them (a step later on a GPU), and whether any rank asked to stop.
struct Launched {
  torch::Tensor loss, norm;
  bool stop = false;
};

struct Stepper {
  std::shared_ptr<TrainModel> model;
  std::unique_ptr<AdamW> opt;
  std::vector<torch::Tensor> params;
  dist::RankGroup* group = nullptr;  // data-parallel runs: the ranks

  void init(const RunConfig& c) {
    params = model->parameters();
    opt = std::make_unique<AdamW>(params, c.lr, c.weight_decay);
  }
  void set_lr(double lr) { opt->set_lr(lr); }
  // After the update: the gradients go, so that between steps a model holds only its
  // parameters and optimizer state (what its memory figure counts besides the step's peak).
  void drop_grads() { opt->zero_grad(); }
  int64_t persistent_bytes() const;
  // Forward and backward; the update is separate (update()). Across ranks each takes the
  // mean over its shard divided by the number of ranks, so that the sum over ranks of
  // losses and gradients (one exchange, with the ranks' stop requests) is the mean over the
  // global batch and its gradient; clipping follows.
  Launched forward_backward(const Batch& b, double clip, bool stop_asked = false);
  // The update, skipped (on the device, without the host waiting) where the loss or the
  // gradient norm is not finite.
  void update(const Launched& r);
};

// A step's loss and gradient norm on their way to the host: on a GPU copied without
// waiting into page-locked memory, with events around the step for its time; on the CPU
// read at once, the step timed by the host's clock.
class StepReadback {
 public:
  explicit StepReadback(const torch::Device& d) : cuda_(d.is_cuda()) {}
  void begin();
  // After the update has been launched; `amax` (float, may be undefined): the step's amax of
  // every FP8 tensor (gather_step_amax()), read back with the loss.
  void end(const Launched& r, const torch::Tensor& amax = {});
  // Waits for the step; then loss(), norm() and ms() hold. The time on a GPU runs from when
  // the GPU reached the step's first work (after what was queued before it) to its end.
  void wait();
  double loss() const { return host_.data_ptr<double>()[0]; }
  double norm() const { return host_.data_ptr<double>()[1]; }
  double ms() const { return ms_; }
  std::vector<float> amax() const;

 private:
  bool cuda_;
  std::chrono::steady_clock::time_point t0_;
  torch::Tensor host_, amax_;
  double ms_ = 0;
#if defined(FP8WB_TORCH_CUDA)
  std::shared_ptr<at::cuda::CUDAEvent> start_, end_;
#endif
};

// Peak memory of one model's steps on a GPU: the caching allocator's peak of allocated
// bytes during the step, less what was allocated before it (the other model, the data),
// plus the model's own parameters and optimizer state. NaN on the CPU, where only the
// resident memory the run adds to its process can be told (train::RunResidentMemory).
class StepMemory {
 public:
  explicit StepMemory(const torch::Device& d) : device_(d) {}
  void begin();
  // After the step's launch (the allocator counts on the host, as the step is queued): the
  // largest figure so far of ordinary steps. A
  // step that samples statistics or SQNR keeps high-precision copies to compare against
  // (what a training run without the workbench would not hold): it counts only while
  // every step so far was one.
  double end(const Stepper& s, bool sampling);

 private:
  torch::Device device_;
  int64_t before_ = 0;
  double max_ordinary_ = 0, max_sampling_ = 0;
};

// A role's statistics at a step as the run publishes them (nothing where `r` is not valid);
// `fc`: the layer's own FP8 config (what its statistics were measured under).
void add_role(MetricBatch& b, int64_t step, const std::string& layer, Role role, const RoleStats& r,
              std::vector<float> amax_history, const Float8LinearConfig& fc);

// Several layers' roles' amax histories at once, as Float8LinearState::amax_history_copy
// (role, false) copies each: the GPU rings gathered on the device into one page-locked
// copy (a sampled step of a 12-layer GPT copies 144 rings; one copy each cost the host
// 10 us). Read each once the stream has passed this point.
std::vector<Float8LinearState::AmaxHistoryCopy> amax_history_copies(
    const std::vector<std::pair<const Float8LinearState*, Role>>& which);

// A sampled step's statistics, taken off an FP8 layer when the step is launched, so that
// the host launches the next step before it reads them (on a GPU a sampling step then
// runs behind the next one's launch like any other): the probe as the step left it, the
// statistics still on their way from the device, and the delayed-scaling histories
// copied behind the step's work.
struct LayerSample {
  const std::string* name = nullptr;
  Float8Probe probe;
  std::function<bool(Float8Probe&, bool wait)> pending;
  const Float8LinearConfig* config = nullptr;  // the layer's, while it is FP8
  bool delayed = false;
  std::array<Float8LinearState::AmaxHistoryCopy, kRoleCount> history;  // by role_index()
  const Float8LinearState* state = nullptr;                            // until copy_histories()

  LayerSample(const std::string& layer_name, LinearLayerImpl& l);
  // The delayed layers' amax histories of a step's samples, copied at once behind the
  // step's work (read once the stream has passed it).
  static void copy_histories(std::vector<LayerSample>& samples);
  // Once the step's work has run (its readback waited for): the probe with its statistics.
  const Float8Probe& settled() {
    if (pending && pending(probe, true)) pending = nullptr;
    return probe;
  }
  std::vector<float> amax_history(Role r) const {
    return delayed ? history[role_index(r)].history() : std::vector<float>();
  }
};

// For developers profiling the engine on a GPU: with FP8WB_TRACE=PATH in the environment,
// the Kineto profiler's events of steps 20 to 24 (CPU operators, GPU kernels, copies) are
// written to PATH as JSON, each step in a "fp8wb_step" scope, for tests/gpu/gpt_table.py --trace.
class StepTrace {
 public:
  static constexpr int64_t kFirst = 20, kSteps = 5;
#if defined(FP8WB_TORCH_CUDA)
  explicit StepTrace(const torch::Device& d);
  void before(int64_t step);

 private:
  std::string path_;
  bool on_ = false;
#else
  explicit StepTrace(const torch::Device&) {}
  void before(int64_t) {}
#endif
};

// A rank's share of the global batch: rows [rank * B / W, (rank + 1) * B / W).
Batch shard(const Batch& b, const RankInfo& r);

// Every rank's amax and scale of each FP8 layer's roles at a sampled step, gathered in
// one exchange (each rank fills its row of a zero matrix; the sum is everyone's).
std::vector<RankScale> gather_rank_scales(
    dist::RankGroup& g, int64_t step,
    const std::vector<std::pair<std::string, LinearLayerImpl*>>& layers,
    const torch::Device& device);

}  // namespace fp8wb::train
