// Torch translation unit: the training loop behind Trainer (trainer.h): the models'
// steps (forward, backward, the update, across ranks), their memory, the statistics
// sampled at a step, divergence, the final weights; run(), which ends a run as failed on
// any error, and the devices a config names. Trainer's controls, which need no torch,
// are in trainer_control.cpp; what both share is trainer_impl.h.
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>

#include <torch/version.h>

#include "distributed_group.h"
#include "fp8wb/core/backend_info.h"
#include "fp8wb/core/counted.h"
#include "fp8wb/core/file_io.h"
#include "fp8wb/core/notices.h"
#include "fp8wb/core/safetensors.h"
#include "models.h"
#include "trainer_impl.h"

#if defined(FP8WB_TORCH_CUDA)
#include <torch/csrc/autograd/profiler_kineto.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <set>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace fp8wb {

using train::Batch;

namespace {

// Consecutive steps over the divergence limit that end a run as diverged.
constexpr int64_t kBlowUpSteps = 10;
// The most the MLP's drift widens that limit by.
constexpr double kMaxSwing = 1e5;

std::string g6(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// What a step's forward and backward leave: the loss (over the global batch) and the
// gradient norm as 0-d tensors on the model's device, which the host reads when it needs
// them (a step later on a GPU), and whether any rank asked to stop.
struct Launched {
  torch::Tensor loss, norm;
  bool stop = false;
};

struct Stepper {
  std::shared_ptr<train::TrainModel> model;
  std::unique_ptr<train::AdamW> opt;
  std::vector<torch::Tensor> params;
  dist::RankGroup* group = nullptr;  // data-parallel runs: the ranks

  void init(const RunConfig& c) {
    params = model->parameters();
    opt = std::make_unique<train::AdamW>(params, c.lr, c.weight_decay);
  }
  void set_lr(double lr) { opt->set_lr(lr); }
  // After the update: the gradients go, so that between steps a model holds only its
  // parameters and optimizer state (what its memory figure counts besides the step's peak).
  void drop_grads() { opt->zero_grad(); }
  int64_t persistent_bytes() const {
    int64_t n = opt->state_bytes();
    for (const auto& p : params) n += static_cast<int64_t>(p.nbytes());
    return n;
  }
  // Forward and backward; the update is separate (update()). Across ranks each takes the
  // mean over its shard divided by the number of ranks, so that the sum over ranks of
  // losses and gradients (one exchange, with the ranks' stop requests) is the mean over the
  // global batch and its gradient; clipping follows.
  Launched forward_backward(const Batch& b, double clip, bool stop_asked = false) {
    opt->zero_grad();
    torch::Tensor loss = model->loss(b);
    if (group) loss = loss / group->info().world;
    loss.backward();
    Launched r;
    r.loss = loss.detach();
    r.stop = stop_asked;
    if (group) {
      std::vector<torch::Tensor> parts;
      parts.reserve(params.size() + 1);
      for (auto& p : params) {
        if (!p.mutable_grad().defined()) p.mutable_grad() = torch::zeros_like(p);
        parts.push_back(p.grad().reshape({-1}).to(torch::kFloat));
      }
      parts.push_back(
          torch::stack({r.loss.to(torch::kFloat).reshape({}),
                        torch::full({}, stop_asked ? 1.0f : 0.0f, parts.front().options())}));
      std::vector<torch::Tensor> flat{torch::cat(parts)};
      group->sum(flat, "gradients");
      int64_t at = 0;
      for (auto& p : params) {
        const int64_t n = p.numel();
        p.mutable_grad().copy_(flat[0].narrow(0, at, n).view_as(p));
        at += n;
      }
      const torch::Tensor tail = flat[0].narrow(0, at, 2).to(torch::kCPU);
      r.loss = torch::tensor(static_cast<double>(tail.data_ptr<float>()[0]), torch::kDouble);
      r.stop = tail.data_ptr<float>()[1] > 0;
    }
    r.norm = train::clip_grad_norm(params, clip);
    return r;
  }
  // The update, skipped (on the device, without the host waiting) where the loss or the
  // gradient norm is not finite.
  void update(const Launched& r) {
    const torch::Tensor sum = r.loss.to(r.norm.device(), torch::kFloat) + r.norm.to(torch::kFloat);
    opt->step(torch::isfinite(sum).logical_not().to(torch::kFloat).reshape({1}));
  }
};

// A step's loss and gradient norm on their way to the host: on a GPU copied without
// waiting into page-locked memory, with events around the step for its time; on the CPU
// read at once, the step timed by the host's clock.
class StepReadback {
 public:
  explicit StepReadback(const torch::Device& d) : cuda_(d.is_cuda()) {}
  void begin() {
    t0_ = std::chrono::steady_clock::now();
#if defined(FP8WB_TORCH_CUDA)
    if (cuda_) {
      start_ = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
      start_->record(at::cuda::getCurrentCUDAStream());
    }
#endif
  }
  // After the update has been launched; `amax` (float, may be undefined): the step's amax of
  // every FP8 tensor (gather_step_amax()), read back with the loss.
  void end(const Launched& r, const torch::Tensor& amax = {}) {
    const torch::Tensor v = torch::stack(
        {r.loss.to(torch::kDouble).reshape({}), r.norm.to(torch::kDouble).reshape({})});
#if defined(FP8WB_TORCH_CUDA)
    if (cuda_) {
      host_ = torch::empty({2}, torch::TensorOptions().dtype(torch::kDouble).pinned_memory(true));
      host_.copy_(v, /*non_blocking=*/true);
      if (amax.defined()) {
        amax_ = torch::empty({amax.numel()},
                             torch::TensorOptions().dtype(torch::kFloat).pinned_memory(true));
        amax_.copy_(amax, /*non_blocking=*/true);
      }
      end_ = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
      end_->record(at::cuda::getCurrentCUDAStream());
      return;
    }
#endif
    host_ = v.to(torch::kCPU);
    if (amax.defined()) amax_ = amax.to(torch::kCPU, torch::kFloat).contiguous();
    ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  }
  // Waits for the step; then loss(), norm() and ms() hold. The time on a GPU runs from when
  // the GPU reached the step's first work (after what was queued before it) to its end.
  void wait() {
#if defined(FP8WB_TORCH_CUDA)
    if (cuda_ && end_) {
      end_->synchronize();
      ms_ = start_->elapsed_time(*end_);
      end_.reset();
    }
#endif
  }
  double loss() const {
    return host_.data_ptr<double>()[0];
  }
  double norm() const {
    return host_.data_ptr<double>()[1];
  }
  double ms() const {
    return ms_;
  }
  std::vector<float> amax() const {
    if (!amax_.defined()) return {};
    const float* p = amax_.data_ptr<float>();
    return std::vector<float>(p, p + amax_.numel());
  }

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
  void begin() {
#if defined(FP8WB_TORCH_CUDA)
    if (!device_.is_cuda()) return;
    namespace alloc = c10::cuda::CUDACachingAllocator;
    before_ = alloc::getDeviceStats(device_.index()).allocated_bytes[0].current;
    alloc::resetPeakStats(device_.index());
#endif
  }
  // After the step's launch (the allocator counts on the host, as the step is queued): the
  // largest figure so far of ordinary steps. A
  // step that samples statistics or SQNR keeps high-precision copies to compare against
  // (what a training run without the workbench would not hold): it counts only while
  // every step so far was one.
  double end(const Stepper& s, bool sampling) {
#if defined(FP8WB_TORCH_CUDA)
    if (!device_.is_cuda()) return NAN;
    namespace alloc = c10::cuda::CUDACachingAllocator;
    const int64_t peak = alloc::getDeviceStats(device_.index()).allocated_bytes[0].peak;
    const double bytes = static_cast<double>(peak - before_ + s.persistent_bytes());
    (sampling ? max_sampling_ : max_ordinary_) =
        std::max(sampling ? max_sampling_ : max_ordinary_, bytes);
    return max_ordinary_ > 0 ? max_ordinary_ : max_sampling_;
#else
    (void)s;
    (void)sampling;
    return NAN;
#endif
  }

 private:
  torch::Device device_;
  int64_t before_ = 0;
  double max_ordinary_ = 0, max_sampling_ = 0;
};

// `fc`: the layer's own FP8 config (what its statistics were measured under).
void add_role(MetricBatch& b, int64_t step, const std::string& layer, Role role, const RoleStats& r,
              std::vector<float> amax_history, const Float8LinearConfig& fc) {
  if (!r.valid) return;
  TensorMetrics t;
  t.step = step;
  t.layer = layer;
  t.role = role;
  set_recipe(t, fc);
  t.amax = r.stats.amax();
  t.scale = r.scale;
  t.raw = r.stats.raw;
  t.map_grid = r.stats.map_grid;
  t.map_rel_error = r.stats.map_rel_error();
  t.amax_history = std::move(amax_history);
  b.tensors.push_back(std::move(t));
}

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

  LayerSample(const std::string& layer_name, LinearLayerImpl& l) : name(&layer_name) {
    Float8LinearState& s = l.state();
    probe = s.probe;
    pending = std::move(s.pending);
    s.pending = nullptr;
    config = l.config();
    delayed = config && config->delayed;
    if (delayed) {
      for (const RoleEntry& r : kRoles)
        history[role_index(r.value)] = s.amax_history_copy(r.value, /*wait=*/false);
    }
  }
  // Once the step's work has run (its readback waited for): the probe with its statistics.
  const Float8Probe& settled() {
    if (pending && pending(probe, true)) pending = nullptr;
    return probe;
  }
  std::vector<float> amax_history(Role r) const {
    return delayed ? history[role_index(r)].history() : std::vector<float>();
  }
};

// What the run's step takes of LibTorch's fast paths, and why not where it falls back:
// said in the run's "started" event (fp8wb runs show, the GUI's status bar).
std::string fast_paths(const RunConfig& c, const train::TrainModel& m, const train::AdamW& opt,
                       const torch::Device& device) {
  std::string s;
  if (c.model != ModelKind::Mlp) {
    const int dh = c.d_model / std::max(1, c.heads);
    if (!m.fused_attention) {
      s += "; attention: two matmuls and an fp32 softmax (LibTorch " + std::string(TORCH_VERSION) +
           " has no scaled_dot_product_attention)";
    } else if (device.is_cuda() && (dh % 8 != 0 || dh > 256)) {
      s += "; attention: scaled_dot_product_attention, not its flash kernel (head size " +
           std::to_string(dh) + " is not a multiple of 8 up to 256)";
    } else {
      s += "; attention: scaled_dot_product_attention";
    }
  }
  if (device.is_cuda()) {
    s += opt.fused() ? "; AdamW: one fused kernel"
                     : "; AdamW: a loop over the parameters (LibTorch " +
                           std::string(TORCH_VERSION) + " has no fused AdamW)";
  }
  return s;
}

// For developers profiling the engine on a GPU: with FP8WB_TRACE=PATH in the environment,
// the Kineto profiler's events of steps 20 to 24 (CPU operators, GPU kernels, copies) are
// written to PATH as JSON, each step in a "fp8wb_step" scope, for tests/gpu/trace_summary.py.
class StepTrace {
 public:
  static constexpr int64_t kFirst = 20, kSteps = 5;
#if defined(FP8WB_TORCH_CUDA)
  explicit StepTrace(const torch::Device& d) {
    const char* p = std::getenv("FP8WB_TRACE");
    if (p && *p && d.is_cuda()) path_ = p;
  }
  void before(int64_t step) {
    if (path_.empty()) return;
    namespace prof = torch::profiler::impl;
    const prof::ProfilerConfig cfg(prof::ProfilerState::KINETO);
    const std::set<prof::ActivityType> acts{prof::ActivityType::CPU, prof::ActivityType::CUDA};
    if (step == kFirst) {
      torch::autograd::profiler::prepareProfiler(cfg, acts);
      torch::autograd::profiler::enableProfiler(cfg, acts);
      on_ = true;
    }
    if (step == kFirst + kSteps && on_) {
      torch::cuda::synchronize();
      const auto result = torch::autograd::profiler::disableProfiler();
      on_ = false;
      nlohmann::json events = nlohmann::json::array();
      for (const auto& e : result->events()) {
        events.push_back({{"name", e.name()},
                          {"cuda", e.deviceType() == c10::DeviceType::CUDA},
                          {"start_ns", e.startNs()},
                          {"dur_ns", e.durationNs()}});
      }
      std::ofstream f(path_);
      f << events.dump() << "\n";
      if (!f.flush()) throw std::runtime_error("cannot write the trace " + path_);
    }
  }
  bool on() const {
    return on_;
  }

