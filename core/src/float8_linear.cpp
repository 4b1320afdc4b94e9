// Torch translation unit: Float8Linear and its autograd function (CPU emulation: FP8
// codes -> fp32, fp32 GEMM; products of FP8 values are exact in fp32).
#include "fp8wb/core/torch/float8_linear.h"

#include <cmath>
#include <stdexcept>

#include "fp8wb/kernels/quantize_cpu.h"

namespace fp8wb {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// An operand quantized along its rows' K: codes, per-group scale_inv, and the values it
// stands for.
struct Quantized {
  at::Tensor codes;      // uint8 [rows, cols]
  at::Tensor scale_inv;  // float [groups]
  at::Tensor dequant;    // float [rows, cols]: decode(code) * scale_inv
  TensorStats stats;
};

Quantized quantize_operand(const at::Tensor& t, const QuantRecipe& recipe, bool stats) {
  TORCH_CHECK(t.dim() == 2 && t.scalar_type() == at::kFloat && t.is_contiguous(),
              "internal: bad operand");
  if (!t.device().is_cpu()) {
    throw std::invalid_argument("Float8Linear runs on the CPU in this build; the tensor is on " +
                                t.device().str());
  }
  Quantized q;
  const int64_t rows = t.size(0), cols = t.size(1);
  q.codes = at::empty({rows, cols}, at::TensorOptions().dtype(at::kByte));
  q.dequant = at::empty({rows, cols}, at::kFloat);
  StatsOptions so;
  so.enabled = so.histogram = so.error_map = stats;
  // Codes and the dequantized values the emulated GEMM multiplies, in one pass.
  QuantizeTargets out;
  out.codes = q.codes.data_ptr<uint8_t>();
  out.dequant = q.dequant.data_ptr<float>();
  const auto cq = quantize_current(TensorRef::of(t.data_ptr<float>(), rows, cols), recipe, out, so);
  q.scale_inv = at::from_blob(const_cast<float*>(cq.scales.scale_inv.data()),
                              {static_cast<int64_t>(cq.scales.scale_inv.size())}, at::kFloat)
                    .clone();
  q.stats = cq.result.stats;
  return q;
}

// Recipes travel through the autograd context as integers.
std::vector<int64_t> pack(const QuantRecipe& r) {
  return {static_cast<int64_t>(r.kind),
          static_cast<int64_t>(r.format),
          static_cast<int64_t>(r.overflow),
          r.margin,
          r.pow2_scales,
          static_cast<int64_t>(r.mx_rounding),
          r.partial_blocks};
}

QuantRecipe unpack(const std::vector<int64_t>& v) {
  QuantRecipe r;
  r.kind = static_cast<ScalingKind>(v.at(0));
  r.format = static_cast<Format>(v.at(1));
  r.overflow = static_cast<Overflow>(v.at(2));
  r.margin = static_cast<int>(v.at(3));
  r.pow2_scales = v.at(4) != 0;
  r.mx_rounding = static_cast<MxRounding>(v.at(5));
  r.partial_blocks = v.at(6) != 0;
  return r;
}

// 10 log10(sum ref^2 / sum (ref - got)^2) in fp64; +inf when equal.
double sqnr_db(const at::Tensor& ref, const at::Tensor& got) {
  const at::Tensor r = ref.to(at::kDouble);
  const double err = (r - got.to(at::kDouble)).pow(2).sum().item<double>();
  const double sig = r.pow(2).sum().item<double>();
  return err == 0 ? INFINITY : 10.0 * std::log10(sig / err);
}

struct Float8LinearFunction : public torch::autograd::Function<Float8LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const Float8LinearConfig& cfg,
                            Float8Probe* probe, bool stats, bool sqnr) {
    const int64_t k = weight.size(1), n = weight.size(0);
    const at::Tensor x2 = x.reshape({-1, k}).to(at::kFloat).contiguous();
    const at::Tensor w2 = weight.to(at::kFloat).contiguous();
    at::Tensor y;
    at::Tensor saved_x =
        x2;  // high precision only where a GEMM that needs x runs in high precision
    if (cfg.fprop_fp8 || cfg.wgrad_fp8) {
      Quantized qx = quantize_operand(x2, cfg.input, stats);
      if (probe && stats) probe->input = {true, qx.stats};
      if (cfg.fprop_fp8) {
        Quantized qw = quantize_operand(w2, cfg.weight, stats);
        if (probe && stats) probe->weight = {true, qw.stats};
        y = at::matmul(qx.dequant, qw.dequant.t());
      } else {
        y = at::matmul(x2, w2.t());
      }
      if (sqnr && probe && cfg.fprop_fp8) probe->fprop_sqnr_db = sqnr_db(at::matmul(x2, w2.t()), y);
      // Backward keeps x as its FP8 codes and scales, not in high precision (but for the
      // wgrad SQNR on sampled steps).
      if (cfg.wgrad_fp8 && !sqnr) saved_x = at::Tensor();
      ctx->save_for_backward({weight, qx.codes, qx.scale_inv, saved_x});
    } else {
      y = at::matmul(x2, w2.t());
      ctx->save_for_backward({weight, at::Tensor(), at::Tensor(), x2});
    }
    const bool has_bias = bias.defined() && bias.numel() > 0;
    if (has_bias) y = y + bias.to(at::kFloat);
    ctx->saved_data["input"] = pack(cfg.input);
    ctx->saved_data["weight"] = pack(cfg.weight);
    ctx->saved_data["grad_output"] = pack(cfg.grad_output);
    ctx->saved_data["gemms"] =
        std::vector<int64_t>{cfg.fprop_fp8, cfg.dgrad_fp8, cfg.wgrad_fp8, stats, sqnr};
    ctx->saved_data["probe"] = reinterpret_cast<int64_t>(probe);
    ctx->saved_data["has_bias"] = has_bias;
    std::vector<int64_t> out_shape = x.sizes().vec();
    out_shape.back() = n;
    return y.reshape(out_shape).to(x.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& weight = saved[0];
    const QuantRecipe rin = unpack(ctx->saved_data["input"].toIntVector());
    const QuantRecipe rw = unpack(ctx->saved_data["weight"].toIntVector());
    const QuantRecipe rdy = unpack(ctx->saved_data["grad_output"].toIntVector());
    const auto gemms = ctx->saved_data["gemms"].toIntVector();
    const bool dgrad_fp8 = gemms[1] != 0, wgrad_fp8 = gemms[2] != 0, stats = gemms[3] != 0,
               sqnr = gemms[4] != 0;
    auto* probe = reinterpret_cast<Float8Probe*>(ctx->saved_data["probe"].toInt());
    const int64_t k = weight.size(1), n = weight.size(0);
    const at::Tensor& g = grads[0];
    const at::Tensor dy = g.reshape({-1, n}).to(at::kFloat).contiguous();
    const at::Tensor w2 = weight.to(at::kFloat).contiguous();

    // The x the forward saw: from its codes when it was quantized (for wgrad), else as saved.
    const at::Tensor x_hp = saved[3];  // high precision: when a GEMM needs it, or to sample SQNR
    at::Tensor x2 = saved[3];
    if (wgrad_fp8 && saved[1].defined()) {
      const at::Tensor& codes = saved[1];
      const GroupLayout layout = make_layout(rin, codes.size(0), codes.size(1));
      ScaleSet scales;
      scales.layout = layout;
      scales.scale_inv.assign(saved[2].data_ptr<float>(),
                              saved[2].data_ptr<float>() + saved[2].numel());
      scales.scale.resize(scales.scale_inv.size());
      x2 = at::empty(codes.sizes(), at::kFloat);
      dequantize(codes.data_ptr<uint8_t>(), rin, scales, x2.data_ptr<float>());
    }

    // dgrad: dx = dy w, contracting over N: dy along N as it is, w along N through w^T.
    // A tensorwise scale does not depend on the axis, so the same FP8 values serve both
    // ways and only per-row/per-block recipes quantize the transposes again.
    at::Tensor dx, dy_fp8;
    if (dgrad_fp8 || (wgrad_fp8 && rdy.kind == ScalingKind::Tensorwise)) {
      Quantized qdy = quantize_operand(dy, rdy, stats);
      if (probe && stats) probe->grad_output = {true, qdy.stats};
      dy_fp8 = qdy.dequant;
    }
    if (dgrad_fp8) {
      const at::Tensor w_fp8 = rw.kind == ScalingKind::Tensorwise
                                   ? quantize_operand(w2, rw, false).dequant
                                   : quantize_operand(w2.t().contiguous(), rw, false).dequant.t();
      dx = at::matmul(dy_fp8, w_fp8);
    } else {
      dx = at::matmul(dy, w2);
    }
    // wgrad: dw = dy^T x, contracting over M: both quantized along M. x comes from its FP8
    // codes; per-row/per-block recipes quantize that FP8 x a second time.
    at::Tensor dw;
    if (wgrad_fp8) {
      const at::Tensor dyt = rdy.kind == ScalingKind::Tensorwise
                                 ? dy_fp8.t()
                                 : quantize_operand(dy.t().contiguous(), rdy, false).dequant;
      const at::Tensor xt = rin.kind == ScalingKind::Tensorwise
                                ? x2.t()
                                : quantize_operand(x2.t().contiguous(), rin, false).dequant;
      dw = at::matmul(dyt, xt.t());
    } else {
      dw = at::matmul(dy.t(), x2);
    }
    if (sqnr && probe) {
      if (dgrad_fp8) probe->dgrad_sqnr_db = sqnr_db(at::matmul(dy, w2), dx);
      if (wgrad_fp8 && x_hp.defined()) probe->wgrad_sqnr_db = sqnr_db(at::matmul(dy.t(), x_hp), dw);
    }
    at::Tensor db;
    if (ctx->saved_data["has_bias"].toBool()) db = dy.sum(0);
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
    : config_(std::move(config)), probe_(std::make_shared<Float8Probe>()) {
  init_linear_parameters(*this, in_features, out_features, with_bias, weight, bias);
  validate_config(config_);
}

Float8LinearImpl::Float8LinearImpl(const torch::nn::LinearImpl& linear, Float8LinearConfig config)
    : config_(std::move(config)), probe_(std::make_shared<Float8Probe>()) {
  weight = register_parameter("weight", linear.weight);
  if (linear.bias.defined()) bias = register_parameter("bias", linear.bias);
  validate_config(config_);
}

torch::Tensor Float8LinearImpl::forward(const torch::Tensor& x) {
  return float8_linear(x, weight, bias, config_, probe_.get());
}

torch::Tensor float8_linear(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias, const Float8LinearConfig& config,
                            Float8Probe* probe) {
  const int64_t in = weight.size(1);
  if (x.dim() < 1 || x.size(-1) != in) {
    throw std::invalid_argument("an FP8 linear layer expects inputs [..., " + std::to_string(in) +
                                "], got " + c10::str(x.sizes()));
  }
  if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kBFloat16) {
    throw std::invalid_argument(
        std::string("FP8 linear layers take float32 or bfloat16 inputs, not ") +
        c10::toString(x.scalar_type()));
  }
  // LibTorch 1.13's custom functions reject undefined tensor inputs: no bias travels as
  // an empty tensor.
  const int64_t step = probe ? probe->steps++ : 0;
  const bool stats = config.stats_interval > 0 && step % config.stats_interval == 0;
  const bool sqnr = config.sqnr_interval > 0 && step % config.sqnr_interval == 0;
  if (probe && stats) probe->stats_step = step;
  if (probe && sqnr) probe->sqnr_step = step;
  return Float8LinearFunction::apply(x, weight, bias.defined() ? bias : at::empty({0}), config,
                                     probe, stats, sqnr);
}

ConvertReport convert_to_float8(torch::nn::Module& root, const Float8LinearConfig& config,
                                const ConvertOptions& options) {
  validate_config(config);
  ConvertReport report;
  convert_children(root, "", config, options, report);
  return report;
}

LinearLayerImpl::LinearLayerImpl(int64_t in_features, int64_t out_features, bool with_bias)
    : probe_(std::make_shared<Float8Probe>()) {
  init_linear_parameters(*this, in_features, out_features, with_bias, weight, bias);
}

torch::Tensor LinearLayerImpl::forward(const torch::Tensor& x) {
  if (fp8_) return float8_linear(x, weight, bias, *fp8_, probe_.get());
  return torch::nn::functional::linear(x, weight, bias);
}

void LinearLayerImpl::to_float8(const Float8LinearConfig& config) {
  validate_config(config);
  fp8_ = std::make_shared<Float8LinearConfig>(config);
}

void LinearLayerImpl::to_high_precision() {
  fp8_.reset();
}

}  // namespace fp8wb
