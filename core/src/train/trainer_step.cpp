// Torch translation unit: the parts of one training step (trainer_step.h): a model's
// forward, backward and update across ranks, the readback of its loss and norm, its
// memory on a GPU, the statistics taken off the FP8 layers at a sampled step, the trace
// FP8WB_TRACE asks for, a rank's share of the batch and the ranks' scales.
#include "trainer_step.h"

#include <cmath>
#include <cstdlib>
#include <stdexcept>

#if defined(FP8WB_TORCH_CUDA)
#include <torch/csrc/autograd/profiler_kineto.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace fp8wb::train {

int64_t Stepper::persistent_bytes() const {
  int64_t n = opt->state_bytes();
  for (const auto& p : params) n += static_cast<int64_t>(p.nbytes());
  return n;
}

Launched Stepper::forward_backward(const Batch& b, double clip, bool stop_asked) {
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
  r.norm = clip_grad_norm(params, clip);
  return r;
}

void Stepper::update(const Launched& r) {
  const torch::Tensor sum = r.loss.to(r.norm.device(), torch::kFloat) + r.norm.to(torch::kFloat);
  opt->step(torch::isfinite(sum).logical_not().to(torch::kFloat).reshape({1}));
}

void StepReadback::begin() {
  t0_ = std::chrono::steady_clock::now();
#if defined(FP8WB_TORCH_CUDA)
  if (cuda_) {
    start_ = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
    start_->record(at::cuda::getCurrentCUDAStream());
  }
#endif
}

void StepReadback::end(const Launched& r, const torch::Tensor& amax) {
  const torch::Tensor v =
      torch::stack({r.loss.to(torch::kDouble).reshape({}), r.norm.to(torch::kDouble).reshape({})});
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

void StepReadback::wait() {
#if defined(FP8WB_TORCH_CUDA)
  if (cuda_ && end_) {
    end_->synchronize();
    ms_ = start_->elapsed_time(*end_);
    end_.reset();
  }
#endif
}

std::vector<float> StepReadback::amax() const {
  if (!amax_.defined()) return {};
  const float* p = amax_.data_ptr<float>();
  return std::vector<float>(p, p + amax_.numel());
}

void StepMemory::begin() {
#if defined(FP8WB_TORCH_CUDA)
  if (!device_.is_cuda()) return;
  namespace alloc = c10::cuda::CUDACachingAllocator;
  before_ = alloc::getDeviceStats(device_.index()).allocated_bytes[0].current;
  alloc::resetPeakStats(device_.index());
#endif
}

double StepMemory::end(const Stepper& s, bool sampling) {
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

LayerSample::LayerSample(const std::string& layer_name, LinearLayerImpl& l) : name(&layer_name) {
  Float8LinearState& s = l.state();
  probe = s.probe;
  pending = std::move(s.pending);
  s.pending = nullptr;
  config = l.config();
  delayed = config && config->delayed;
  state = &s;
}

std::vector<Float8LinearState::AmaxHistoryCopy> amax_history_copies(
    const std::vector<std::pair<const Float8LinearState*, Role>>& which) {
  std::vector<Float8LinearState::AmaxHistoryCopy> out(which.size());
  std::vector<at::Tensor> rings;  // the CUDA rings of one device, in order
  std::vector<size_t> places;     // their places in `out`
  for (size_t i = 0; i < which.size(); ++i) {
    const Float8RoleHistory& h = which[i].first->delayed.at(role_index(which[i].second));
    const bool gathered = h.device.defined() && h.device.is_cuda() && !h.host &&
                          (rings.empty() || rings.front().device() == h.device.device());
    if (!gathered) {
      out[i] = which[i].first->amax_history_copy(which[i].second, /*wait=*/false);
      continue;
    }
    rings.push_back(h.ring());
    places.push_back(i);
    out[i].head = h.head;
  }
  if (rings.empty()) return out;
  const at::Tensor all = at::cat(rings);
  at::Tensor host = at::empty(all.sizes(), all.options().device(at::kCPU).pinned_memory(true));
  host.copy_(all, /*non_blocking=*/true);
  int64_t offset = 0;
  for (size_t k = 0; k < rings.size(); ++k) {
    out[places[k]].ring = host.narrow(0, offset, rings[k].numel());
    offset += rings[k].numel();
  }
  return out;
}

void LayerSample::copy_histories(std::vector<LayerSample>& samples) {
  std::vector<std::pair<const Float8LinearState*, Role>> which;
  for (const LayerSample& ls : samples) {
    if (!ls.delayed) continue;
    for (const RoleEntry& r : kRoles) which.emplace_back(ls.state, r.value);
  }
  std::vector<Float8LinearState::AmaxHistoryCopy> copies = amax_history_copies(which);
  size_t k = 0;
  for (LayerSample& ls : samples) {
    if (ls.delayed) {
      for (const RoleEntry& r : kRoles) ls.history[role_index(r.value)] = std::move(copies[k++]);
    }
    ls.state = nullptr;
  }
}

#if defined(FP8WB_TORCH_CUDA)
StepTrace::StepTrace(const torch::Device& d) {
  const char* p = std::getenv("FP8WB_TRACE");
  if (p && *p && d.is_cuda()) path_ = p;
}
void StepTrace::before(int64_t step) {
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
#endif

Batch shard(const Batch& b, const RankInfo& r) {
  if (r.world <= 1) return b;
  const int64_t rows = b.x.size(0) / r.world;
  return {b.x.narrow(0, r.rank * rows, rows), b.y.narrow(0, r.rank * rows, rows),
          b.tokens / r.world};
}

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

}  // namespace fp8wb::train
