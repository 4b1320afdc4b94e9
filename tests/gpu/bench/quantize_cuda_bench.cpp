// GPU scaled quantization, with and without statistics, next to a device-to-device copy,
// in one run (CUDA events, median of repeats). --json PATH writes the figures.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fp8wb/kernels/quantize_cuda.h"

using fp8wb::bench::BenchRow;
using fp8wb::bench::median_ms;
#define CHECK FP8WB_BENCH_CHECK

int main(int argc, char** argv) {
  using namespace fp8wb;
  const std::string json_path = fp8wb::bench::json_path_arg(argc, argv);
  if (gpu_device_count() == 0) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  // --rows R --cols C: another shape (the statistics kernels' walks end unevenly on some).
  int64_t rows = 16384, cols = 4096;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rows" || a == "--cols") {
      const long long v = std::atoll(argv[i + 1]);
      if (v < 64 || v > (1 << 16)) {
        std::fprintf(stderr, "%s must be 64 to 65536, not %s\n", a.c_str(), argv[i + 1]);
        return 2;
      }
      (a == "--rows" ? rows : cols) = v;
    }
  }
  const size_t n = static_cast<size_t>(rows * cols);
  float* f32 = nullptr;
  uint16_t* bf16 = nullptr;
  uint16_t* bf16b = nullptr;
  uint8_t *codes = nullptr, *codes_t = nullptr;
  CHECK(cudaMalloc(&f32, n * 4));
  CHECK(cudaMalloc(&bf16, n * 2));
  CHECK(cudaMalloc(&bf16b, n * 2));
  CHECK(cudaMalloc(&codes, n));
  CHECK(cudaMalloc(&codes_t, n));
  {
    std::vector<float> h(n);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (float& v : h) v = nd(rng);
    CHECK(cudaMemcpy(f32, h.data(), n * 4, cudaMemcpyHostToDevice));
    std::vector<uint16_t> hb(n);
    for (size_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, &h[i], 4);
      hb[i] = static_cast<uint16_t>(u >> 16);
    }
    CHECK(cudaMemcpy(bf16, hb.data(), n * 2, cudaMemcpyHostToDevice));
  }
  // Each row twice: as launched (the host's launch time included), and queued behind a
  // 256 MB memset (about 80 us of the GPU's time, longer than the launches take).
  const size_t ahead_bytes = size_t{256} << 20;
  void* ahead_buf = nullptr;
  CHECK(cudaMalloc(&ahead_buf, ahead_bytes));
  const auto ahead = [&] { CHECK(cudaMemsetAsync(ahead_buf, 0, ahead_bytes)); };
  std::vector<BenchRow> rows_out;
  const auto row = [&](const std::string& what, double bytes, const std::function<void()>& fn) {
    const double ms = median_ms(fn);
    rows_out.push_back({what, bytes, ms, median_ms(fn, 25, ahead)});
  };
  row("d2d copy of the bf16 tensor", 4.0 * static_cast<double>(n),
      [&] { CHECK(cudaMemcpyAsync(bf16b, bf16, n * 2, cudaMemcpyDeviceToDevice)); });

  auto setup = [&](ScalingKind kind, Format f) {
    QuantRecipe r;
    r.kind = kind;
    r.format = f;
    return r;
  };
  struct Bufs {
    float *amax, *scale, *scale_inv, *global;
    uint8_t* scale_codes;
    StatsBuffer* stats;
    double* map;
  } b{};
  const size_t max_groups = static_cast<size_t>(rows * ((cols + 15) / 16)) + 1;
  CHECK(cudaMalloc(&b.amax, (max_groups + 1) * 4));
  CHECK(cudaMalloc(&b.scale, max_groups * 4));
  CHECK(cudaMalloc(&b.scale_inv, max_groups * 4));
  CHECK(cudaMalloc(&b.global, 4));
  CHECK(cudaMalloc(&b.scale_codes, max_groups));
  CHECK(cudaMalloc(&b.stats, sizeof(StatsBuffer)));
  CHECK(cudaMalloc(&b.map, 2 * 64 * 64 * sizeof(double)));

  auto measure = [&](const std::string& name, ScalingKind kind, Format f, bool fp32_in, bool stats,
                     bool trans, bool current, bool hist = true, bool map = true, bool amax = false,
                     bool zero_launch = false) {
    const QuantRecipe r = setup(kind, f);
    const GroupLayout L = make_layout(r, rows, cols);
    const DeviceTensor x{fp32_in ? f32 : nullptr, fp32_in ? nullptr : bf16, rows, cols};
    group_amax_cuda(x, L, b.amax, b.amax + L.group_count());
    compute_scales_cuda(r, L, b.amax, b.amax + L.group_count(), b.scale, b.scale_inv, b.scale_codes,
                        b.global);
    DeviceStatsTargets t;
    if (stats) {
      t.stats = b.stats;
      t.map = map ? b.map : nullptr;
      t.grid = make_map_grid(L, 64);
      t.histogram = hist;
      // The pass starts its statistics from zero, or a launch of their own zeroes them first.
      t.fresh = !zero_launch;
    } else if (amax) {
      t.amax_bits = reinterpret_cast<uint32_t*>(b.amax);  // what delayed scaling records
    }
    const double in_bytes = static_cast<double>(n) * (fp32_in ? 4 : 2);
    row(name, in_bytes + static_cast<double>(n) * (trans ? 2 : 1), [&] {
      if (current) {
        group_amax_cuda(x, L, b.amax, b.amax + L.group_count());
        compute_scales_cuda(r, L, b.amax, b.amax + L.group_count(), b.scale, b.scale_inv,
                            b.scale_codes, b.global);
      }
      if (stats && zero_launch) zero_stats_cuda(t);
      quantize_cuda(x, r, L, b.scale, b.scale_inv, codes, trans ? codes_t : nullptr, t);
    });
  };
  measure("tensorwise E4M3, bf16 in, codes only", ScalingKind::Tensorwise, Format::E4M3FN, false,
          false, false, false);
  measure("tensorwise E4M3, bf16, + counters and sums", ScalingKind::Tensorwise, Format::E4M3FN,
          false, true, false, false, false, false);
  measure("tensorwise E4M3, bf16, + histogram, no map", ScalingKind::Tensorwise, Format::E4M3FN,
          false, true, false, false, true, false);
  measure("tensorwise E4M3, bf16, + map, no histogram", ScalingKind::Tensorwise, Format::E4M3FN,
          false, true, false, false, false, true);
  measure("tensorwise E4M3, bf16 in, + all stats", ScalingKind::Tensorwise, Format::E4M3FN, false,
          true, false, false);
  measure("the same, zeroed by a launch first", ScalingKind::Tensorwise, Format::E4M3FN, false,
          true, false, false, true, true, false, true);
  measure("tensorwise E4M3, bf16, stats + transposed", ScalingKind::Tensorwise, Format::E4M3FN,
          false, true, true, false);
  measure("tensorwise E4M3, bf16, codes + transposed + amax", ScalingKind::Tensorwise,
          Format::E4M3FN, false, false, true, false, true, true, true);
  {
    // Rowwise scaling of the transpose (a rowwise GEMM's backward operand): column amax,
    // scales and transposed codes; bytes = the input read once + codes written once.
    QuantRecipe r = setup(ScalingKind::Rowwise, Format::E4M3FN);
    const DeviceTensor x{nullptr, bf16, rows, cols};
    row("rowwise of the transpose, bf16 (3 passes)", static_cast<double>(n) * 3,
        [&] { rowwise_transposed_cuda(x, r, b.amax, b.scale, b.scale_inv, codes_t); });
  }
  measure("tensorwise E4M3, fp32 in, + all stats", ScalingKind::Tensorwise, Format::E4M3FN, true,
          true, false, false);
  measure("current: amax pass + scales + stats pass", ScalingKind::Tensorwise, Format::E4M3FN,
          false, true, false, true);
  measure("rowwise E4M3, bf16, + all stats", ScalingKind::Rowwise, Format::E4M3FN, false, true,
          false, false);
  measure("1x128 E4M3, bf16, + all stats", ScalingKind::Block1x128, Format::E4M3FN, false, true,
          false, false);
  measure("128x128 E4M3, bf16, stats + transposed", ScalingKind::Block128x128, Format::E4M3FN,
          false, true, true, false);
  measure("MX E4M3 1x32, bf16, + all stats", ScalingKind::MX, Format::E4M3FN, false, true, false,
          false);
  measure("NVFP4, bf16, + all stats", ScalingKind::NVFP4, Format::E2M1FN, false, true, false,
          false);
  {
    const QuantRecipe r = setup(ScalingKind::Tensorwise, Format::E4M3FN);
    const GroupLayout L = make_layout(r, rows, cols);
    const DeviceTensor x{nullptr, bf16, rows, cols};
    row("amax pass alone, bf16 (tensorwise)", 2.0 * static_cast<double>(n),
        [&] { group_amax_cuda(x, L, b.amax, b.amax + 1); });
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(ahead_buf));
  fp8wb::bench::report("GPU quantize, " + std::string(prop.name) + ", " + std::to_string(rows) +
                           " x " + std::to_string(cols) + " (bytes = read once + written once)",
                       prop.name, rows_out, json_path, {{"rows_x_cols", {rows, cols}}});
  return 0;
}
