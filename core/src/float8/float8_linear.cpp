// Torch translation unit: Float8Linear and its autograd function (CPU emulation: FP8
// codes -> fp32, fp32 GEMM; products of FP8 values are exact in fp32).
#include "fp8wb/core/torch/float8_linear.h"

#include <torch/custom_class.h>

#include <cmath>
#include <stdexcept>
#include <utility>

#include "float8_linear_internal.h"
#include "fp8wb/kernels/quantize_cpu.h"

namespace fp8wb {
namespace {

using detail::Float8Backward;
using detail::sqnr_db;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// An operand quantized along its rows' K: per-group scale_inv and the values its codes
// stand for (the emulated GEMMs multiply those; the codes themselves are not kept).
struct Quantized {
  at::Tensor scale_inv;  // float [groups]
  at::Tensor dequant;    // float [rows, cols]: decode(code) * scale_inv
  TensorStats stats;
  float tensor_amax = NAN;  // tensorwise: the amax behind the scale (NaN otherwise)
};

// The passes over an operand use the caller's share of the cores (LibTorch's intra-op
// threads); their results do not depend on it.
int pass_threads() {
  return at::get_num_threads();
}

// A tensorwise amax, the maximum over every rank's where `reduce` is given.
float reduced(float amax, const AmaxReducer* reduce) {
  if (!reduce || !*reduce) return amax;
  at::Tensor t = at::full({1}, amax, at::kFloat);
  (*reduce)(t);
  return t.data_ptr<float>()[0];
}

// Current scaling, or delayed scaling from `delayed` (which then records this step's amax).
// With `reduce`, a tensorwise scale comes from the maximum of every rank's amax.
Quantized quantize_operand(const at::Tensor& t, const QuantRecipe& recipe, bool stats,
                           DelayedScaler* delayed = nullptr, const AmaxReducer* reduce = nullptr) {
  TORCH_CHECK(t.dim() == 2 && t.scalar_type() == at::kFloat && t.is_contiguous() && t.is_cpu(),
              "internal: bad operand");
  Quantized q;
  const int64_t rows = t.size(0), cols = t.size(1);
  const int threads = pass_threads();
  q.dequant = at::empty({rows, cols}, at::kFloat);
  StatsOptions so;
  so.enabled = so.histogram = so.error_map = stats;
  // The dequantized values the emulated GEMM multiplies, in the pass that rounds them.
  QuantizeTargets out;
  out.dequant = q.dequant.data_ptr<float>();
  const TensorRef ref = TensorRef::of(t.data_ptr<float>(), rows, cols);
  if (delayed) {
    const GroupLayout layout = make_layout(recipe, rows, cols);
    const bool bootstrap =
        delayed->steps() == 0 && delayed->config().initial == InitialScale::BootstrapCurrent;
    const float s = delayed->scale_for_step(
        bootstrap ? reduced(compute_amax(ref, layout, threads).tensor_amax, reduce) : 0);
    ScaleSet scales;
    scales.layout = layout;
    scales.scale = {s};
    scales.scale_inv = {1.0f / s};
    const QuantizeResult r = quantize(ref, recipe, scales, out, so, nullptr, threads);
    q.tensor_amax =
        reduced(stats ? r.stats.amax() : compute_amax(ref, layout, threads).tensor_amax, reduce);
    delayed->update(q.tensor_amax);
    q.scale_inv = at::full({1}, scales.scale_inv[0], at::kFloat);
    q.stats = r.stats;
    return q;
  }
  if (reduce && *reduce && recipe.kind == ScalingKind::Tensorwise) {
    const GroupLayout layout = make_layout(recipe, rows, cols);
    AmaxResult am = compute_amax(ref, layout, threads);
    am.tensor_amax = reduced(am.tensor_amax, reduce);
    for (float& g : am.group_amax) g = am.tensor_amax;
    const ScaleSet scales = compute_scales(recipe, layout, am.group_amax, am.tensor_amax);
    q.stats = quantize(ref, recipe, scales, out, so, nullptr, threads).stats;
    q.scale_inv = at::full({1}, scales.scale_inv[0], at::kFloat);
    q.tensor_amax = am.tensor_amax;
    return q;
  }
  if (recipe.kind == ScalingKind::Tensorwise) {
    // quantize_current()'s steps, keeping the amax the scale came from.
    const GroupLayout layout = make_layout(recipe, rows, cols);
    const AmaxResult am = compute_amax(ref, layout, threads);
    const ScaleSet scales = compute_scales(recipe, layout, am.group_amax, am.tensor_amax);
    q.stats = quantize(ref, recipe, scales, out, so, nullptr, threads).stats;
    q.scale_inv = at::full({1}, scales.scale_inv[0], at::kFloat);
    q.tensor_amax = am.tensor_amax;
    return q;
  }
  const auto cq = quantize_current(ref, recipe, out, so, nullptr, threads);
  q.scale_inv = at::from_blob(const_cast<float*>(cq.scales.scale_inv.data()),
                              {static_cast<int64_t>(cq.scales.scale_inv.size())}, at::kFloat)
                    .clone();
  q.stats = cq.result.stats;
  return q;
}

float first_scale(const Quantized& q) {
  return q.scale_inv.numel() > 0 ? 1.0f / q.scale_inv.data_ptr<float>()[0] : 0.0f;
}

// The role's host scaler under delayed scaling (made or reset when the config changed),
// else null.
DelayedScaler* host_scaler(Float8LinearState* state, Role role, const Float8LinearConfig& c,
                           Format format) {
  if (!c.delayed || !state) return nullptr;
  auto& h = state->history(role).host;
  if (!h || !detail::same_delayed(h->config(), c.delayed_scaling))
    h.emplace(format, c.delayed_scaling);
  return &*h;
}

const AmaxReducer* reducer_of(Float8LinearState* state) {
  return state && state->reduce_amax ? &state->reduce_amax : nullptr;
}

struct Float8LinearFunction : public torch::autograd::Function<Float8LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const Float8LinearConfig& cfg,
                            Float8LinearState* state, bool stats, bool sqnr) {
    Float8Probe* probe = state ? &state->probe : nullptr;
    const int64_t k = weight.size(1), n = weight.size(0);
    const at::Tensor x2 = x.reshape({-1, k}).to(at::kFloat).contiguous();
    const at::Tensor w2 = weight.to(at::kFloat).contiguous();
    at::Tensor y;
    // High precision x only where a GEMM that needs it runs in high precision (or to
    // sample the wgrad SQNR); otherwise backward keeps the values of x's FP8 codes: the
    // fp32 that the emulated wgrad multiplies, as many bytes as the high-precision layer
    // keeps of x, and no second decoding of the codes in backward.
    at::Tensor saved_x = x2, x_fp8, w_fp8;
    if (cfg.fprop_fp8 || cfg.wgrad_fp8) {
      Quantized qx = quantize_operand(x2, cfg.input, stats,
                                      host_scaler(state, Role::Input, cfg, cfg.input.format),
                                      reducer_of(state));
      if (probe && stats) probe->input = {true, qx.stats, first_scale(qx)};
      if (state) state->step_amax[role_index(Role::Input)] = qx.tensor_amax;
      x_fp8 = qx.dequant;
      if (cfg.fprop_fp8) {
        Quantized qw = quantize_operand(w2, cfg.weight, stats,
                                        host_scaler(state, Role::Weight, cfg, cfg.weight.format),
                                        reducer_of(state));
        if (probe && stats) probe->weight = {true, qw.stats, first_scale(qw)};
        if (state) state->step_amax[role_index(Role::Weight)] = qw.tensor_amax;
        y = at::matmul(qx.dequant, qw.dequant.t());
        if (probe) probe->gemms_emulated++;
        // A tensorwise weight is the same FP8 tensor along either axis: dgrad reuses it.
        if (cfg.weight.kind == ScalingKind::Tensorwise) w_fp8 = qw.dequant;
      } else {
        y = at::matmul(x2, w2.t());
      }
      if (sqnr && probe && cfg.fprop_fp8) probe->fprop_sqnr_db = sqnr_db(at::matmul(x2, w2.t()), y);
      if (cfg.wgrad_fp8 && !sqnr) saved_x = at::Tensor();
    } else {
      y = at::matmul(x2, w2.t());
    }
    ctx->save_for_backward({weight, x_fp8, saved_x, w_fp8});
    const bool has_bias = bias.defined() && bias.numel() > 0;
    if (has_bias) y = y + bias.to(at::kFloat);
    auto plan = c10::make_intrusive<Float8Backward>();
    plan->config = cfg;
    plan->state = state;
    plan->stats = stats;
    plan->sqnr = sqnr;
    plan->has_bias = has_bias;
    detail::save_for_backward(ctx, std::move(plan));
    std::vector<int64_t> out_shape = x.sizes().vec();
    out_shape.back() = n;
    return y.reshape(out_shape).to(x.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& weight = saved[0];
    const c10::intrusive_ptr<Float8Backward> plan = detail::saved_for_backward(ctx);
    const Float8LinearConfig& cfg = plan->config;
    const QuantRecipe& rin = cfg.input;
    const QuantRecipe& rw = cfg.weight;
    const QuantRecipe& rdy = cfg.grad_output;
    const bool dgrad_fp8 = cfg.dgrad_fp8, wgrad_fp8 = cfg.wgrad_fp8, stats = plan->stats,
               sqnr = plan->sqnr;
    Float8LinearState* state = plan->state;
    Float8Probe* probe = state ? &state->probe : nullptr;
    const int64_t k = weight.size(1), n = weight.size(0);
    const at::Tensor& g = grads[0];
    const at::Tensor dy = g.reshape({-1, n}).to(at::kFloat).contiguous();
    const at::Tensor w2 = weight.to(at::kFloat).contiguous();

    // The x the forward saw: its FP8 values when it was quantized (for wgrad), else as saved.
    const at::Tensor x_hp = saved[2];  // high precision: when a GEMM needs it, or to sample SQNR
    const at::Tensor x2 = wgrad_fp8 && saved[1].defined() ? saved[1] : saved[2];

    // dgrad: dx = dy w, contracting over N: dy along N as it is, w along N through w^T.
    // A tensorwise scale does not depend on the axis, so the same FP8 values serve both
    // ways and only per-row/per-block recipes quantize the transposes again.
    at::Tensor dx, dy_fp8;
    if (dgrad_fp8 || (wgrad_fp8 && rdy.kind == ScalingKind::Tensorwise)) {
      Quantized qdy = quantize_operand(
          dy, rdy, stats, host_scaler(state, Role::GradOutput, cfg, rdy.format), reducer_of(state));
      if (probe && stats) probe->grad_output = {true, qdy.stats, first_scale(qdy)};
      if (state) state->step_amax[role_index(Role::GradOutput)] = qdy.tensor_amax;
      dy_fp8 = qdy.dequant;
    }
    if (dgrad_fp8) {
      at::Tensor w_fp8;
      if (saved[3].defined()) {
        w_fp8 = saved[3];
      } else if (rw.kind == ScalingKind::Tensorwise) {
        w_fp8 = quantize_operand(w2, rw, false).dequant;
      } else {
        w_fp8 = quantize_operand(w2.t().contiguous(), rw, false).dequant.t();
      }
      dx = at::matmul(dy_fp8, w_fp8);
      if (probe) probe->gemms_emulated++;
    } else {
      dx = at::matmul(dy, w2);
    }
    // wgrad: dw = dy^T x, contracting over M: both quantized along M. x is the forward's
    // FP8 x; per-row/per-block recipes quantize that FP8 x a second time.
    at::Tensor dw;
    if (wgrad_fp8) {
      const at::Tensor dyt = rdy.kind == ScalingKind::Tensorwise
                                 ? dy_fp8.t()
                                 : quantize_operand(dy.t().contiguous(), rdy, false).dequant;
      const at::Tensor xt = rin.kind == ScalingKind::Tensorwise
                                ? x2.t()
                                : quantize_operand(x2.t().contiguous(), rin, false).dequant;
      dw = at::matmul(dyt, xt.t());
      if (probe) probe->gemms_emulated++;
    } else {
      dw = at::matmul(dy.t(), x2);
    }
    if (sqnr && probe) {
      if (dgrad_fp8) probe->dgrad_sqnr_db = sqnr_db(at::matmul(dy, w2), dx);
      if (wgrad_fp8 && x_hp.defined()) probe->wgrad_sqnr_db = sqnr_db(at::matmul(dy.t(), x_hp), dw);
    }
    at::Tensor db;
    if (plan->has_bias) db = dy.sum(0);
    std::vector<int64_t> x_shape = g.sizes().vec();
    x_shape.back() = k;
    return {dx.reshape(x_shape).to(g.scalar_type()),
            dw.to(weight.scalar_type()),
            db,
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

bool dims_fit(int64_t in, int64_t out, const Float8LinearConfig& c) {
  int64_t block = 16;
  for (const QuantRecipe* r : {&c.input, &c.weight, &c.grad_output}) {
    if (r->kind == ScalingKind::Block1x128 || r->kind == ScalingKind::Block128x128)
      block = std::max<int64_t>(block, 128);
    if (r->kind == ScalingKind::MX) block = std::max<int64_t>(block, 32);
  }
  return in % block == 0 && out % block == 0;
}

void convert_children(torch::nn::Module& m, const std::string& prefix,
                      const Float8LinearConfig& cfg, const ConvertOptions& opt,
                      ConvertReport& report) {
  for (const auto& item : m.named_children()) {
    const std::string& name = item.key();
    const std::string full = prefix.empty() ? name : prefix + "." + name;
    torch::nn::Module* child = item.value().get();
    if (auto* layer = dynamic_cast<LinearLayerImpl*>(child)) {
      const int64_t in = layer->in_features(), out = layer->out_features();
      std::string why;
      for (const auto& s : opt.skip_names) {
        if (s == full || s == name) why = "skipped by name";
      }
      if (why.empty() && opt.skip_indivisible && !dims_fit(in, out, cfg)) {
        why = std::to_string(in) + " -> " + std::to_string(out) +
              " does not divide into the FP8 GEMM's tiles";
      }
      if (why.empty() && opt.gpu_min_weight_elements > 0 && layer->weight.is_cuda() &&
          in * out < opt.gpu_min_weight_elements) {
        why = std::to_string(in) + " -> " + std::to_string(out) +
              " is too small for FP8 GEMMs to pay off on a GPU";
      }
      if (why.empty() && opt.filter && !opt.filter(full, in, out)) why = "skipped by the filter";
      if (why.empty()) {
        layer->to_float8(cfg);
        report.converted.push_back(full);
      } else {
        report.skipped.push_back(full + ": " + why);
      }
    } else if (dynamic_cast<torch::nn::LinearImpl*>(child) != nullptr) {
      report.not_convertible.push_back(full);
    } else {
      convert_children(*child, full, cfg, opt, report);
    }
  }
}

void validate_config(const Float8LinearConfig& c) {
  for (const QuantRecipe* r : {&c.input, &c.weight, &c.grad_output}) validate_recipe(*r);
  if (c.stats_interval < 0 || c.sqnr_interval < 0) {
    throw std::invalid_argument("stats_interval and sqnr_interval must be >= 0 (0: never), not " +
                                std::to_string(std::min(c.stats_interval, c.sqnr_interval)));
  }
  if (!c.delayed) return;
  validate_delayed_config(c.delayed_scaling);
  for (const RoleEntry& role : kRoles) {
    const QuantRecipe& r = c.recipe(role.value);
    if (r.kind != ScalingKind::Tensorwise) {
      throw std::invalid_argument("delayed scaling is tensorwise; the " + std::string(role.name) +
                                  " role uses " + std::string(scaling_kind_name(r.kind)) +
                                  " scaling");
    }
  }
}

// Parameters initialised as torch::nn::Linear initialises them.
void init_linear_parameters(torch::nn::Module& m, int64_t in_features, int64_t out_features,
                            bool with_bias, torch::Tensor& weight, torch::Tensor& bias) {
  if (in_features <= 0 || out_features <= 0) {
    throw std::invalid_argument("a linear layer needs positive dimensions, not " +
                                std::to_string(in_features) + " -> " +
                                std::to_string(out_features));
  }
  torch::nn::Linear init(torch::nn::LinearOptions(in_features, out_features).bias(with_bias));
  weight = m.register_parameter("weight", init->weight.detach().clone());
  if (with_bias) bias = m.register_parameter("bias", init->bias.detach().clone());
}

}  // namespace

Float8LinearImpl::Float8LinearImpl(int64_t in_features, int64_t out_features, bool with_bias,
                                   Float8LinearConfig config)
    : config_(std::move(config)), state_(std::make_shared<Float8LinearState>()) {
  init_linear_parameters(*this, in_features, out_features, with_bias, weight, bias);
  validate_config(config_);
}

Float8LinearImpl::Float8LinearImpl(const torch::nn::LinearImpl& linear, Float8LinearConfig config)
    : config_(std::move(config)), state_(std::make_shared<Float8LinearState>()) {
  weight = register_parameter("weight", linear.weight);
  if (linear.bias.defined()) bias = register_parameter("bias", linear.bias);
  validate_config(config_);
}

torch::Tensor Float8LinearImpl::forward(const torch::Tensor& x) {
  return float8_linear(x, weight, bias, config_, state_.get());
}

torch::Tensor float8_linear(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias, const Float8LinearConfig& config,
                            Float8LinearState* state) {
  if (weight.dim() != 2) {
    throw std::invalid_argument("an FP8 linear layer's weight is [out, in], not " +
                                c10::str(weight.sizes()));
  }
  const int64_t in = weight.size(1);
  if (x.dim() < 1 || x.size(-1) != in) {
    throw std::invalid_argument("an FP8 linear layer expects inputs [..., " + std::to_string(in) +
                                "], got " + c10::str(x.sizes()));
  }
  for (const auto& [what, t] :
       {std::pair<const char*, const at::Tensor*>{"inputs", &x}, {"weights", &weight}}) {
    if (t->scalar_type() != at::kFloat && t->scalar_type() != at::kBFloat16) {
      throw std::invalid_argument(std::string("FP8 linear layers take float32 or bfloat16 ") +
                                  what + ", not " + c10::toString(t->scalar_type()));
    }
  }
  if (x.device() != weight.device() || (bias.defined() && bias.device() != weight.device())) {
    throw std::invalid_argument("an FP8 linear layer's input is on " + x.device().str() +
                                " but its parameters are on " + weight.device().str());
  }
  if (config.delayed && !state) {
    throw std::invalid_argument(
        "delayed scaling keeps an amax history per layer: use Float8Linear or LinearLayer, or "
        "pass a Float8LinearState");
  }
  Float8Probe* probe = state ? &state->probe : nullptr;
  // Statistics of earlier steps that have arrived are taken in here on the CPU; on a GPU
  // after the forward's launches (float8_linear_cuda), where the host's work overlaps the
  // GPU's rather than delaying a step's first kernels.
  if (state && !x.is_cuda()) state->poll();
  const int64_t step = probe ? probe->steps++ : 0;
  const bool last = step == config.final_step;
  const bool stats = config.stats_interval > 0 && (step % config.stats_interval == 0 || last);
  const bool sqnr = config.sqnr_interval > 0 && (step % config.sqnr_interval == 0 || last);
  if (probe && stats) probe->stats_step = step;
  if (probe && sqnr) probe->sqnr_step = step;
  if (x.is_cuda()) return detail::float8_linear_cuda(x, weight, bias, config, state, stats, sqnr);
  if (!x.is_cpu()) {
    throw std::invalid_argument("FP8 linear layers run on the CPU or on CUDA GPUs, not on " +
                                x.device().str());
  }
  // LibTorch 1.13's custom functions reject undefined tensor inputs: no bias travels as
  // an empty tensor.
  return Float8LinearFunction::apply(x, weight, bias.defined() ? bias : at::empty({0}), config,
                                     state, stats, sqnr);
}

std::vector<float> Float8LinearState::amax_history(int index) const {
  if (index < 0 || static_cast<size_t>(index) >= kRoleCount) {
    throw std::out_of_range("no role " + std::to_string(index) + " (roles: " + role_names() + ")");
  }
  return amax_history(kRoles[static_cast<size_t>(index)].value);
}

std::vector<float> Float8LinearState::amax_history(Role role) const {
  return amax_history_copy(role, /*wait=*/true).history();
}

Float8LinearState::AmaxHistoryCopy Float8LinearState::amax_history_copy(Role role,
                                                                        bool wait) const {
  const Float8RoleHistory& h = delayed.at(role_index(role));
  AmaxHistoryCopy c;
  if (h.host) {
    c.host = h.host->history();
    return c;
  }
  if (!h.device.defined()) return c;
  const at::Tensor ring = h.ring();
  if (ring.is_cuda() && wait) {
    c.ring = ring.to(at::kCPU);
  } else if (ring.is_cuda()) {
    c.ring = at::empty(ring.sizes(), ring.options().device(at::kCPU).pinned_memory(true));
    c.ring.copy_(ring, /*non_blocking=*/true);
  } else {
    c.ring = ring.clone();
  }
  c.head = h.head;
  return c;
}

std::vector<float> Float8LinearState::AmaxHistoryCopy::history() const {
  if (!ring.defined()) return host;
  const int64_t w = ring.numel();
  const float* r = ring.data_ptr<float>();
  std::vector<float> out(static_cast<size_t>(w));
  for (int64_t i = 0; i < w; ++i) out[static_cast<size_t>(i)] = r[(head + i) % w];
  return out;
}

torch::Tensor gather_step_amax(const std::vector<Float8LinearState*>& layers,
                               const torch::Device& device) {
  const auto n = static_cast<int64_t>(layers.size() * kRoleCount);
  if (!device.is_cuda()) {
    at::Tensor out = at::empty({n}, at::kFloat);
    float* p = out.data_ptr<float>();
    for (const Float8LinearState* l : layers)
      for (size_t r = 0; r < kRoleCount; ++r) *p++ = l->step_amax[r];
    return out;
  }
  // On the device: one cat of the roles' amax words (NaN for a role without one).
  std::vector<at::Tensor> parts;
  parts.reserve(static_cast<size_t>(n));
  const auto fopt = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor nan;
  for (const Float8LinearState* l : layers) {
    for (size_t r = 0; r < kRoleCount; ++r) {
      const at::Tensor& t = l->step_amax_device[r];
      if (t.defined()) {
        parts.push_back(t.reshape({1}));
      } else {
        if (!nan.defined()) nan = at::full({1}, NAN, fopt);
        parts.push_back(nan);
      }
    }
  }
  return parts.empty() ? at::empty({0}, fopt) : at::cat(parts);
}

ConvertReport convert_to_float8(torch::nn::Module& root, const Float8LinearConfig& config,
                                const ConvertOptions& options) {
  validate_config(config);
  ConvertReport report;
  convert_children(root, "", config, options, report);
  return report;
}

LinearLayerImpl::LinearLayerImpl(int64_t in_features, int64_t out_features, bool with_bias)
    : state_(std::make_shared<Float8LinearState>()) {
  init_linear_parameters(*this, in_features, out_features, with_bias, weight, bias);
}

torch::Tensor LinearLayerImpl::forward(const torch::Tensor& x) {
  if (fp8_ && evaluating) return float8_stateless(x, weight);
  if (fp8_) return float8_linear(x, weight, bias, *fp8_, state_.get());
  // High precision in x's dtype (bf16 activations with fp32 master weights, say). On the
  // GPU through ATen's linear, as PyTorch's nn.Linear: a contiguous 3-D input flattened, its
  // bias added in cuBLASLt's epilogue; torch::nn::functional::linear adds a 3-D input's bias
  // by a broadcast add afterwards, ATen's strided loop (2 ms of a GPT-2-small step on an
  // H100). With FP8 on the GPU built, its backward is the project's (layers_cuda.cpp). The
  // CPU keeps its path and its bits.
  if (x.is_cuda() && detail::linear_cuda_built()) return detail::linear_cuda(x, weight, bias);
  const auto t = x.scalar_type();
  const torch::Tensor b = bias.defined() ? bias.to(t) : bias;
  if (x.is_cuda()) return torch::linear(x, weight.to(t), b);
  return torch::nn::functional::linear(x, weight.to(t), b);
}

torch::Tensor LinearLayerImpl::forward_channel_smoothed(const torch::Tensor& x) {
  if (!fp8_) return forward(x);
  torch::Tensor s;
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor amax =
        x.detach().abs().reshape({-1, x.size(-1)}).amax(0).to(torch::kFloat).clamp_min(1e-30);
    s = torch::exp2(torch::ceil(torch::log2(amax)));  // powers of two: both products exact
  }
  const torch::Tensor xs = x / s.to(x.scalar_type());
  const torch::Tensor ws = weight * s;
  if (evaluating) return float8_stateless(xs, ws);
  return float8_linear(xs, ws, bias, *fp8_, state_.get());
}

torch::Tensor LinearLayerImpl::float8_stateless(const torch::Tensor& x, const torch::Tensor& w) {
  // A scratch copy of the state: its histories cloned (a GPU's are updated in place).
  Float8LinearState scratch;
  scratch.probe = state_->probe;
  scratch.delayed = state_->delayed;
  for (auto& h : scratch.delayed) {
    if (h.device.defined()) h.device = h.device.clone();
  }
  scratch.reduce_amax = state_->reduce_amax;
  Float8LinearConfig quiet = *fp8_;
  quiet.stats_interval = quiet.sqnr_interval = 0;
  return float8_linear(x, w, bias, quiet, &scratch);
}

void LinearLayerImpl::to_float8(const Float8LinearConfig& config) {
  validate_config(config);
  fp8_ = std::make_shared<Float8LinearConfig>(config);
  state_->delayed = {};  // a new config starts its amax histories afresh
}

void LinearLayerImpl::to_high_precision() {
  fp8_.reset();
}

namespace detail {

// The class LibTorch holds a Float8Backward as (custom classes are known by type).
const auto kFloat8BackwardClass = torch::class_<Float8Backward>("fp8wb", "Float8Backward");

void save_for_backward(torch::autograd::AutogradContext* ctx,
                       c10::intrusive_ptr<Float8Backward> plan) {
  ctx->saved_data["float8"] = c10::IValue(std::move(plan));
}

c10::intrusive_ptr<Float8Backward> saved_for_backward(torch::autograd::AutogradContext* ctx) {
  return ctx->saved_data.at("float8").toCustomClass<Float8Backward>();
}

}  // namespace detail
}  // namespace fp8wb

#if !defined(FP8WB_FLOAT8_CUDA)
namespace fp8wb::detail {
at::Tensor float8_linear_cuda(const at::Tensor& x, const at::Tensor&, const at::Tensor&,
                              const Float8LinearConfig&, Float8LinearState*, bool, bool) {
  throw std::invalid_argument(
      "the input is on " + x.device().str() +
      ", but this build runs FP8 linear layers on the CPU only (it needs a CUDA LibTorch >= 2.4 "
      "and the project's CUDA kernels)");
}
at::Tensor linear_cuda(const at::Tensor& x, const at::Tensor&, const at::Tensor&) {
  throw std::invalid_argument("the project's GPU linear layer is not built here (input on " +
                              x.device().str() + ")");
}
}  // namespace fp8wb::detail
#endif
