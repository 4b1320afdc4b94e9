// Pieces of Float8Linear shared by its CPU translation unit and its CUDA one (torch
// translation units only).
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "fp8wb/core/torch/float8_linear.h"

namespace fp8wb::detail {

// What a forward hands its backward besides tensors: the config it ran with, the state
// that statistics and delayed-scaling histories go to, and what it chose for this step.
// It travels in the autograd context's saved_data as a registered custom class (an
// IValue that LibTorch keeps with the context and frees with it).
struct Float8Backward : torch::CustomClassHolder {
  Float8LinearConfig config;
  Float8LinearState* state = nullptr;  // null: no probe, no delayed scaling
  bool stats = false;                  // this step samples statistics
  bool sqnr = false;                   // this step samples the GEMM-output SQNRs
  bool has_bias = false;
  bool x_transposed = false;  // CUDA: x was kept as its transposed codes (for wgrad)
};

void save_for_backward(torch::autograd::AutogradContext* ctx,
                       c10::intrusive_ptr<Float8Backward> plan);
c10::intrusive_ptr<Float8Backward> saved_for_backward(torch::autograd::AutogradContext* ctx);

inline bool same_delayed(const DelayedScalingConfig& a, const DelayedScalingConfig& b) {
  return a.window == b.window && a.margin == b.margin && a.algo == b.algo && a.initial == b.initial;
}

// 10 log10(sum ref^2 / sum (ref - got)^2) in fp64; +inf when equal.
inline double sqnr_db(const at::Tensor& ref, const at::Tensor& got) {
  const at::Tensor r = ref.to(at::kDouble);
  const double err = (r - got.to(at::kDouble)).pow(2).sum().item<double>();
  const double sig = r.pow(2).sum().item<double>();
  return err == 0 ? INFINITY : 10.0 * std::log10(sig / err);
}

// Float8Linear on CUDA tensors (float8_linear_cuda.cpp where this build has a CUDA
// LibTorch >= 2.4 and the project's CUDA kernels; else a clear error).
at::Tensor float8_linear_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                              const Float8LinearConfig& config, Float8LinearState* state,
                              bool stats, bool sqnr);

// CUDA builds with FP8 on the GPU (layers_cuda.cpp): a high-precision linear layer (ATen's
// linear forward; its own backward), and a bias's gradient from the output's gradient
// dy [M, N] (ATen's dy.sum(0).to(out_t), by the project's column sums for bf16).
// Without them linear_cuda_built() is false and linear_cuda() refuses.
at::Tensor linear_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor bias_grad_cuda(const at::Tensor& dy, at::ScalarType out_t);
#if defined(FP8WB_FLOAT8_CUDA)
constexpr bool linear_cuda_built() {
  return true;
}
#else
constexpr bool linear_cuda_built() {
  return false;
}
#endif

}  // namespace fp8wb::detail
