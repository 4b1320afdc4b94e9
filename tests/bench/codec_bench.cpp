// CPU codec throughput next to a plain memcpy of the same bytes, in one run.
// bytes_per_second counts the input bytes read (fp32: 4 per element, bf16: 2).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "bench_data.h"
#include "fp8wb/kernels/codec_cpu.h"

namespace {

constexpr size_t kN = size_t{1} << 24;  // 16 Mi elements: 64 MiB of fp32, past the caches

const std::vector<float>& data() {
  static const std::vector<float> d = fp8wb::bench::normal_floats(kN, 30.f);
  return d;
}

void BM_Memcpy(benchmark::State& s) {
  fp8wb::bench::memcpy_benchmark(s, data());
}

void BM_EncodeF32(benchmark::State& s) {
  const auto fmt = static_cast<fp8wb::Format>(s.range(0));
  const int threads = static_cast<int>(s.range(1));
  std::vector<uint8_t> out(kN);
  for (auto _ : s) {
    fp8wb::encode_f32(data().data(), out.data(), kN, {fmt}, threads);
    benchmark::DoNotOptimize(out.data());
  }
  s.SetBytesProcessed(static_cast<int64_t>(s.iterations() * kN * 4));
  s.SetLabel(std::string(fp8wb::format_info(fmt).name) + ", " + std::to_string(threads) +
             " thread(s)");
}

void BM_EncodeBf16(benchmark::State& s) {
  std::vector<uint16_t> in(kN);
  for (size_t i = 0; i < kN; ++i) {
    uint32_t u;
    std::memcpy(&u, &data()[i], 4);
    in[i] = static_cast<uint16_t>(u >> 16);
  }
  std::vector<uint8_t> out(kN);
  for (auto _ : s) {
    fp8wb::encode_bf16(in.data(), out.data(), kN, {fp8wb::Format::E4M3FN}, 1);
    benchmark::DoNotOptimize(out.data());
  }
  s.SetBytesProcessed(static_cast<int64_t>(s.iterations() * kN * 2));
}

void BM_DecodeE4M3(benchmark::State& s) {
  std::vector<uint8_t> codes(kN);
  fp8wb::encode_f32(data().data(), codes.data(), kN, {fp8wb::Format::E4M3FN});
  std::vector<float> out(kN);
  for (auto _ : s) {
    fp8wb::decode_f32(codes.data(), out.data(), kN, fp8wb::Format::E4M3FN, 1);
    benchmark::DoNotOptimize(out.data());
  }
  s.SetBytesProcessed(static_cast<int64_t>(s.iterations() * kN));
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeF32)
    ->Args({static_cast<int>(fp8wb::Format::E4M3FN), 1})
    ->Args({static_cast<int>(fp8wb::Format::E5M2), 1})
    ->Args({static_cast<int>(fp8wb::Format::E2M1FN), 1})
    ->Args({static_cast<int>(fp8wb::Format::E4M3FN), 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_EncodeBf16)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeE4M3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