 private:
  std::string path_;
  bool on_ = false;
#else
  explicit StepTrace(const torch::Device&) {}
  void before(int64_t) {}
  bool on() const {
    return false;
  }
#endif
};

// A rank's share of the global batch: rows [rank * B / W, (rank + 1) * B / W).
Batch shard(const Batch& b, const RankInfo& r) {
  if (r.world <= 1) return b;
  const int64_t rows = b.x.size(0) / r.world;
  return {b.x.narrow(0, r.rank * rows, rows), b.y.narrow(0, r.rank * rows, rows),
          b.tokens / r.world};
}

// Every rank's amax and scale of each FP8 layer's roles at a sampled step, gathered in
// one exchange (each rank fills its row of a zero matrix; the sum is everyone's).
std::vector<RankScale> gather_rank_scales(
    dist::RankGroup& g, int64_t step,
    const std::vector<std::pair<std::string, LinearLayerImpl*>>& layers,
    const torch::Device& device) {
  const int world = g.info().world;
  const int64_t cols = static_cast<int64_t>(layers.size() * kRoleCount * 2);
  torch::Tensor mine = torch::zeros({world, cols});
  float* row = mine.data_ptr<float>() + int64_t{g.info().rank} * cols;
  for (const auto& [name, l] : layers) {
    const Float8Probe& p = l->probe();
    for (const RoleEntry& r : kRoles) {
      const RoleStats& st = p.stats(r.value);
      *row++ = st.valid ? st.stats.amax() : NAN;
      *row++ = st.valid ? st.scale : NAN;
    }
  }
  std::vector<torch::Tensor> t{mine.to(device)};
  g.sum(t, "the ranks' amaxes and scales");
  const torch::Tensor all = t[0].to(torch::kCPU).contiguous();
  std::vector<RankScale> out;
  for (int rank = 0; rank < world; ++rank) {
    const float* v = all.data_ptr<float>() + int64_t{rank} * cols;
    for (const auto& [name, l] : layers) {
      for (const RoleEntry& r : kRoles) {
        if (std::isfinite(v[0]) || std::isfinite(v[1]))
          out.push_back({step, name, r.value, rank, v[0], v[1]});
        v += 2;
      }
    }
  }
  return out;
}

// Data-parallel runs on GPUs: each rank takes the GPU of its local rank.
std::string rank_device(const std::string& resolved, const RankInfo& r) {
  if (!r.distributed() || resolved == "cpu") return resolved;
  const int64_t n = static_cast<int64_t>(torch::cuda::device_count());
  if (r.local_rank >= n) {
    throw std::invalid_argument("rank " + std::to_string(r.rank) + " (local rank " +
                                std::to_string(r.local_rank) +
                                ") has no GPU of its own: " + std::to_string(n) +
                                " GPU(s) are visible on this machine; start at most that many "
                                "ranks per machine, or use device=cpu");
  }
  return "cuda:" + std::to_string(r.local_rank);
}

}  // namespace

