// defines: StatsBuffer (the plain block of counters and sums a quantize call fills, the
// same on host and device), ErrorMap, TensorStats and its derived figures.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "fp8wb/kernels/host_device.h"

namespace fp8wb {

// Exponent histogram: bins for floor(log2 |x * scale|) from kHistMinExp to kHistMaxExp
// (values beyond fall into the end bins), then one bin for zeros, one for non-finite.
inline constexpr int kHistMinExp = -40;
inline constexpr int kHistMaxExp = 23;
inline constexpr int kHistExpBins = kHistMaxExp - kHistMinExp + 1;
inline constexpr int kHistZeroBin = kHistExpBins;
inline constexpr int kHistNonfiniteBin = kHistExpBins + 1;
inline constexpr int kHistBins = kHistExpBins + 2;

// Counters and sums of one quantization (numerics.md, "Statistics"). POD: it is copied
// from the device in one piece.
struct StatsBuffer {
  uint64_t numel;
  uint64_t zeros;      // x == 0
  uint64_t nonfinite;  // NaN or Inf in x
  uint64_t underflow;  // x finite, != 0, and its code decodes to +-0
  uint64_t subnormal;  // nonzero codes in the subnormal range
  uint64_t saturated;  // |x * scale| rounds beyond max: clamped
  double sq_err;       // sum (x - scale_inv * decode(q))^2 over finite x
  double sq_sum;       // sum x^2 over finite x
  uint32_t amax_bits;  // max |x| over finite x, as fp32 bits (ordered like the values)
  uint32_t pad;        // spare: GPU Float8Linear passes the scale_inv it used through it
  uint64_t hist[kHistBins];
};

// The grid of cells that the per-block error map reports: the recipe's blocks when they
// fit in max_cells x max_cells, else an even tiling of at most that many cells.
struct MapGrid {
  int64_t cell_rows = 1, cell_cols = 1;  // a cell's extent in elements
  int64_t rows = 0, cols = 0;            // cells along each dimension
  int64_t cell_count() const { return rows * cols; }
};

struct TensorStats {
  StatsBuffer raw{};
  MapGrid map_grid;
  std::vector<double> map_sq_err;  // per cell
  std::vector<double> map_sq_sum;

  float amax() const;
  double mse() const;                        // sq_err / finite elements
  double sqnr_db() const;                    // 10 log10(sq_sum / sq_err); +inf when exact
  double rel_error() const;                  // sqrt(sq_err / sq_sum)
  double underflow_pct() const;              // % of finite nonzero elements
  double saturated_pct() const;              // % of finite elements
  double subnormal_pct() const;              // % of finite elements
  std::vector<float> map_rel_error() const;  // sqrt(err / sum) per cell (0 where sum == 0)
};

// Adds b into a (counters, sums, max, histogram).
void merge_stats(StatsBuffer& a, const StatsBuffer& b);

}  // namespace fp8wb
