// defines: Float8LinearConfig, RoleStats, Float8Probe: how a Float8Linear quantizes its
// three operands and runs its three GEMMs, and what it reports. Plain structs, no torch.
#pragma once

#include "fp8wb/kernels/recipe.h"
#include "fp8wb/kernels/tensor_stats.h"

namespace fp8wb {

struct Float8LinearConfig {
  // Per role: input x, weight w, output gradient dy. HYBRID by default: E4M3, E4M3, E5M2.
  QuantRecipe input{ScalingKind::Tensorwise, Format::E4M3FN};
  QuantRecipe weight{ScalingKind::Tensorwise, Format::E4M3FN};
  QuantRecipe grad_output{ScalingKind::Tensorwise, Format::E5M2};
  // Which GEMMs run with FP8 operands (y = x w^T, dx = dy w, dw = dy^T x).
  bool fprop_fp8 = true;
  bool dgrad_fp8 = true;
  bool wgrad_fp8 = true;
  // Fast (reduced-precision) accumulation per GEMM, for real FP8 GEMMs; the CPU
  // emulation always accumulates in fp32.
  bool fprop_fast_accum = true;
  bool dgrad_fast_accum = false;
  bool wgrad_fast_accum = false;
  bool collect_stats = true;  // gather every statistic in the quantize passes

  static Float8LinearConfig hybrid() { return {}; }
  static Float8LinearConfig all_e4m3() {
    Float8LinearConfig c;
    c.grad_output.format = Format::E4M3FN;
    return c;
  }
};

struct RoleStats {
  bool valid = false;
  TensorStats stats;
};

// The statistics of a layer's last forward (input, weight) and backward (grad_output).
struct Float8Probe {
  RoleStats input, weight, grad_output;
};

}  // namespace fp8wb