double Trainer::Impl::lr_at(int64_t step) const {
  if (step < cfg.warmup) return cfg.lr * static_cast<double>(step + 1) / (cfg.warmup + 1);
  const double span = std::max<int64_t>(1, cfg.steps - cfg.warmup);
  const double t = std::min(1.0, static_cast<double>(step - cfg.warmup) / span);
  const double lo = cfg.lr * cfg.min_lr_ratio;
  return lo + 0.5 * (cfg.lr - lo) * (1.0 + std::cos(M_PI * t));
}

void Trainer::Impl::body() {
  if (compute_threads > 0) {
    at::set_num_threads(compute_threads);  // this thread's share of the cores
  } else if (at::get_num_threads() <= 1) {
    init_compute_threads();
  }
  resolve_hf_config(cfg);  // the checkpoint's shape (already so where the caller resolved it)
  const torch::Device device(rank_device(Trainer::resolve_device(cfg.device), ranks));
  if (ranks.rank == 0) train::check_weights_path(cfg.weights);  // before any step: not to be lost
  std::unique_ptr<dist::RankGroup> group;
  if (ranks.distributed()) {
    if (cfg.batch % ranks.world != 0) {
      throw std::invalid_argument("batch: " + std::to_string(cfg.batch) +
                                  " does not split evenly across " + std::to_string(ranks.world) +
                                  " ranks (the batch is the global one)");
    }
    // What every rank must share: its whole config but what may differ between ranks (its
    // device, as each has its GPU; the name and weights path, which rank 0 alone uses).
    RunConfig shared = cfg;
    shared.device.clear();
    shared.name.clear();
    shared.weights.clear();
    group = dist::RankGroup::connect(ranks, device, std::chrono::seconds(cfg.rank_timeout),
                                     &stop_flag, run_config_json(shared));
  }
  const torch::ScalarType dtype =
      cfg.dtype == ActivationDtype::Bf16 ? torch::kBFloat16 : torch::kFloat;
  train::RunResidentMemory run_memory;  // before the run's data and models
  auto data = train::make_data(cfg);
  // A token file whose tokens reach past the model's vocabulary: refused naming the first.
  if (cfg.model == ModelKind::Llama && cfg.vocab > 0) data->check_vocab(cfg.vocab);

  Stepper fp8;
  fp8.model = train::make_model(cfg, data->vocab());
  fp8.model->to(device);
  fp8.model->compute_dtype = dtype;
  std::vector<std::pair<std::string, LinearLayerImpl*>> layers;
  std::string started = std::string(model_kind_name(cfg.model)) +
                        (cfg.hf.empty() ? std::string() : " (weights from " + cfg.hf + ")") +
                        " on " + device.str();
  // What the FP8 layers quantize with (and what their statistics say they were measured
  // under, where a layer has no config of its own).
  const Float8LinearConfig run_fp8 = float8_config_of(cfg);
  if (cfg.fp8) {
    ConvertOptions opt;
    opt.skip_names = {"head", "lm_head"};  // the output head stays in high precision
    opt.gpu_min_weight_elements = 0;       // the workbench shows FP8 on every layer it can take
    const ConvertReport r = convert_to_float8(*fp8.model, run_fp8, opt);
    for (auto& [name, l] : train::linear_layers(*fp8.model)) {
      if (l->is_float8()) layers.emplace_back(name, l);
    }
    started += ", " + std::to_string(r.converted.size()) + " FP8 linear layers";
    for (const auto& s : r.skipped) started += "; kept in high precision: " + s;
    started += device.is_cuda() ? std::string("; FP8 GEMMs: ") + probe_backend().fp8_gemm
                                : "; FP8 GEMMs emulated (bit-exact)";
  }
  if (const std::string d = data->describe(); !d.empty()) started += "; " + d;
  // Every step's amax of every FP8 tensor (docs/numerics.md, "Replaying delayed scaling"),
  // where every role has one scale (a tensorwise recipe).
  std::vector<Float8LinearState*> amax_layers;
  std::vector<AmaxTensor> amax_tensors;
  if (cfg.fp8 && cfg.recipe == Float8Recipe::Tensorwise) {
    for (auto& [name, l] : layers) {
      amax_layers.push_back(&l->state());
      for (const RoleEntry& r : kRoles)
        amax_tensors.push_back({name, r.value, run_fp8.recipe(r.value).format});
    }
  }
  if (group) {
    started += "; " + std::to_string(ranks.world) + " ranks (" +
               (device.is_cuda() ? "NCCL" : "Gloo") + "), batch " +
               std::to_string(cfg.batch / ranks.world) + " each";
    if (cfg.fp8)
      started += cfg.amax_reduction ? ", amaxes reduced across ranks"
                                    : ", each rank scales by its own amaxes";
    dist::RankGroup* g = group.get();
    if (cfg.fp8 && cfg.amax_reduction) {
      for (auto& [name, l] : layers)
        l->state().reduce_amax = [g](torch::Tensor& t) { g->max(t, "amaxes"); };
    }
    fp8.group = g;
  }
  fp8.init(cfg);
  started += fast_paths(cfg, *fp8.model, *fp8.opt, device);
  Stepper ref;
  if (cfg.reference && cfg.fp8) {
    ref.model = train::make_model(cfg, data->vocab());  // same seed: the same weights
    ref.model->to(device);
    ref.model->compute_dtype = dtype;
    ref.init(cfg);
    ref.group = group.get();
  }
  {
    MetricBatch b;
    b.events.push_back({0, "started", started});
    // The FP8 layers in the model's order, for those who list them (RunData::layers(): the
    // stored statistics come back by name).
    if (!layers.empty()) {
      std::string names;
      for (const auto& [name, l] : layers) names += (names.empty() ? "" : ", ") + name;
      b.events.push_back({0, "layers", names});
    }
    b.amax_tensors = amax_tensors;
    publish(b);
  }

  StepMemory fp8_memory(device), ref_memory(device);
  // A blow-up (docs/numerics.md, "Divergence"): kBlowUpSteps consecutive steps (all of a
  // shorter run) whose loss is non-finite or over max(10 x B, B + 1), B the run's first
  // finite loss; for the MLP with drift the limit is widened by the swing drift gives the
  // inputs' squares on its own, 4^drift, but by kMaxSwing at most: a loss past a million
  // times the first is absurd whatever the drift (drift=30 reached 9e12 and finished).
  const int64_t blow_up_steps = std::min<int64_t>(kBlowUpSteps, cfg.steps);
  const double swing = cfg.model == ModelKind::Mlp && cfg.drift > 0
                           ? std::min(std::exp2(2 * cfg.drift), kMaxSwing)
                           : 1;
  double first_loss = std::nan("");
  int64_t over_limit = 0;
  double last_loss = std::nan(""), last_limit = std::nan("");  // of the last step run
  int64_t ref_over_limit = 0;  // the reference's consecutive steps over the same limit
  double last_ref_loss = std::nan("");
  const auto limit_basis = [&] {  // how the limit was reached, for the messages
    return "10 x the first loss " + g6(first_loss) +
           (swing == 1           ? std::string()
            : swing == kMaxSwing ? ", x 1e5 at most for drift: a loss past it is absurd"
                                 : ", x 4^drift = " + g6(swing) + " for drift");
  };
  // Where the high-precision reference blew up over the same steps, the settings (a
  // learning rate too high, say) diverge, not FP8 alone: said after the reason.
  const auto reference_too = [&] {
    return ref_over_limit >= over_limit
               ? "; the high-precision reference blew up too (" + g6(last_ref_loss) +
                     " at that step): the settings diverge, not FP8 alone"
               : std::string();
  };

  // What the host knows of a step once it is launched, and what it reads when the step
  // is done (complete()).
  struct Pending {
    int64_t step = 0;
    double lr = 0;
    int64_t tokens = 0;
    bool sampling = false, stop_now = false;
    double fp8_mem = NAN, ref_mem = NAN;
    double eval_loss = NAN, ref_eval_loss = NAN;
    std::shared_ptr<StepReadback> fp8_read, ref_read;
    std::vector<LayerSample> samples;  // a sampling step read after the next launch
  };
  // The mean loss over the data's held-out windows, after a step's update: without
  // gradients, the FP8 layers with their current scales and their state left as it was.
  const auto evaluate = [&](train::TrainModel& model) {
    torch::NoGradGuard no_grad;
    const auto lin = train::linear_layers(model);
    for (auto& [name, l] : lin) l->evaluating = true;
    double sum = 0;
    int64_t tokens = 0;
    try {
      for (int64_t i = 0; i < data->eval_batches(); ++i) {
        const Batch b = data->eval_batch(i, device);
        sum += model.loss(b).item<double>() * static_cast<double>(b.tokens);
        tokens += b.tokens;
      }
    } catch (...) {
      for (auto& [name, l] : lin) l->evaluating = false;
      throw;
    }
    for (auto& [name, l] : lin) l->evaluating = false;
    return tokens > 0 ? sum / static_cast<double>(tokens) : NAN;
  };
  // On a GPU (one process) a step is launched before the previous one is read: the host
  // queues step s + 1 while the GPU runs step s, and never waits for a step's loss while
  // the GPU idles. A step that samples statistics takes them off the layers as it is
  // launched (LayerSample), so it too is read after the next launch. Across ranks every
  // step's exchange waits anyway.
  const bool lookahead = device.is_cuda() && !group;
  auto last_end = std::chrono::steady_clock::now();  // the last step's, as complete() saw it
  const auto launch = [&](int64_t step) {
    Pending p;
    p.step = step;
    p.lr = lr_at(step);
    fp8.set_lr(p.lr);
    const Batch global_batch = data->next(device);
    const Batch batch = shard(global_batch, ranks);
    p.tokens = global_batch.tokens;
    const bool last = step + 1 == cfg.steps;  // sampled whatever the intervals
    p.sampling = (cfg.stats_interval > 0 && (step % cfg.stats_interval == 0 || last)) ||
                 (cfg.sqnr_interval > 0 && (step % cfg.sqnr_interval == 0 || last));
    p.fp8_read = std::make_shared<StepReadback>(device);
    fp8_memory.begin();
    p.fp8_read->begin();
    // Across ranks a stop (Ctrl-C, a signal) is agreed on in the step's exchange, so
    // that every rank ends after the same step.
    const Launched fr = fp8.forward_backward(batch, cfg.grad_clip, stop_flag.load());
    fp8.update(fr);
    // Before the readback's end: waiting for it covers the histories' copies.
    if (lookahead && p.sampling) {
      p.samples.reserve(layers.size());
      for (auto& [name, l] : layers) p.samples.emplace_back(name, *l);
    }
    p.fp8_read->end(fr,
                    amax_layers.empty() ? torch::Tensor() : gather_step_amax(amax_layers, device));
    p.stop_now = group ? fr.stop : stop_flag.load();
    p.fp8_mem = fp8_memory.end(fp8, p.sampling);
    fp8.drop_grads();
    if (ref.model) {
      ref.set_lr(p.lr);
      p.ref_read = std::make_shared<StepReadback>(device);
      ref_memory.begin();
      p.ref_read->begin();
      const Launched rr = ref.forward_backward(batch, cfg.grad_clip);
      ref.update(rr);
      p.ref_read->end(rr);
      p.ref_mem = ref_memory.end(ref, p.sampling);
      ref.drop_grads();
    }
    if (data->eval_batches() > 0 && cfg.eval_interval > 0 &&
        (step % cfg.eval_interval == 0 || last)) {
      p.eval_loss = evaluate(*fp8.model);
      if (ref.model) p.ref_eval_loss = evaluate(*ref.model);
    }
    return p;
  };
  // Reads a launched step and reports it; true when the run ended with it.
  const auto complete = [&](Pending& p) -> bool {
    const int64_t step = p.step;
    p.fp8_read->wait();
    const double loss = p.fp8_read->loss(), norm = p.fp8_read->norm();
    MetricBatch b;
    const bool finite = std::isfinite(loss) && std::isfinite(norm);
    const double ms = p.fp8_read->ms();
    StepMetrics m;
    m.step = step;
    m.loss = loss;
    m.grad_norm = norm;
    m.lr = p.lr;
    m.step_ms = ms;
    m.tokens_per_s = ms > 0 ? static_cast<double>(p.tokens) / (ms / 1000.0) : 0;
    m.ref_loss = m.loss_gap = std::nan("");
    m.mem_fp8 = p.fp8_mem;
    if (p.ref_read) {
      p.ref_read->wait();
      m.mem_ref = p.ref_mem;
      m.ref_loss = p.ref_read->loss();
      m.loss_gap = loss - m.ref_loss;
    }
    m.peak_rss = run_memory.growth();
    m.eval_loss = p.eval_loss;
    m.ref_eval_loss = p.ref_eval_loss;
    const auto now = std::chrono::steady_clock::now();
    if (step > 0) {
      const double wall = std::chrono::duration<double>(now - last_end).count();
      m.wall_tokens_per_s = wall > 0 ? static_cast<double>(p.tokens) / wall : NAN;
    }
    last_end = now;
    if (step % cfg.log_interval == 0 || step + 1 == cfg.steps || !finite ||
        std::isfinite(p.eval_loss))
      b.steps.push_back(m);
    if (!amax_layers.empty()) b.step_amax.push_back({step, p.fp8_read->amax()});
    if (p.sampling) {
      if (group && !layers.empty() && layers.front().second->probe().stats_step == step)
        b.ranks = gather_rank_scales(*group, step, layers, device);
      const auto add_layer = [&](const std::string& name, const Float8Probe& pr,
                                 const auto& amax_history, const Float8LinearConfig* lc) {
        if (pr.stats_step == step) {
          for (const RoleEntry& r : kRoles)
            add_role(b, step, name, r.value, pr.stats(r.value), amax_history(r.value),
                     lc ? *lc : run_fp8);
        }
        if (pr.sqnr_step == step)
          b.sqnr.push_back({step, name, pr.fprop_sqnr_db, pr.dgrad_sqnr_db, pr.wgrad_sqnr_db});
      };
      if (!p.samples.empty()) {
        for (LayerSample& ls : p.samples)
          add_layer(
              *ls.name, ls.settled(), [&](Role r) { return ls.amax_history(r); }, ls.config);
      } else {
        for (auto& [name, l] : layers) {
          LinearLayerImpl& layer = *l;
          add_layer(
              name, layer.probe(),
              [&](Role r) {
                return layer.config() && layer.config()->delayed ? layer.state().amax_history(r)
                                                                 : std::vector<float>();
              },
              layer.config());
        }
      }
    }
    steps = step + 1;
    if (!finite) {
      const std::string what = "non-finite " +
                               std::string(std::isfinite(loss) ? "gradient norm" : "loss") +
                               " at step " + std::to_string(step);
      if (cfg.on_nonfinite == OnNonfinite::Stop) {
        publish(b);
        finish(RunStatus::Diverged, what);
        return true;
      }
      b.events.push_back({step, "skipped", what + ": update skipped"});
    }
    const double limit = std::max(10 * first_loss, first_loss + 1) * swing;
    last_loss = loss;
    last_limit = limit;
    if (p.ref_read) {
      last_ref_loss = m.ref_loss;
      const bool ref_over = !std::isfinite(m.ref_loss) || m.ref_loss > limit;
      ref_over_limit = ref_over && std::isfinite(first_loss) ? ref_over_limit + 1 : 0;
    }
    if (!std::isfinite(loss) || (std::isfinite(first_loss) && loss > limit)) {
      ++over_limit;
    } else {
      over_limit = 0;
      if (!std::isfinite(first_loss)) first_loss = loss;
    }
    if (over_limit >= blow_up_steps) {
      publish(b);
      finish(RunStatus::Diverged,
             std::isfinite(loss)
                 ? "loss blew up: " + g6(loss) + " at step " + std::to_string(step) + ", over " +
                       g6(limit) + " (" + limit_basis() + ") for " + std::to_string(over_limit) +
                       " consecutive steps" + reference_too()
                 : "non-finite or blown-up loss for " + std::to_string(over_limit) +
                       " consecutive steps (" + g6(loss) + " at step " + std::to_string(step) +
                       ")" + reference_too());
      return true;
    }
    publish(b);
    if (p.stop_now) {
      finish(RunStatus::Stopped, "stopped after " + counted(step + 1, "step"));
      return true;
    }
    return false;
  };

  std::optional<Pending> pending;
  StepTrace trace(device);
  for (int64_t step = 0; step < cfg.steps; ++step) {
    // A pause or a stop first reports the step still on its way.
    if (pending && (pause_flag.load() || stop_flag.load())) {
      Pending p = std::move(*pending);
      pending.reset();
      if (complete(p)) return;
    }
    if (!group && !wait_if_paused(step)) {
      finish(RunStatus::Stopped, "stopped after " + counted(step, "step"));
      return;
    }
    trace.before(step);
    Pending p = [&] {
#if defined(FP8WB_TORCH_CUDA)
      if (trace.on()) {
        RECORD_USER_SCOPE("fp8wb_step");
        return launch(step);
      }
#endif
      return launch(step);
    }();
    if (pending) {
      Pending prev = std::move(*pending);
      pending.reset();
      if (complete(prev)) return;
    }
    if (lookahead) {
      pending = std::move(p);
    } else if (complete(p)) {
      return;
    }
  }
  if (pending) {
    Pending p = std::move(*pending);
    pending.reset();
    if (complete(p)) return;
  }
  if (over_limit > 0) {
    // The run ran out of steps while its loss was over the limit or not finite (fewer
    // than kBlowUpSteps steps of it): not a finished run, whose loss came back.
    const int64_t last = cfg.steps - 1;
    finish(RunStatus::Diverged,
           std::isfinite(last_loss)
               ? "loss blew up at the end of the run: " + g6(last_loss) + " at the last step, " +
                     std::to_string(last) + ", over " + g6(last_limit) + " (" + limit_basis() +
                     ") for its last " + counted(over_limit, "step")
               : "non-finite or blown-up loss at the end of the run: its last " +
                     counted(over_limit, "step") + " (" + g6(last_loss) + " at step " +
                     std::to_string(last) + ")" + reference_too());
    return;
  }
  if (ranks.rank == 0) save_weights(*fp8.model);
  finish(RunStatus::Finished, "");
}

