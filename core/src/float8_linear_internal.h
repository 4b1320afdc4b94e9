// Pieces of Float8Linear shared by its CPU translation unit and its CUDA one (torch
// translation units only).
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "fp8wb/core/torch/float8_linear.h"

namespace fp8wb::detail {

enum Role : int { kInputRole = 0, kWeightRole = 1, kGradOutputRole = 2 };

// Recipes travel through the autograd context as integers.
inline std::vector<int64_t> pack(const QuantRecipe& r) {
  return {static_cast<int64_t>(r.kind),
          static_cast<int64_t>(r.format),
          static_cast<int64_t>(r.overflow),
          r.margin,
          r.pow2_scales,
          static_cast<int64_t>(r.mx_rounding),
          r.partial_blocks};
}

inline QuantRecipe unpack(const std::vector<int64_t>& v) {
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

inline std::vector<int64_t> pack(const DelayedScalingConfig& d) {
  return {d.window, d.margin, static_cast<int64_t>(d.algo), static_cast<int64_t>(d.initial)};
}

inline DelayedScalingConfig unpack_delayed(const std::vector<int64_t>& v) {
  DelayedScalingConfig d;
  d.window = static_cast<int>(v.at(0));
  d.margin = static_cast<int>(v.at(1));
  d.algo = static_cast<AmaxAlgo>(v.at(2));
  d.initial = static_cast<InitialScale>(v.at(3));
  return d;
}

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

}  // namespace fp8wb::detail
