// defines: mixed_test_tensor(): normal data with outliers, exact zeros, -0, tiny values,
// a NaN and an Inf, for quantization tests on the CPU and the GPU.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace fp8wb::test {

inline std::vector<float> mixed_test_tensor(int64_t rows, int64_t cols, uint32_t seed,
                                            bool negative_inf = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (float& v : x) v = nd(rng);
  for (size_t i = 0; i < x.size(); i += 97) x[i] *= 300.0f;
  for (size_t i = 5; i < x.size(); i += 211) x[i] = 0.0f;
  for (size_t i = 7; i < x.size(); i += 389) x[i] = -0.0f;
  for (size_t i = 11; i < x.size(); i += 131) x[i] = 1e-9f;
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[x.size() / 2] = (negative_inf ? -1.0f : 1.0f) * std::numeric_limits<float>::infinity();
  return x;
}

}  // namespace fp8wb::test