// The model's parameters (fp32) as a safetensors file, which the checkpoint inspector
// opens like any other.
void Trainer::Impl::save_weights(torch::nn::Module& model) {
  if (cfg.weights.empty()) return;
  std::vector<TensorToWrite> out;
  int64_t vocab_written = 0;  // the llama's embedding rows (its vocabulary)
  for (const auto& p : model.named_parameters()) {
    if (p.key() == "model.embed_tokens.weight") vocab_written = p.value().size(0);
    const at::Tensor t = p.value().detach().to(at::kCPU, at::kFloat).contiguous();
    TensorToWrite w{p.key(), StDtype::F32, t.sizes().vec(), {}};
    const auto* b = static_cast<const uint8_t*>(t.data_ptr());
    w.bytes.assign(b, b + t.numel() * 4);
    out.push_back(std::move(w));
  }
  // A llama's parameters have Hugging Face's names: written as model.safetensors, with a
  // config.json beside it (where there is none), the folder is a checkpoint others load.
  std::string also;
  const size_t slash = cfg.weights.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : cfg.weights.substr(0, slash);
  const std::string file = slash == std::string::npos ? cfg.weights : cfg.weights.substr(slash + 1);
  std::map<std::string, std::string> meta{{"written_by", "fp8wb train"},
                                          {"run", std::to_string(run_id)}};
  if (cfg.model == ModelKind::Llama) meta["format"] = "pt";  // as Hugging Face's own files say
  write_safetensors(cfg.weights, out, meta);
  if (cfg.model == ModelKind::Llama && file == "model.safetensors") {
    const std::string config = folder + "/config.json";
    struct stat st {};
    if (stat(config.c_str(), &st) != 0) {
      RunConfig shape = cfg;
      shape.vocab = static_cast<int>(vocab_written);
      const std::string text = hf_config_json(shape);
      write_file_atomically(config, [&](std::ostream& o) { o << text; });
      also = ", with " + config;
    }
  }
  MetricBatch b;
  b.events.push_back({steps.load(), "weights", "final weights written to " + cfg.weights + also});
  publish(b);
}

