#include "fp8wb/kernels/tensor_stats.h"

#include <algorithm>
#include <cmath>

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

std::vector<float> TensorStats::map_rel_error() const {
  std::vector<float> out(map_sq_err.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] =
        map_sq_sum[i] > 0 ? static_cast<float>(std::sqrt(map_sq_err[i] / map_sq_sum[i])) : 0.0f;
  }
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
