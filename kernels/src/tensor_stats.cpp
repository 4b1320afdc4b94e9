#include "fp8wb/kernels/tensor_stats.h"

#include <algorithm>
#include <cmath>

namespace fp8wb {

float TensorStats::amax() const {
  return bits_float(raw.amax_bits);
}

double TensorStats::mse() const {
  const uint64_t finite = raw.numel - raw.nonfinite;
  return finite == 0 ? 0.0 : raw.sq_err / static_cast<double>(finite);
}

double TensorStats::sqnr_db() const {
  if (raw.sq_err == 0) return INFINITY;
  if (raw.sq_sum == 0) return -INFINITY;
  return 10.0 * std::log10(raw.sq_sum / raw.sq_err);
}

double TensorStats::rel_error() const {
  return raw.sq_sum == 0 ? 0.0 : std::sqrt(raw.sq_err / raw.sq_sum);
}

double TensorStats::underflow_pct() const {
  const uint64_t nonzero = raw.numel - raw.nonfinite - raw.zeros;
  return nonzero == 0 ? 0.0
                      : 100.0 * static_cast<double>(raw.underflow) / static_cast<double>(nonzero);
}

double TensorStats::saturated_pct() const {
  const uint64_t finite = raw.numel - raw.nonfinite;
  return finite == 0 ? 0.0
                     : 100.0 * static_cast<double>(raw.saturated) / static_cast<double>(finite);
}

double TensorStats::subnormal_pct() const {
  const uint64_t finite = raw.numel - raw.nonfinite;
  return finite == 0 ? 0.0
                     : 100.0 * static_cast<double>(raw.subnormal) / static_cast<double>(finite);
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