void Trainer::run() {
  try {
    impl_->body();
  } catch (const c10::Error& e) {
    impl_->finish(RunStatus::Failed, without_backtrace(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    impl_->finish(RunStatus::Failed, without_backtrace(e.what()));
  } catch (...) {
    impl_->finish(RunStatus::Failed, "unknown error");
  }
}

int Trainer::cuda_device_count() {
  return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

std::string Trainer::resolve_device(const std::string& device) {
  if (device == "cpu") return "cpu";
  if (device != "cuda" && device.rfind("cuda:", 0) != 0) {
    throw std::invalid_argument("device \"" + device + "\" is not one of cpu, cuda, cuda:N");
  }
  if (!torch::cuda::is_available()) {
    throw std::invalid_argument("device " + device + " was asked for, but " +
                                (probe_backend().torch_cuda_build
                                     ? std::string("no CUDA device is visible")
                                     : std::string("this build's LibTorch has no CUDA")) +
                                "; use device=cpu");
  }
  const int64_t n = static_cast<int64_t>(torch::cuda::device_count());
  int64_t index = 0;
  if (device.size() > 5) {
    try {
      index = std::stoll(device.substr(5));
    } catch (const std::exception&) {
      throw std::invalid_argument("device \"" + device + "\": N in cuda:N must be a number");
    }
  }
  if (index < 0 || index >= n) {
    throw std::invalid_argument("device " + device + " does not exist: " + std::to_string(n) +
                                " CUDA device(s) are visible");
  }
  return "cuda:" + std::to_string(index);
}

}  // namespace fp8wb
