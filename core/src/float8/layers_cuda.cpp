// Torch translation unit (CUDA builds): a high-precision linear layer and a bf16 layer
// norm on the GPU with backwards of their own, the biases' and the norm's weight's
// gradients by bias_cuda.h's column sums. ATen's linear (bias in cuBLASLt's epilogue) and
// layer norm stay the forwards; ATen's backwards reduced the biases' gradients at about a
// third of the memory's bandwidth (1.2 ms of a GPT-2-small step on an H100), the norms'
// weights' and biases' at a quarter (0.86 ms), and cast the linear weight's gradient from a
// transposed view (a strided copy).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "float8_linear_internal.h"
#include "fp8wb/core/torch/layers.h"
#include "fp8wb/kernels/bias_cuda.h"

namespace fp8wb::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::ScalarType saved_dtype(AutogradContext* ctx, const char* key) {
  return static_cast<at::ScalarType>(ctx->saved_data[key].toInt());
}

struct LinearCudaFunction : public torch::autograd::Function<LinearCudaFunction> {
  // bias: an empty tensor for none (custom functions take no undefined tensors).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias) {
    const c10::cuda::CUDAGuard guard(x.device());
    const auto t = x.scalar_type();
    const bool has_bias = bias.numel() > 0;
    const at::Tensor w = weight.to(t);
    const at::Tensor y = at::linear(x, w, has_bias ? bias.to(t) : at::Tensor());
    ctx->save_for_backward({x, w});
    ctx->saved_data["has_bias"] = has_bias;
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    const c10::cuda::CUDAGuard guard(w.device());
    const int64_t n = w.size(0), k = w.size(1);
    const at::Tensor& g = grads[0];
    const at::Tensor dy = g.reshape({-1, n}).contiguous();
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      dx = at::mm(dy, w);  // as ATen's linear backward: grad [M, N] x weight [N, K]
      std::vector<int64_t> shape = x.sizes().vec();
      shape.back() = k;
      dx = dx.view(shape);
    }
    if (ctx->needs_input_grad(1)) {
      // [N, K] as the weight is, so that its cast to the master weight's dtype is a
      // contiguous one.
      dw = at::mm(dy.t(), x.reshape({-1, k})).to(saved_dtype(ctx, "weight_dtype"));
    }
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2))
      db = bias_grad_cuda(dy, saved_dtype(ctx, "bias_dtype"));
    return {dx, dw, db};
  }
};

fp8wb_stream_t stream() {
  return reinterpret_cast<fp8wb_stream_t>(at::cuda::getCurrentCUDAStream().stream());
}

bool aligned16(const at::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

struct LayerNormCudaFunction : public torch::autograd::Function<LayerNormCudaFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, double eps) {
    const c10::cuda::CUDAGuard guard(x.device());
    const auto t = x.scalar_type();
    const at::Tensor w = weight.to(t), b = bias.to(t);
    auto [y, mean, rstd] = at::native_layer_norm(x, {x.size(-1)}, w, b, eps);
    ctx->save_for_backward({x, w, b, mean, rstd});
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &b = saved[2], &mean = saved[3],
                     &rstd = saved[4];
    const c10::cuda::CUDAGuard guard(x.device());
    const at::Tensor dy = grads[0].contiguous();
    const int64_t d = x.size(-1), rows = d > 0 ? x.numel() / d : 0;
    const bool need_x = ctx->needs_input_grad(0),
               need_affine = ctx->needs_input_grad(1) || ctx->needs_input_grad(2);
    const bool ours = need_affine && dy.scalar_type() == at::kBFloat16 &&
                      x.scalar_type() == at::kBFloat16 && x.is_contiguous() && d % 8 == 0 &&
                      aligned16(dy) && aligned16(x);
    auto [dx, dw, db] = at::native_layer_norm_backward(
        dy, x, {d}, mean, rstd, w, b, {need_x, need_affine && !ours, need_affine && !ours});
    const auto wt = saved_dtype(ctx, "weight_dtype"), bt = saved_dtype(ctx, "bias_dtype");
    if (ours) {
      const auto fopt = x.options().dtype(at::kFloat);
      dw = at::empty({d}, fopt);
      db = at::empty({d}, fopt);
      const at::Tensor work =
          at::empty({std::max<int64_t>(layer_norm_affine_grad_workspace(rows, d), 1)}, fopt);
      const at::Tensor m = mean.contiguous(), r = rstd.contiguous();
      layer_norm_affine_grad_bf16_cuda(
          reinterpret_cast<const uint16_t*>(dy.data_ptr()),
          reinterpret_cast<const uint16_t*>(x.data_ptr()), m.data_ptr<float>(), r.data_ptr<float>(),
          rows, d, work.data_ptr<float>(), dw.data_ptr<float>(), db.data_ptr<float>(), stream());
    }
    if (dw.defined()) dw = dw.to(wt);
    if (db.defined()) db = db.to(bt);
    return {dx, dw, db, at::Tensor()};
  }
};

}  // namespace

at::Tensor layer_norm_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                           double eps) {
  return LayerNormCudaFunction::apply(x, weight, bias, eps);
}

at::Tensor bias_grad_cuda(const at::Tensor& dy, at::ScalarType out_t) {
  const int64_t m = dy.size(0), n = dy.size(1);
  if (dy.scalar_type() != at::kBFloat16 || !dy.is_contiguous() || n % 8 != 0 || !aligned16(dy))
    return dy.sum(0).to(out_t);
  const auto fopt = dy.options().dtype(at::kFloat);
  at::Tensor out = at::empty({n}, fopt);
  const at::Tensor work = at::empty({std::max<int64_t>(bias_grad_workspace(m, n), 1)}, fopt);
  bias_grad_bf16_cuda(reinterpret_cast<const uint16_t*>(dy.data_ptr()), m, n,
                      work.data_ptr<float>(), out.data_ptr<float>(), stream());
  return out_t == at::kFloat ? out : out.to(out_t);
}

at::Tensor linear_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  static const at::Tensor no_bias = at::empty({0});
  return LinearCudaFunction::apply(x, weight, bias.defined() ? bias : no_bias);
}

}  // namespace fp8wb::detail
