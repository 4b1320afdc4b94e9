// defines: gelu(): GELU (the erf form) with autograd, bit-identical to torch::gelu. On CUDA
// bf16 tensors its forward and backward are table lookups (fp8wb/kernels/gelu_cuda.h),
// made from PyTorch's own results for every bf16 input; elsewhere it is torch::gelu.
// Torch-facing: include from torch translation units only.
#pragma once

#include <torch/torch.h>

namespace fp8wb {

torch::Tensor gelu(const torch::Tensor& x);

namespace detail {
// Whether gelu() takes the table kernels for x (a CUDA build, a contiguous CUDA bf16 tensor).
bool gelu_uses_tables(const torch::Tensor& x);
}  // namespace detail

}  // namespace fp8wb
