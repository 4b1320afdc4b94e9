// CPU scaled quantization with and without statistics, next to the plain codec, a memcpy
// of the same bytes, one read of them and PyTorch's own CPU cast to float8_e4m3fn, in one
// run.
// bytes_per_second counts input bytes (4 per element for fp32, 2 for bf16);
// items_per_second counts elements.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_data.h"
#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/codec_cpu.h"
#include "fp8wb/kernels/quantize_cpu.h"

// PyTorch has float8 types from 2.1 on; Debian 12's LibTorch (1.13) has none.
#if defined(__has_include)
#if __has_include(<c10/util/Float8_e4m3fn.h>)
#define FP8WB_BENCH_TORCH_FLOAT8 1
#endif
#endif

namespace {

constexpr int64_t kRows = 4096, kCols = 4096;  // 16 Mi elements, 64 MiB of fp32
constexpr size_t kN = static_cast<size_t>(kRows * kCols);

const std::vector<float>& data() {
  static const std::vector<float> d = fp8wb::bench::normal_floats(kN, 1.f);
  return d;
}

// The same values rounded to bf16 (round to nearest even), as bit patterns.
const std::vector<uint16_t>& data_bf16() {
  static const std::vector<uint16_t> d = [] {
    std::vector<uint16_t> b(kN);
    for (size_t i = 0; i < kN; ++i) {
      const uint32_t u = fp8wb::float_bits(data()[i]);
      b[i] = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    }
    return b;
  }();
  return d;
}

void set_counters(benchmark::State& s, size_t bytes_per_element) {
  s.SetBytesProcessed(static_cast<int64_t>(s.iterations() * kN * bytes_per_element));
  s.SetItemsProcessed(static_cast<int64_t>(s.iterations() * kN));
}

void BM_Memcpy(benchmark::State& s) {
  fp8wb::bench::memcpy_benchmark(s, data());
}

// The fp32 input read once and nothing written (an OR of its words, one instruction a
// vector at any instruction set): how fast one thread can stream the input at all, the
// bound of any one pass over it.
void BM_ReadOnly(benchmark::State& s) {
  // Sixteen lanes, four independent ORs, each line prefetched 4 KiB ahead as the
  // quantize loops prefetch theirs: the loop waits on memory, not on its ORs.
  using Line = uint32_t __attribute__((vector_size(64)));
  static_assert(kN % 64 == 0);
  const float* in = data().data();
  for (auto _ : s) {
    Line m[4] = {};
    for (size_t i = 0; i < kN; i += 64) {
      for (int j = 0; j < 4; ++j) __builtin_prefetch(in + i + 16 * j + 1024);
      for (int j = 0; j < 4; ++j) {
        Line v;
        std::memcpy(&v, in + i + 16 * j, sizeof v);
        m[j] |= v;
      }
    }
    uint32_t r = 0;
    for (const Line& l : m) {
      for (int k = 0; k < 16; ++k) r |= l[k];
    }
    benchmark::DoNotOptimize(r);
  }
  set_counters(s, 4);
}

void BM_PlainEncode(benchmark::State& s) {
  std::vector<uint8_t> out(kN);
  for (auto _ : s) {
    fp8wb::encode_f32(data().data(), out.data(), kN, {}, 1);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(s, 4);
}

// PyTorch's plain cast, x.to(float8_e4m3fn), on `threads` intra-op threads.
void BM_TorchCast(benchmark::State& s) {
  const bool bf16 = s.range(0) != 0;
  const int threads = static_cast<int>(s.range(1));
#if defined(FP8WB_BENCH_TORCH_FLOAT8)
  at::set_num_threads(threads);
  const at::Tensor x =
      bf16 ? at::from_blob(const_cast<uint16_t*>(data_bf16().data()), {kRows, kCols}, at::kBFloat16)
           : at::from_blob(const_cast<float*>(data().data()), {kRows, kCols}, at::kFloat);
  for (auto _ : s) {
    at::Tensor y = x.to(at::kFloat8_e4m3fn);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  set_counters(s, bf16 ? 2 : 4);
  s.SetLabel(std::string(bf16 ? "bf16" : "fp32") + ", " + std::to_string(threads) + " thread(s)");
#else
  (void)bf16;
  (void)threads;
  s.SkipWithError("this LibTorch has no float8_e4m3fn (PyTorch 2.1 or later has)");
#endif
}

const char* path_name(fp8wb::CpuStatsPath p) {
  switch (p) {
    case fp8wb::CpuStatsPath::Auto: return "auto";
    case fp8wb::CpuStatsPath::Portable: return "portable";
    case fp8wb::CpuStatsPath::Avx2: return "AVX2";
    case fp8wb::CpuStatsPath::Avx512: return "AVX-512";
  }
  return "?";
}

// The statistics loop pinned to `path` for one benchmark (the previous one back after it),
// or the benchmark skipped where the processor lacks it (ok false).
struct PinnedPath {
  fp8wb::CpuStatsPath before = fp8wb::cpu_stats_path();
  bool ok = false;
  PinnedPath(benchmark::State& s, fp8wb::CpuStatsPath path) {
    ok = fp8wb::cpu_stats_path_available(path);
    if (ok) {
      fp8wb::set_cpu_stats_path(path);
    } else {
      s.SkipWithError((std::string("no ") + path_name(path) + " loop on this processor").c_str());
    }
  }
  ~PinnedPath() { fp8wb::set_cpu_stats_path(before); }
  PinnedPath(const PinnedPath&) = delete;
  PinnedPath& operator=(const PinnedPath&) = delete;
};

// Tensorwise E4M3 with a known (delayed) scale: one pass, with the statistics loop the
// processor's widest (path 0) or a pinned one (1 portable, 2 AVX2, 3 AVX-512).
void BM_Quantize(benchmark::State& s) {
  const bool stats = s.range(0) != 0;
  const int threads = static_cast<int>(s.range(1));
  const bool bf16 = s.range(2) != 0;
  const PinnedPath pinned(s, static_cast<fp8wb::CpuStatsPath>(s.range(3)));
  if (!pinned.ok) return;
  fp8wb::QuantRecipe r;
  const auto layout = fp8wb::make_layout(r, kRows, kCols);
  const auto scales = fp8wb::compute_scales(r, layout, {5.0f}, 5.0f);
  fp8wb::StatsOptions so;
  so.enabled = so.histogram = so.error_map = stats;
  std::vector<uint8_t> out(kN);
  const fp8wb::TensorRef x = bf16 ? fp8wb::TensorRef::of(data_bf16().data(), kRows, kCols)
                                  : fp8wb::TensorRef::of(data().data(), kRows, kCols);
  for (auto _ : s) {
    auto res = fp8wb::quantize(x, r, scales, {out.data()}, so, nullptr, threads);
    benchmark::DoNotOptimize(res);
  }
  set_counters(s, bf16 ? 2 : 4);
  s.SetLabel(std::string(bf16 ? "bf16, " : "fp32, ") + (stats ? "all statistics" : "codes only") +
             ", " + std::to_string(threads) + " thread(s)" +
             (stats ? std::string(", ") + path_name(fp8wb::cpu_stats_path()) + " loop" : ""));
}

// The same elements as rows of `cols` (a small model's tensors are 64 to 1024 wide), fp32,
// every statistic, one thread, with the loop the processor's widest or a pinned one: where
// per-row costs (a row is a segment) decide between the loops.
void BM_QuantizeNarrow(benchmark::State& s) {
  const int64_t cols = s.range(0);
  const PinnedPath pinned(s, static_cast<fp8wb::CpuStatsPath>(s.range(1)));
  if (!pinned.ok) return;
  const int64_t rows = static_cast<int64_t>(kN) / cols;
  fp8wb::QuantRecipe r;
  const auto layout = fp8wb::make_layout(r, rows, cols);
  const auto scales = fp8wb::compute_scales(r, layout, {5.0f}, 5.0f);
  fp8wb::StatsOptions so;
  std::vector<uint8_t> out(kN);
  const fp8wb::TensorRef x = fp8wb::TensorRef::of(data().data(), rows, cols);
  for (auto _ : s) {
    auto res = fp8wb::quantize(x, r, scales, {out.data()}, so, nullptr, 1);
    benchmark::DoNotOptimize(res);
  }
  set_counters(s, 4);
  s.SetLabel(std::to_string(rows) + " x " + std::to_string(cols) + ", " +
             path_name(fp8wb::cpu_stats_path()) + " loop");
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlainEncode)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TorchCast)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// {statistics, threads (0: all cores), bf16 input, statistics loop}
BENCHMARK(BM_Quantize)
    ->Args({0, 1, 0, 0})
    ->Args({1, 1, 0, 0})
    ->Args({0, 1, 1, 0})
    ->Args({1, 1, 1, 0})
    ->Args({1, 1, 0, 1})
    ->Args({1, 1, 0, 2})
    ->Args({1, 1, 0, 3})
    ->Args({0, 2, 0, 0})
    ->Args({1, 2, 0, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// {columns, statistics loop}
BENCHMARK(BM_QuantizeNarrow)
    ->ArgsProduct({{64, 256, 1024, 4096}, {0, 2, 3}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
