// GPU codec throughput next to a device-to-device copy, in one run (CUDA events, median
// of repeats). Prints a table and, with --json PATH, writes the figures.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fp8wb/kernels/codec_cuda.h"

using fp8wb::bench::BenchRow;
using fp8wb::bench::median_ms;
#define CHECK FP8WB_BENCH_CHECK

int main(int argc, char** argv) {
  const std::string json_path = fp8wb::bench::json_path_arg(argc, argv);
  if (fp8wb::gpu_device_count() == 0) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const size_t n = size_t{1} << 28;  // 256 Mi elements: 1 GiB of fp32, far past the L2
  float* f32 = nullptr;
  float* f32b = nullptr;
  uint16_t* bf16 = nullptr;
  uint8_t* codes = nullptr;
  CHECK(cudaMalloc(&f32, n * 4));
  CHECK(cudaMalloc(&f32b, n * 4));
  CHECK(cudaMalloc(&bf16, n * 2));
  CHECK(cudaMalloc(&codes, n));
  {
    // Random normal data (never zeros: they can run faster than real data).
    std::vector<float> h(size_t{1} << 24);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 30.f);
    for (float& x : h) x = nd(rng);
    for (size_t off = 0; off < n; off += h.size()) {
      CHECK(cudaMemcpy(f32 + off, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }
    std::vector<uint16_t> hb(h.size());
    for (size_t i = 0; i < h.size(); ++i) {
      uint32_t u;
      std::memcpy(&u, &h[i], 4);
      hb[i] = static_cast<uint16_t>(u >> 16);
    }
    for (size_t off = 0; off < n; off += hb.size()) {
      CHECK(cudaMemcpy(bf16 + off, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
    }
  }
  using fp8wb::EncodeOptions;
  using fp8wb::Format;
  using fp8wb::Overflow;
  using fp8wb::Rounding;
  std::vector<BenchRow> rows;
  rows.push_back({"d2d copy fp32 (memcpy)", 2.0 * n * 4, median_ms([&] {
                    CHECK(cudaMemcpyAsync(f32b, f32, n * 4, cudaMemcpyDeviceToDevice));
                  })});
  rows.push_back({"encode fp32->E4M3FN sat", n * 5.0,
                  median_ms([&] { fp8wb::encode_f32_cuda(f32, codes, n, {Format::E4M3FN}); })});
  rows.push_back({"encode fp32->E5M2 sat", n * 5.0,
                  median_ms([&] { fp8wb::encode_f32_cuda(f32, codes, n, {Format::E5M2}); })});
  rows.push_back({"encode fp32->E2M1FN sat", n * 5.0,
                  median_ms([&] { fp8wb::encode_f32_cuda(f32, codes, n, {Format::E2M1FN}); })});
  rows.push_back({"encode fp32->E4M3FN stochastic", n * 5.0, median_ms([&] {
                    fp8wb::encode_f32_cuda(
                        f32, codes, n,
                        {Format::E4M3FN, Overflow::Saturate, Rounding::Stochastic, 7});
                  })});
  rows.push_back({"encode bf16->E4M3FN sat", n * 3.0,
                  median_ms([&] { fp8wb::encode_bf16_cuda(bf16, codes, n, {Format::E4M3FN}); })});
  rows.push_back({"decode E4M3FN->fp32", n * 5.0,
                  median_ms([&] { fp8wb::decode_f32_cuda(codes, f32b, n, Format::E4M3FN); })});
  CHECK(cudaDeviceSynchronize());

  fp8wb::bench::report("GPU codec throughput, " + std::string(prop.name) +
                           ", n = " + std::to_string(n) + " (bytes = read + written)",
                       prop.name, rows, json_path, {{"n", n}});
  cudaFree(f32);
  cudaFree(f32b);
  cudaFree(bf16);
  cudaFree(codes);
  return 0;
}
