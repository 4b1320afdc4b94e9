// defines: normal_floats(), memcpy_benchmark(): the data and the memcpy baseline shared by
// the CPU benchmark programs, so that every figure has a copy of the same bytes beside it.
#pragma once

#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

namespace fp8wb::bench {

// n normal values (sigma), the same every run.
inline std::vector<float> normal_floats(size_t n, float sigma) {
  std::vector<float> v(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, sigma);
  for (float& x : v) x = nd(rng);
  return v;
}

// bytes_per_second counts the bytes copied (the input's size).
inline void memcpy_benchmark(benchmark::State& s, const std::vector<float>& in) {
  std::vector<float> out(in.size());
  for (auto _ : s) {
    std::memcpy(out.data(), in.data(), in.size() * 4);
    benchmark::DoNotOptimize(out.data());
  }
  s.SetBytesProcessed(static_cast<int64_t>(s.iterations() * in.size() * 4));
}

}  // namespace fp8wb::bench
