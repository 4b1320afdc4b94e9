// defines: median(): the one median of the workbench's figures (a run's tokens/s, the
// benchmarks' step times, a recipe's block errors). Header only: the checkpoint library,
// which the fuzzers build alone, uses it too.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace fp8wb {

// The median (of an even count, the mean of the middle two); NaN for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace fp8wb
