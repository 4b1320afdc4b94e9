// CPU scaled quantization with and without statistics, next to the plain codec and a
// memcpy of the same bytes, in one run. bytes_per_second counts fp32 input bytes.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "bench_data.h"
#include "fp8wb/kernels/codec_cpu.h"
#include "fp8wb/kernels/quantize_cpu.h"

namespace {

constexpr int64_t kRows = 4096, kCols = 4096;  // 16 Mi elements, 64 MiB of fp32
constexpr size_t kN = static_cast<size_t>(kRows * kCols);

const std::vector<float>& data() {
  static const std::vector<float> d = fp8wb::bench::normal_floats(kN, 1.f);
  return d;
}

void BM_Memcpy(benchmark::State& s) {
  fp8wb::bench::memcpy_benchmark(s, data());
}

void BM_PlainEncode(benchmark::State& s) {
  std::vector<uint8_t> out(kN);
  for (auto _ : s) {
    fp8wb::encode_f32(data().data(), out.data(), kN, {}, 1);
    benchmark::DoNotOptimize(out.data());
  }
  s.SetBytesProcessed(static_cast<int64_t>(s.iterations() * kN * 4));
}

// Tensorwise E4M3 with a known (delayed) scale: one pass.
void BM_Quantize(benchmark::State& s) {
  const bool stats = s.range(0) != 0;
  const int threads = static_cast<int>(s.range(1));
  fp8wb::QuantRecipe r;
  const auto layout = fp8wb::make_layout(r, kRows, kCols);
  const auto scales = fp8wb::compute_scales(r, layout, {5.0f}, 5.0f);
  fp8wb::StatsOptions so;
  so.enabled = so.histogram = so.error_map = stats;
  std::vector<uint8_t> out(kN);
  for (auto _ : s) {
    auto res = fp8wb::quantize(fp8wb::TensorRef::of(data().data(), kRows, kCols), r, scales,
                               {out.data()}, so, nullptr, threads);
    benchmark::DoNotOptimize(res);
  }
  s.SetBytesProcessed(static_cast<int64_t>(s.iterations() * kN * 4));
  s.SetLabel(std::string(stats ? "all statistics" : "codes only") + ", " + std::to_string(threads) +
             " thread(s)");
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlainEncode)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Quantize)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({1, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
