// defines: ScalingMode (and its name table), Float8LinearConfig, RoleStats, Float8Probe:
// how a Float8Linear quantizes its three operands and runs its three GEMMs, and what it
// reports. Plain structs, no torch.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "fp8wb/core/role.h"
#include "fp8wb/kernels/delayed_scaling.h"
#include "fp8wb/kernels/name_table.h"
#include "fp8wb/kernels/recipe.h"
#include "fp8wb/kernels/tensor_stats.h"

namespace fp8wb {

// Where a run's FP8 scales come from (a RunConfig's `scaling`, a TensorMetrics' own).
enum class ScalingMode : uint8_t {
  Delayed,  // from an amax history of earlier steps (tensorwise only)
  Current,  // from the tensor itself
};
struct ScalingModeEntry {
  ScalingMode value;
  std::string_view name;  // as configs spell it
};
inline constexpr ScalingModeEntry kScalingModes[] = {{ScalingMode::Delayed, "delayed"},
                                                     {ScalingMode::Current, "current"}};
static_assert(names_cover_enum(kScalingModes, ScalingMode::Current));

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
  // Tensorwise GEMMs on FP8 tensor cores with the cuBLASLt algorithm measured fastest for
  // each shape, among those that give the same bits (measured once per shape and process,
  // for GEMMs of 2^34 multiply-adds or more); off: the one at::_scaled_mm takes.
  bool tune_gemms = true;
  // Every statistic of the quantize passes on every N-th step (a forward and its
  // backward); 0: never, which costs nothing.
  int stats_interval = 1;
  // On every N-th step, the SQNR of each FP8 GEMM's output against the same GEMM in high
  // precision (three more GEMMs, and x kept in high precision for that step); 0: never.
  int sqnr_interval = 0;
  // A step (a run's last) that samples the statistics and the SQNR too, where their
  // interval is not 0, so that a run shorter than an interval ends with a sample; -1: none.
  int64_t final_step = -1;
  // Delayed scaling (Transformer Engine's DelayedScaling) for all three roles, which must
  // then be tensorwise: each role's scale comes from its amax history of earlier steps
  // (window, margin and algorithm below; the roles' own margins are not used), so no
  // amax pass precedes the quantization. Off: current scaling from the step's own amax.
  bool delayed = false;
  DelayedScalingConfig delayed_scaling;

  ScalingMode scaling() const { return delayed ? ScalingMode::Delayed : ScalingMode::Current; }

  const QuantRecipe& recipe(Role r) const {
    switch (r) {
      case Role::Input: return input;
      case Role::Weight: return weight;
      case Role::GradOutput: return grad_output;
    }
    throw std::out_of_range("no recipe for role " + std::to_string(role_index(r)));
  }
  QuantRecipe& recipe(Role r) {
    return const_cast<QuantRecipe&>(static_cast<const Float8LinearConfig&>(*this).recipe(r));
  }

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
  float scale = 0;  // the scale the quantization used (its first group's, for blocks)
};

// What a layer saw: the statistics of its last sampled step (input and weight from the
// forward, grad_output from the backward) and the GEMM-output SQNRs of its last SQNR step.
struct Float8Probe {
  int64_t steps = 0;        // forward calls so far
  int64_t stats_step = -1;  // the step the role statistics come from
  RoleStats input, weight, grad_output;
  int64_t sqnr_step = -1;                                          // the step the SQNRs come from
  double fprop_sqnr_db = 0, dgrad_sqnr_db = 0, wgrad_sqnr_db = 0;  // +inf: exact
  // FP8 GEMMs so far that ran on FP8 tensor cores, and those emulated (codes -> fp32,
  // fp32 GEMM: always on the CPU; on a GPU where the LibTorch or GPU cannot take a
  // format or scaling, with a notice).
  int64_t gemms_real = 0, gemms_emulated = 0;

  const RoleStats& stats(Role r) const {
    switch (r) {
      case Role::Input: return input;
      case Role::Weight: return weight;
      case Role::GradOutput: return grad_output;
    }
    throw std::out_of_range("no statistics for role " + std::to_string(role_index(r)));
  }
  RoleStats& stats(Role r) {
    return const_cast<RoleStats&>(static_cast<const Float8Probe&>(*this).stats(r));
  }
};

}  // namespace fp8wb
