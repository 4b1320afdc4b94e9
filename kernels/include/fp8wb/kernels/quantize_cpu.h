// defines: TensorRef, QuantizeTargets, StatsOptions, WhatIf, compute_amax(), quantize(),
// dequantize(), quantize_current(), ValueSummary, summarize_values(), CpuStatsPath: scaled
// quantization with every statistic gathered in the same pass, on all CPU cores.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fp8wb/kernels/recipe.h"
#include "fp8wb/kernels/tensor_stats.h"

namespace fp8wb {

// A row-major rows x cols tensor in fp32 or bf16 (bit patterns); K = cols.
struct TensorRef {
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  static TensorRef of(const float* p, int64_t rows, int64_t cols) {
    return {p, nullptr, rows, cols};
  }
  static TensorRef of(const uint16_t* p, int64_t rows, int64_t cols) {
    return {nullptr, p, rows, cols};
  }
  int64_t numel() const { return rows * cols; }
};

struct QuantizeTargets {
  uint8_t* codes = nullptr;    // rows x cols, row-major (nullptr: statistics only)
  uint8_t* codes_t = nullptr;  // cols x rows: the same codes transposed, for a GEMM operand
                               // that must be column-major (tensorwise and 128x128 only)
  float* dequant = nullptr;    // rows x cols: decode(code) * scale_inv, written in the same
                               // pass (what an emulated FP8 GEMM multiplies)
};

struct StatsOptions {
  bool enabled = true;     // counters, sums, amax
  bool histogram = true;   // exponent histogram
  bool error_map = true;   // per-block error map
  int map_max_cells = 64;  // along each dimension
};

// Statistics of a second recipe/format on the same tensor, gathered in the same pass.
struct WhatIf {
  QuantRecipe recipe;
  const ScaleSet* scales = nullptr;
};

struct AmaxResult {
  std::vector<float> group_amax;  // max |x| over finite x, per group
  float tensor_amax = 0;
};

AmaxResult compute_amax(const TensorRef& x, const GroupLayout& layout, int threads = 0);

MapGrid make_map_grid(const GroupLayout& layout, int max_cells);

struct QuantizeResult {
  TensorStats stats;
  std::optional<TensorStats> whatif;
};

// Throws std::invalid_argument on a shape/scale mismatch, a transposed output the
// recipe cannot give, or a null input with a non-empty shape.
QuantizeResult quantize(const TensorRef& x, const QuantRecipe& recipe, const ScaleSet& scales,
                        const QuantizeTargets& out, const StatsOptions& stats = {},
                        const WhatIf* whatif = nullptr, int threads = 0);

// x ~ decode(code) * scale_inv of the code's group.
void dequantize(const uint8_t* codes, const QuantRecipe& recipe, const ScaleSet& scales, float* out,
                int threads = 0);

// Current scaling end to end: an amax pass, the scales, and the quantize pass (with
// the what-if recipe's own scales when one is given).
struct CurrentQuantization {
  ScaleSet scales;
  QuantizeResult result;
};
CurrentQuantization quantize_current(const TensorRef& x, const QuantRecipe& recipe,
                                     const QuantizeTargets& out = {},
                                     const StatsOptions& stats = {},
                                     const QuantRecipe* whatif = nullptr, int threads = 0);

// Which statistics loop quantize() runs on the CPU: Auto picks the AVX-512 one where the
// processor has AVX-512 F, BW, VL and DQ (x86-64), else the AVX2 one where it has AVX2,
// else the portable one. All give the same codes, dequantized values and statistics, bit
// for bit; pinning one is for comparing them. Process-wide. set_cpu_stats_path() throws
// std::invalid_argument for a path this processor or build cannot run.
enum class CpuStatsPath : uint8_t { Auto, Portable, Avx2, Avx512 };
bool cpu_stats_path_available(CpuStatsPath p);
void set_cpu_stats_path(CpuStatsPath p);
CpuStatsPath cpu_stats_path();  // the one in use (never Auto)

// The exponent histogram of a tensor's own values covers every fp32 exponent:
// floor(log2 |x|) from -149 (the smallest subnormal) to 127, no value clamped into an end
// bin; then one bin for zeros, one for non-finite values.
inline constexpr int kValueHistMinExp = -149;
inline constexpr int kValueHistMaxExp = 127;
inline constexpr int kValueHistExpBins = kValueHistMaxExp - kValueHistMinExp + 1;
inline constexpr int kValueHistZeroBin = kValueHistExpBins;
inline constexpr int kValueHistNonfiniteBin = kValueHistExpBins + 1;
inline constexpr int kValueHistBins = kValueHistExpBins + 2;

// What a tensor's values are, before any quantization (the checkpoint inspector's
// columns): one pass on all cores. Sums are double, merged in row-chunk order.
struct ValueSummary {
  int64_t finite = 0;
  double sum = 0, sq_sum = 0;
  double min = 0, max = 0;     // over finite values (0 when there are none)
  double amax = 0;             // max |x| over finite values
  double min_nonzero = 0;      // smallest |x| > 0 (0 when there is none)
  std::vector<uint64_t> hist;  // kValueHistBins: log2 bins, zeros, non-finite
};
ValueSummary summarize_values(const TensorRef& x, int threads = 0);

}  // namespace fp8wb
