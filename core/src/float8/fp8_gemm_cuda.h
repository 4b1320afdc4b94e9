// defines: stream(), Operand, operand(), dequant(), fp8_gemm(): Float8Linear's FP8 GEMMs
// on CUDA tensors (torch translation units only). Every GEMM is C[M, N] = A[M, K] B[N, K]^T
// with both operands K-major, the layout FP8 tensor cores want: B travels to _scaled_mm as
// its transpose, a column-major view.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <torch/torch.h>

#include "fp8wb/core/config/float8_config.h"
#include "fp8wb/kernels/quantize_cuda.h"

namespace fp8wb::detail {

// The current CUDA stream, as the project's kernels take it.
inline fp8wb_stream_t stream() {
  return reinterpret_cast<fp8wb_stream_t>(at::cuda::getCurrentCUDAStream().stream());
}

// A K-major GEMM operand: codes [rows, K] row-major and the scale_inv of each group of
// its layout ([group_rows, group_cols], row-major).
struct Operand {
  at::Tensor codes;
  at::Tensor scale_inv;
  QuantRecipe recipe;
  GroupLayout layout;
};

inline Operand operand(const at::Tensor& codes, const at::Tensor& scale_inv, const QuantRecipe& r) {
  return {codes, scale_inv, r, make_layout(r, codes.size(0), codes.size(1))};
}

// The operand's values in fp32 (codes times their group's scale_inv).
at::Tensor dequant(const Operand& o);

// a b^T in `out`: on FP8 tensor cores (the tensorwise ones with the algorithm measured
// fastest when `tune`), or, where this LibTorch or GPU cannot take the GEMM, emulated on
// the GPU (codes -> fp32, fp32 GEMM) with a notice once per kind. probe (may be null)
// counts which.
at::Tensor fp8_gemm(const Operand& a, const Operand& b, at::ScalarType out, bool fast_accum,
                    bool tune, Float8Probe* probe);

}  // namespace fp8wb::detail
