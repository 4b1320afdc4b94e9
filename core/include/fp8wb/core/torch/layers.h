// defines: gelu(): GELU (the erf form) with autograd, bit-identical to torch::gelu. On large
// CUDA bf16 tensors its forward and backward are table lookups (fp8wb/kernels/gelu_cuda.h),
// made from PyTorch's own results for every bf16 input; elsewhere it is torch::gelu.
// detail::layer_norm_cuda(): the models' layer norm of a bf16 tensor on the GPU.
// Torch-facing: include from torch translation units only.
#pragma once

#include <torch/torch.h>

namespace fp8wb {

torch::Tensor gelu(const torch::Tensor& x);

namespace detail {
// Whether the table kernels take x: a CUDA build, a contiguous, 16-byte aligned CUDA bf16
// tensor.
bool gelu_tables_take(const torch::Tensor& x);
// The size from which gelu() takes them. Each block first copies a window of the tables
// into shared memory: on an H100 at the GPT's activations (25-34M elements) PyTorch's
// GELU took 0.82x the tables' time forward and 0.82-0.87x backward; at 268M elements on an
// H200 the tables took 0.73x and 0.86x PyTorch's (docs/performance.md).
constexpr int64_t kGeluTablesFrom = int64_t{1} << 27;
// Whether gelu() takes the table kernels for x.
bool gelu_uses_tables(const torch::Tensor& x);
// GELU by the table kernels, with their autograd node, whatever x's size (their tests).
// Requires gelu_tables_take(x).
torch::Tensor gelu_tables(const torch::Tensor& x);

// CUDA builds with FP8 on the GPU (core/src/float8/layers_cuda.cpp): layer norm over the
// last dimension of a CUDA tensor in its own dtype, the fp32 weight and bias rounded to it;
// ATen's layer norm forward and input gradient, the weight's and bias's gradients (fp32,
// from bf16-rounded sums) by the project's column sums for bf16.
torch::Tensor layer_norm_cuda(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& bias, double eps);
}  // namespace detail

}  // namespace fp8wb
