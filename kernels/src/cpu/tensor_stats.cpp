#include "fp8wb/kernels/tensor_stats.h"

#include <algorithm>
#include <cmath>

#include "cpu_target.h"

namespace fp8wb {

float TensorStats::amax() const {
  return bits_float(raw.amax_bits);
}

namespace {
double percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}
}  // namespace

uint64_t finite_count(const StatsBuffer& s) {
  return s.numel - s.nonfinite;
}

double mse(const StatsBuffer& s) {
  const uint64_t finite = finite_count(s);
  return finite == 0 ? 0.0 : s.sq_err / static_cast<double>(finite);
}

double sqnr_db(const StatsBuffer& s) {
  if (s.sq_err == 0) return INFINITY;
  if (s.sq_sum == 0) return -INFINITY;
  return 10.0 * std::log10(s.sq_sum / s.sq_err);
}

double rel_error(const StatsBuffer& s) {
  return s.sq_sum == 0 ? 0.0 : std::sqrt(s.sq_err / s.sq_sum);
}

double underflow_pct(const StatsBuffer& s) {
  return percent(s.underflow, finite_count(s) - s.zeros);
}

double saturated_pct(const StatsBuffer& s) {
  return percent(s.saturated, finite_count(s));
}

double subnormal_pct(const StatsBuffer& s) {
  return percent(s.subnormal, finite_count(s));
}

double zeros_pct(const StatsBuffer& s) {
  return percent(s.zeros, s.numel);
}

namespace {
// sqrt(err / sum) per cell, 0 where sum is not above 0. Both sides of the select are
// computed (the division by 1 where it is not taken), so that the loop vectorizes (with
// -fno-math-errno, kernels/CMakeLists.txt): correctly rounded division and square root,
// the scalar loop's bits. A run sampling every step reads 144 maps of 4096 cells a step.
FP8WB_TARGET_CLONES void cell_rel_errors(const double* err, const double* sum, float* out,
                                         size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const bool some = sum[i] > 0;
    const double q = err[i] / (some ? sum[i] : 1.0);
    out[i] = some ? static_cast<float>(std::sqrt(q)) : 0.0f;
  }
}
}  // namespace

std::vector<float> TensorStats::map_rel_error() const {
  std::vector<float> out(std::min(map_sq_err.size(), map_sq_sum.size()));
  cell_rel_errors(map_sq_err.data(), map_sq_sum.data(), out.data(), out.size());
  return out;
}

void merge_stats(StatsBuffer& a, const StatsBuffer& b) {
  a.numel += b.numel;
  a.zeros += b.zeros;
  a.nonfinite += b.nonfinite;
  a.underflow += b.underflow;
  a.subnormal += b.subnormal;
  a.saturated += b.saturated;
  a.sq_err += b.sq_err;
  a.sq_sum += b.sq_sum;
  a.amax_bits = std::max(a.amax_bits, b.amax_bits);
  for (int i = 0; i < kHistBins; ++i) a.hist[i] += b.hist[i];
}

}  // namespace fp8wb
