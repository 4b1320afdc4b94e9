// defines: StatsBuffer (the plain block of counters and sums a quantize call fills, the
// same on host and device), the figures derived from it (underflow_pct(), sqnr_db(), ...:
// the one place they are computed), MapGrid, TensorStats.
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
  // The first group's scale_inv as fp32 bits, where the quantizing caller records it in
  // the same device buffer (GPU Float8Linear: copied there on the device, so the scale
  // comes back with the statistics in one copy; it reads and clears it). 0 otherwise: the
  // kernels neither write nor merge it.
  uint32_t scale_inv_bits;
  uint64_t hist[kHistBins];
};

// The grid of cells that the per-block error map reports: the recipe's blocks when they
// fit in max_cells x max_cells, else an even tiling of at most that many cells.
struct MapGrid {
  int64_t cell_rows = 1, cell_cols = 1;  // a cell's extent in elements
  int64_t rows = 0, cols = 0;            // cells along each dimension
  int64_t cell_count() const { return rows * cols; }
};

// Figures derived from the counters and sums (numerics.md, "Statistics"). Every reader
// of statistics (checkpoint analysis, training runs, sweeps, the GUI, the CLI) uses
// these.
uint64_t finite_count(const StatsBuffer& s);  // numel - nonfinite
double mse(const StatsBuffer& s);             // sq_err / finite elements (0 when none)
double sqnr_db(const StatsBuffer& s);    // 10 log10(sq_sum / sq_err); +inf exact, -inf for zeros
double rel_error(const StatsBuffer& s);  // sqrt(sq_err / sq_sum) (0 when sq_sum == 0)
double underflow_pct(const StatsBuffer& s);  // % of finite nonzero elements (0 when none)
double saturated_pct(const StatsBuffer& s);  // % of finite elements (0 when none)
double subnormal_pct(const StatsBuffer& s);  // % of finite elements (0 when none)
double zeros_pct(const StatsBuffer& s);      // % of all elements (0 when none)

struct TensorStats {
  StatsBuffer raw{};
  MapGrid map_grid;
  std::vector<double> map_sq_err;  // per cell
  std::vector<double> map_sq_sum;

  float amax() const;
  // The derived figures of `raw` (above).
  double mse() const { return fp8wb::mse(raw); }
  double sqnr_db() const { return fp8wb::sqnr_db(raw); }
  double rel_error() const { return fp8wb::rel_error(raw); }
  double underflow_pct() const { return fp8wb::underflow_pct(raw); }
  double saturated_pct() const { return fp8wb::saturated_pct(raw); }
  double subnormal_pct() const { return fp8wb::subnormal_pct(raw); }
  std::vector<float> map_rel_error() const;  // sqrt(err / sum) per cell (0 where sum == 0)
};

// Adds b into a (counters, sums, max, histogram).
void merge_stats(StatsBuffer& a, const StatsBuffer& b);

}  // namespace fp8wb
