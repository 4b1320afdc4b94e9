// Torch translation unit (CUDA builds): a high-precision linear layer on the GPU with its
// own backward, and the bias's gradient by bias_cuda.h's column sums. ATen's linear (bias
// in cuBLASLt's epilogue) stays the forward; its backward reduced the bias's gradient at
// about a third of the memory's bandwidth (1.2 ms of a GPT-2-small step on an H100) and
// cast the weight's gradient from a transposed view (a strided copy).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "float8_linear_internal.h"
#include "fp8wb/kernels/bias_cuda.h"

namespace fp8wb::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

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
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    ctx->saved_data["bias_dtype"] = bias.scalar_type();
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
      dw = at::mm(dy.t(), x.reshape({-1, k})).to(ctx->saved_data["weight_dtype"].toScalarType());
    }
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2))
      db = bias_grad_cuda(dy, ctx->saved_data["bias_dtype"].toScalarType());
    return {dx, dw, db};
  }
};

}  // namespace

at::Tensor bias_grad_cuda(const at::Tensor& dy, at::ScalarType out_t) {
  const int64_t m = dy.size(0), n = dy.size(1);
  if (dy.scalar_type() != at::kBFloat16 || !dy.is_contiguous() || n % 8 != 0 ||
      reinterpret_cast<uintptr_t>(dy.data_ptr()) % 16 != 0)
    return dy.sum(0).to(out_t);
  const auto fopt = dy.options().dtype(at::kFloat);
  at::Tensor out = at::empty({n}, fopt);
  const at::Tensor work = at::empty({std::max<int64_t>(bias_grad_workspace(m, n), 1)}, fopt);
  bias_grad_bf16_cuda(reinterpret_cast<const uint16_t*>(dy.data_ptr()), m, n,
                      work.data_ptr<float>(), out.data_ptr<float>(),
                      reinterpret_cast<fp8wb_stream_t>(at::cuda::getCurrentCUDAStream().stream()));
  return out_t == at::kFloat ? out : out.to(out_t);
}

at::Tensor linear_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  static const at::Tensor no_bias = at::empty({0});
  return LinearCudaFunction::apply(x, weight, bias.defined() ? bias : no_bias);
}

}  // namespace fp8wb::detail
