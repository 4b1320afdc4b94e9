// GPU quantization against the CPU one: identical scales and codes, equal statistics.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cctype>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/quantize_cpu.h"
#include "fp8wb/kernels/quantize_cuda.h"
#include "test_tensors.h"

namespace fp8wb {
namespace {

std::vector<float> tensor(int64_t rows, int64_t cols, uint32_t seed) {
  return test::mixed_test_tensor(rows, cols, seed, /*negative_inf=*/false);
}

constexpr double kSumTolerance = 5 * 0x1p-24;

void expect_same(const TensorStats& gpu, const TensorStats& cpu) {
  EXPECT_EQ(gpu.raw.numel, cpu.raw.numel);
  EXPECT_EQ(gpu.raw.zeros, cpu.raw.zeros);
  EXPECT_EQ(gpu.raw.nonfinite, cpu.raw.nonfinite);
  EXPECT_EQ(gpu.raw.underflow, cpu.raw.underflow);
  EXPECT_EQ(gpu.raw.subnormal, cpu.raw.subnormal);
  EXPECT_EQ(gpu.raw.saturated, cpu.raw.saturated);
  EXPECT_EQ(gpu.raw.amax_bits, cpu.raw.amax_bits);
  // The same sums to rounding: the GPU sums four squares in fp32 before fp64 (at most 5
  // roundings of 2^-24 each, numerics.md), in another order.
  EXPECT_NEAR(gpu.raw.sq_err, cpu.raw.sq_err, kSumTolerance * cpu.raw.sq_err);
  EXPECT_NEAR(gpu.raw.sq_sum, cpu.raw.sq_sum, kSumTolerance * cpu.raw.sq_sum);
  for (int b = 0; b < kHistBins; ++b) EXPECT_EQ(gpu.raw.hist[b], cpu.raw.hist[b]) << "bin " << b;
  ASSERT_EQ(gpu.map_sq_err.size(), cpu.map_sq_err.size());
  for (size_t i = 0; i < cpu.map_sq_err.size(); ++i) {
    EXPECT_NEAR(gpu.map_sq_err[i], cpu.map_sq_err[i], kSumTolerance * cpu.map_sq_err[i] + 1e-300)
        << "cell " << i;
    EXPECT_NEAR(gpu.map_sq_sum[i], cpu.map_sq_sum[i], kSumTolerance * cpu.map_sq_sum[i] + 1e-300)
        << "cell " << i;
  }
}

struct Case {
  ScalingKind kind;
  Format format;
  int64_t rows, cols;
  MxRounding mx = MxRounding::Floor;
  int margin = 0;
  bool partial = false;
};

class CudaQuantize : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU quantize tests skipped";
  }
};

TEST_P(CudaQuantize, MatchesCpuForFp32AndBf16) {
  const Case c = GetParam();
  QuantRecipe r;
  r.kind = c.kind;
  r.format = c.format;
  r.mx_rounding = c.mx;
  r.margin = c.margin;
  r.partial_blocks = c.partial;
  auto x = tensor(c.rows, c.cols, 21);
  const bool trans = c.kind == ScalingKind::Tensorwise || c.kind == ScalingKind::Block128x128;
  for (bool bf16 : {false, true}) {
    std::vector<uint16_t> xb(x.size());
    if (bf16) {
      for (size_t i = 0; i < x.size(); ++i) xb[i] = static_cast<uint16_t>(float_bits(x[i]) >> 16);
    }
    const TensorRef ref =
        bf16 ? TensorRef::of(xb.data(), c.rows, c.cols) : TensorRef::of(x.data(), c.rows, c.cols);
    std::vector<uint8_t> codes(x.size()), codes_t(trans ? x.size() : 0);
    const auto cpu = quantize_current(ref, r, {codes.data(), trans ? codes_t.data() : nullptr});
    const auto gpu = quantize_current_cuda(ref, r, trans);
    SCOPED_TRACE(recipe_name(r) + (bf16 ? " bf16" : " fp32"));
    EXPECT_EQ(gpu.scales.scale, cpu.scales.scale);
    EXPECT_EQ(gpu.scales.scale_inv, cpu.scales.scale_inv);
    EXPECT_EQ(gpu.scales.scale_codes, cpu.scales.scale_codes);
    EXPECT_EQ(gpu.scales.global_scale, cpu.scales.global_scale);
    EXPECT_EQ(gpu.codes, codes);
    if (trans) {
      EXPECT_EQ(gpu.codes_t, codes_t);
    }
    expect_same(gpu.stats, cpu.result.stats);
    // Without statistics: the flat kernel, or the transposed pass staging 32 rows.
    StatsOptions none;
    none.enabled = none.histogram = none.error_map = false;
    const auto bare = quantize_current_cuda(ref, r, trans, none);
    EXPECT_EQ(bare.codes, codes);
    if (trans) {
      EXPECT_EQ(bare.codes_t, codes_t);
    }
    std::vector<float> back(x.size());
    dequantize(codes.data(), r, cpu.scales, back.data());
    ASSERT_EQ(gpu.dequantized.size(), back.size());
    for (size_t i = 0; i < back.size(); ++i) {
      // NaN codes: the GPU's multiply returns its canonical NaN (0x7fffffff).
      if (std::isnan(back[i])) {
        ASSERT_TRUE(std::isnan(gpu.dequantized[i])) << "element " << i;
        continue;
      }
      ASSERT_EQ(float_bits(gpu.dequantized[i]), float_bits(back[i])) << "element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Recipes, CudaQuantize,
    ::testing::Values(Case{ScalingKind::Tensorwise, Format::E4M3FN, 512, 1024},
                      Case{ScalingKind::Tensorwise, Format::E5M2, 96, 256, MxRounding::Floor, 2},
                      Case{ScalingKind::Tensorwise, Format::E4M3FNUZ, 64, 128},
                      Case{ScalingKind::Tensorwise, Format::E4M3FN, 37, 99},  // generic path
                      Case{ScalingKind::Rowwise, Format::E4M3FN, 300, 512},
                      Case{ScalingKind::Rowwise, Format::E5M2FNUZ, 33, 200},
                      Case{ScalingKind::Block1x128, Format::E4M3FN, 256, 1024},
                      Case{ScalingKind::Block1x128, Format::E5M2, 50, 300, MxRounding::Floor, 0,
                           true},
                      Case{ScalingKind::Block128x128, Format::E4M3FN, 384, 512},
                      Case{ScalingKind::MX, Format::E4M3FN, 128, 512},
                      Case{ScalingKind::MX, Format::E5M2, 64, 256, MxRounding::RCeil},
                      Case{ScalingKind::MX, Format::E2M1FN, 64, 256},
                      Case{ScalingKind::MX, Format::E3M2FN, 32, 128, MxRounding::RCeil},
                      Case{ScalingKind::MX, Format::E2M3FN, 32, 128},
                      Case{ScalingKind::NVFP4, Format::E2M1FN, 128, 512}),
    [](const auto& p) {
      std::string n = std::string(scaling_kind_name(p.param.kind)) + "_" +
                      std::string(format_info(p.param.format).name) + "_" +
                      std::to_string(p.param.rows) + "x" + std::to_string(p.param.cols) + "_" +
                      std::to_string(p.index);
      for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return n;
    });

// 4096 x 4096: more tiles (1024) than the tile kernels' blocks, so each block walks
// several tiles and wraps from the last column of tiles to the next row.
TEST(CudaQuantizeLarge, TensorwiseAndBlocksOnMillionsOfElements) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t n = 4096;
  const auto x = tensor(n, n, 4);
  for (ScalingKind k : {ScalingKind::Tensorwise, ScalingKind::Block1x128, ScalingKind::MX}) {
    QuantRecipe r;
    r.kind = k;
    const bool trans = k == ScalingKind::Tensorwise;
    std::vector<uint8_t> codes(x.size()), codes_t(trans ? x.size() : 0);
    const auto cpu = quantize_current(TensorRef::of(x.data(), n, n), r,
                                      {codes.data(), trans ? codes_t.data() : nullptr});
    SCOPED_TRACE(recipe_name(r));
    const auto gpu = quantize_current_cuda(TensorRef::of(x.data(), n, n), r, trans);
    EXPECT_EQ(gpu.codes, codes);
    if (trans) {
      EXPECT_EQ(gpu.codes_t, codes_t);
    }
    expect_same(gpu.stats, cpu.result.stats);
    if (trans) {  // the tile kernel without statistics
      StatsOptions none;
      none.enabled = none.histogram = none.error_map = false;
      const auto bare = quantize_current_cuda(TensorRef::of(x.data(), n, n), r, true, none);
      EXPECT_EQ(bare.codes, codes);
      EXPECT_EQ(bare.codes_t, codes_t);
    }
  }
}

// A device buffer for a few values, freed at scope exit.
template <class T>
struct Dev {
  T* p = nullptr;
  explicit Dev(size_t n) { EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess); }
  ~Dev() { cudaFree(p); }
  void put(const std::vector<T>& v) {
    ASSERT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> get(size_t n) const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

// Delayed scaling on the device: a quantize pass that records only the amax, then the
// ring update, step after step, against the host DelayedScaler (scales bit for bit).
TEST(CudaDelayedScaling, MatchesTheHostScalerStepByStep) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 256, cols = 512;
  for (const DelayedScalingConfig cfg :
       {DelayedScalingConfig{1, 0, AmaxAlgo::Max}, DelayedScalingConfig{16, 1, AmaxAlgo::Max},
        DelayedScalingConfig{1024, 2, AmaxAlgo::Max},
        DelayedScalingConfig{16, 0, AmaxAlgo::MostRecent}}) {
    SCOPED_TRACE("window " + std::to_string(cfg.window) + " margin " + std::to_string(cfg.margin));
    const QuantRecipe r{ScalingKind::Tensorwise, Format::E4M3FN};
    const GroupLayout L = make_layout(r, rows, cols);
    DelayedScaler host(r.format, cfg);
    Dev<float> x(static_cast<size_t>(rows * cols)), history(static_cast<size_t>(cfg.window)),
        scale(1), scale_inv(1), amax_h(1), used(1), used2(1);
    Dev<uint32_t> amax(1);
    Dev<uint8_t> codes(static_cast<size_t>(rows * cols));
    history.put(std::vector<float>(static_cast<size_t>(cfg.window), 0.0f));
    scale.put({1.0f});
    scale_inv.put({1.0f});
    // The amax word is zeroed once: from then on each update resets it for the next step
    // (DelayedUpdateExtras::amax_reset), as Float8Linear's steps do.
    ASSERT_EQ(cudaMemset(amax.p, 0, 4), cudaSuccess);
    int head = 0;
    for (int step = 0; step < 40; ++step) {
      // Activations that drift: amaxes rise, then fall by 2^10, with a zero tensor once.
      std::vector<float> v = tensor(rows, cols, 100 + static_cast<uint32_t>(step));
      const float gain = step < 20 ? std::ldexp(1.0f, step / 2) : std::ldexp(1.0f, -10);
      for (float& e : v) e = step == 25 ? 0.0f : e * gain;
      x.put(v);
      const float s = host.scale();
      ScaleSet ss;
      ss.layout = L;
      ss.scale = {s};
      ss.scale_inv = {1.0f / s};
      std::vector<uint8_t> want(v.size());
      const auto cpu = quantize(TensorRef::of(v.data(), rows, cols), r, ss, {want.data()});
      DeviceStatsTargets t;
      t.amax_bits = amax.p;
      quantize_cuda({x.p, nullptr, rows, cols}, r, L, scale.p, scale_inv.p, codes.p, nullptr, t);
      EXPECT_EQ(codes.get(want.size()), want) << "step " << step;
      const uint32_t got_amax = amax.get(1)[0];
      EXPECT_EQ(got_amax, cpu.stats.raw.amax_bits) << "step " << step;
      head = (head + cfg.window - 1) % cfg.window;
      DelayedUpdateExtras after;
      after.used_scale_inv = used.p;
      after.used_scale_inv_2 = used2.p;
      after.amax_reset = amax.p;
      delayed_update_cuda(amax.p, history.p, cfg.window, head, r.format, cfg, scale.p, scale_inv.p,
                          amax_h.p, nullptr, after);
      // The scale_inv this step's codes were made with, before the update moved it on.
      EXPECT_EQ(used.get(1)[0], 1.0f / s) << "step " << step;
      EXPECT_EQ(used2.get(1)[0], 1.0f / s) << "step " << step;
      EXPECT_EQ(amax.get(1)[0], 0u) << "step " << step;
      host.update(cpu.stats.amax());
      const float gs = scale.get(1)[0];
      EXPECT_EQ(gs, host.scale()) << "step " << step;
      EXPECT_EQ(scale_inv.get(1)[0], 1.0f / host.scale()) << "step " << step;
      EXPECT_EQ(amax_h.get(1)[0], host.history_amax()) << "step " << step;
    }
    EXPECT_EQ(history.get(static_cast<size_t>(cfg.window))[static_cast<size_t>(head)],
              host.history()[0]);
  }
}

// The GPU's current scaling of `ref`, without and with transposed codes, against the
// CPU's (cpu, with its codes and transposed codes): the same codes, equal statistics.
void expect_tiles_match(const TensorRef& ref, const QuantRecipe& r, const StatsOptions& so,
                        const CurrentQuantization& cpu, const std::vector<uint8_t>& codes,
                        const std::vector<uint8_t>& codes_t) {
  for (const bool trans : {false, true}) {
    const auto gpu = quantize_current_cuda(ref, r, trans, so);
    EXPECT_EQ(gpu.codes, codes);
    if (trans) {
      EXPECT_EQ(gpu.codes_t, codes_t);
    }
    expect_same(gpu.stats, cpu.result.stats);
  }
}

// Statistics in the tile kernel, against the CPU: codes, transposed codes, every
// statistic. Error-map cells of whole 256-row x 64-column tiles (a block's sums go to the
// map once), cells of whole 16-row x 4-column pieces smaller than a tile (sums by cell
// within each half-warp, two cells a half-warp where cells are 32 or 4 columns wide, tiles
// cut by the last column), and no map.
TEST(CudaQuantizeTiles, StatisticsInTileAndPieceCells) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  struct Shape {
    int64_t rows, cols;
    int cells;
    bool map;
  };
  for (const Shape& sh :
       {Shape{1024, 512, 4, true}, Shape{2048, 512, 8, true}, Shape{48, 20, 64, false},
        Shape{272, 132, 64, false}, Shape{1024, 512, 16, true}, Shape{512, 1024, 8, true},
        Shape{1040, 200, 65, true}}) {
    for (const Format f : {Format::E4M3FN, Format::E5M2}) {
      for (const bool bf16 : {false, true}) {
        QuantRecipe r;
        r.format = f;
        StatsOptions so;
        so.map_max_cells = sh.cells;
        so.error_map = sh.map;
        const auto x = tensor(sh.rows, sh.cols, static_cast<uint32_t>(sh.rows * 7 + sh.cols));
        std::vector<uint16_t> xb(x.size());
        for (size_t i = 0; i < x.size(); ++i) xb[i] = static_cast<uint16_t>(float_bits(x[i]) >> 16);
        const TensorRef ref = bf16 ? TensorRef::of(xb.data(), sh.rows, sh.cols)
                                   : TensorRef::of(x.data(), sh.rows, sh.cols);
        std::vector<uint8_t> codes(x.size()), codes_t(x.size());
        const auto cpu = quantize_current(ref, r, {codes.data(), codes_t.data()}, so);
        SCOPED_TRACE(::testing::Message() << sh.rows << "x" << sh.cols << " " << format_info(f).name
                                          << (bf16 ? " bf16" : " fp32"));
        expect_tiles_match(ref, r, so, cpu, codes, codes_t);
      }
    }
  }
}

// The tile kernel's rows of four elements that leave its common path, against the CPU:
// pieces of exact zeros (every partial zero), values whose squares leave fp32's normal
// range (1e-30: fp64 squares instead), underflows beside normal values, the largest code,
// and a whole tensor of tiny values (a scale near 2^100, so codes are normal while the
// squares of x are below 2^-100).
TEST(CudaQuantizeTiles, RowsOfZerosTinyValuesAndTheLargestCode) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 512, cols = 256;
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> mixed(static_cast<size_t>(rows * cols)), tiny(mixed.size());
  for (size_t i = 0; i < mixed.size(); ++i) {
    const int64_t r = static_cast<int64_t>(i) / cols, c = static_cast<int64_t>(i) % cols;
    float v = nd(rng);
    if (r % 16 < 4 && c % 64 < 8) v = (r + c) % 3 == 0 ? -0.0f : 0.0f;  // zero pieces
    if (r % 32 == 20 && c % 16 < 4) v *= 1e-30f;                        // squares below fp32
    if (r % 32 == 21 && c % 4 == 1) v *= 1e-12f;                        // underflows
    mixed[i] = v;
    tiny[i] = nd(rng) * 1e-31f;
  }
  mixed[777] = 500.0f;  // the amax: the largest code
  for (const auto* x : {&mixed, &tiny}) {
    for (const Format f : {Format::E4M3FN, Format::E5M2}) {
      for (const bool bf16 : {false, true}) {
        QuantRecipe r;
        r.format = f;
        StatsOptions so;
        so.map_max_cells = 8;
        std::vector<uint16_t> xb(x->size());
        for (size_t i = 0; i < x->size(); ++i) {
          xb[i] = static_cast<uint16_t>(float_bits((*x)[i]) >> 16);
        }
        const TensorRef ref =
            bf16 ? TensorRef::of(xb.data(), rows, cols) : TensorRef::of(x->data(), rows, cols);
        std::vector<uint8_t> codes(x->size()), codes_t(x->size());
        const auto cpu = quantize_current(ref, r, {codes.data(), codes_t.data()}, so);
        SCOPED_TRACE(::testing::Message() << (x == &tiny ? "tiny " : "mixed ")
                                          << format_info(f).name << (bf16 ? " bf16" : " fp32"));
        if (x == &mixed) {
          ASSERT_GT(cpu.result.stats.raw.zeros, 1000u);
          ASSERT_GT(cpu.result.stats.raw.underflow, 1000u);
        }
        expect_tiles_match(ref, r, so, cpu, codes, codes_t);
      }
    }
  }
}

// bf16 tensors under a given scale (delayed scaling's case: the pass that counts by
// value), against the CPU: scales that saturate much of the tensor, that underflow most
// of it, and the largest finite scale (its inverse an fp32 subnormal), on a tensor with
// NaN, Inf, zero rows and a row of one repeated value; error-map cells of whole tiles and
// of pieces. 448 tiles: more than the GPU's groups of threads, so some walk two.
TEST(CudaQuantizeTiles, Bf16UnderAGivenScale) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 4096, cols = 1792;
  const auto n = static_cast<size_t>(rows * cols);
  std::mt19937 rng(23);
  std::normal_distribution<float> nd(0.f, 4.f);
  std::vector<uint16_t> xb(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t r = static_cast<int64_t>(i) / cols;
    float v = nd(rng);
    if (r >= 96 && r < 128) v = 0.0f;
    if (r == 300) v = -1.5f;
    if (i % 997 == 5) v = std::numeric_limits<float>::quiet_NaN();
    if (i % 1009 == 7)
      v = i % 2 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
    xb[i] = static_cast<uint16_t>(float_bits(v) >> 16);
  }
  const TensorRef ref = TensorRef::of(xb.data(), rows, cols);
  Dev<uint16_t> x(n);
  x.put(xb);
  Dev<uint8_t> codes(n), codes_t(n);
  Dev<float> scale(1), scale_inv(1);
  Dev<StatsBuffer> stats(1);
  // Scales off the powers of two put the bins' and the codes' bounds inside a binade of
  // bf16 magnitudes (the by-value kernel's end counts against such bounds).
  for (const float s :
       {256.0f, 0x1p-20f, 1.0f, std::numeric_limits<float>::max(), 0.3f, 1234.5678f}) {
    for (const Format f : {Format::E4M3FN, Format::E5M2}) {
      for (const int cells : {4, 16}) {
        SCOPED_TRACE(::testing::Message() << "scale " << s << " " << format_info(f).name << ", "
                                          << cells << " x " << cells << " cells");
        const QuantRecipe r{ScalingKind::Tensorwise, f};
        const GroupLayout L = make_layout(r, rows, cols);
        ScaleSet ss;
        ss.layout = L;
        ss.scale = {s};
        ss.scale_inv = {1.0f / s};
        StatsOptions so;
        so.map_max_cells = cells;
        std::vector<uint8_t> want(n), want_t(n);
        const auto cpu = quantize(ref, r, ss, {want.data(), want_t.data()}, so);
        const MapGrid grid = make_map_grid(L, cells);
        Dev<double> map(static_cast<size_t>(2 * grid.cell_count()));
        scale.put({s});
        scale_inv.put({1.0f / s});
        const DeviceStatsTargets t{stats.p, map.p, grid, true};
        zero_stats_cuda(t);
        quantize_cuda({nullptr, x.p, rows, cols}, r, L, scale.p, scale_inv.p, codes.p, codes_t.p,
                      t);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(codes.get(n), want);
        EXPECT_EQ(codes_t.get(n), want_t);
        TensorStats gpu;
        gpu.raw = stats.get(1)[0];
        gpu.map_grid = grid;
        const auto m = map.get(static_cast<size_t>(2 * grid.cell_count()));
        gpu.map_sq_err.assign(m.begin(), m.begin() + grid.cell_count());
        gpu.map_sq_sum.assign(m.begin() + grid.cell_count(), m.end());
        ASSERT_GT(cpu.stats.raw.nonfinite, 0u);
        if (s == 256.0f && f == Format::E4M3FN) {
          ASSERT_GT(cpu.stats.raw.saturated, n / 2);
        }
        if (s == std::numeric_limits<float>::max()) {
          ASSERT_GT(cpu.stats.raw.saturated, n / 2);
        }
        if (s == 0x1p-20f) {
          ASSERT_GT(cpu.stats.raw.underflow, n / 2);
        }
        expect_same(gpu, cpu.stats);
      }
    }
  }
}

// A fresh pass (DeviceStatsTargets::fresh) starts its statistics from zero whatever the
// buffers held: here every byte 0xFF (NaN sums, counts near 2^64). bf16 passes count by
// value, zeroing in the kernel (448 tiles; one tile, which leaves most of the groups of
// threads without one) or, with transposed codes or a map of 294912 cells (one an
// element), by a launch first; fp32 and a shape off the tiles take other kernels; an empty
// tensor launches none. Three passes in a row on one stream, the
// buffers spoiled again before each, the last two without a synchronisation between them.
TEST(CudaQuantizeTiles, FreshStatisticsIgnoreWhatTheBuffersHeld) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  struct Shape {
    int64_t rows, cols;
    bool bf16, transposed;
    int cells = 16;  // the map's most cells along each dimension
  };
  for (const Shape& sh :
       {Shape{4096, 1792, true, false}, Shape{4096, 1792, true, true}, Shape{256, 64, true, false},
        Shape{256, 64, true, true}, Shape{1024, 512, false, false}, Shape{300, 100, true, false},
        Shape{0, 64, true, false}, Shape{512, 576, true, false, 1024}}) {
    SCOPED_TRACE(::testing::Message()
                 << sh.rows << " x " << sh.cols << (sh.bf16 ? " bf16" : " fp32")
                 << (sh.transposed ? ", transposed codes" : "") << ", " << sh.cells
                 << " cells at most");
    const auto n = static_cast<size_t>(sh.rows * sh.cols);
    const std::vector<float> xf = n ? tensor(sh.rows, sh.cols, 41) : std::vector<float>{};
    std::vector<uint16_t> xb(n);
    for (size_t i = 0; i < n; ++i) xb[i] = static_cast<uint16_t>(float_bits(xf[i]) >> 16);
    const TensorRef ref = sh.bf16 ? TensorRef::of(xb.data(), sh.rows, sh.cols)
                                  : TensorRef::of(xf.data(), sh.rows, sh.cols);
    const QuantRecipe r{ScalingKind::Tensorwise, Format::E4M3FN};
    const GroupLayout L = make_layout(r, sh.rows, sh.cols);
    ScaleSet ss;
    ss.layout = L;
    ss.scale = {96.0f};
    ss.scale_inv = {1.0f / 96.0f};
    StatsOptions so;
    so.map_max_cells = sh.cells;
    std::vector<uint8_t> want(n), want_t(n);
    TensorStats cpu;  // an empty tensor's: every count and sum 0, no cells
    if (n > 0) {
      cpu = quantize(ref, r, ss, {want.data(), sh.transposed ? want_t.data() : nullptr}, so).stats;
      ASSERT_GT(cpu.raw.nonfinite + cpu.raw.saturated, 0u);
    }
    Dev<float> x(sh.bf16 ? 0 : n + 1);
    Dev<uint16_t> x16(sh.bf16 ? n + 1 : 0);
    if (sh.bf16) {
      x16.put(xb);
    } else {
      x.put(xf);
    }
    Dev<uint8_t> codes(n + 1), codes_t(n + 1);
    Dev<float> scale(1), scale_inv(1);
    scale.put({96.0f});
    scale_inv.put({1.0f / 96.0f});
    const MapGrid grid = make_map_grid(L, so.map_max_cells);
    const auto cells = static_cast<size_t>(grid.cell_count());
    Dev<StatsBuffer> stats(1);
    Dev<double> map(2 * cells + 1);
    DeviceStatsTargets t{stats.p, map.p, grid, true};
    t.fresh = true;
    const DeviceTensor dx{sh.bf16 ? nullptr : x.p, sh.bf16 ? x16.p : nullptr, sh.rows, sh.cols};
    for (int pass = 0; pass < 3; ++pass) {
      ASSERT_EQ(cudaMemsetAsync(stats.p, 0xFF, sizeof(StatsBuffer)), cudaSuccess);
      ASSERT_EQ(cudaMemsetAsync(map.p, 0xFF, (2 * cells + 1) * sizeof(double)), cudaSuccess);
      quantize_cuda(dx, r, L, scale.p, scale_inv.p, codes.p, sh.transposed ? codes_t.p : nullptr,
                    t);
      if (pass == 0) {
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      }
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    TensorStats gpu;
    gpu.raw = stats.get(1)[0];
    gpu.map_grid = grid;
    const auto m = map.get(2 * cells);
    gpu.map_sq_err.assign(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(cells));
    gpu.map_sq_sum.assign(m.begin() + static_cast<std::ptrdiff_t>(cells), m.end());
    expect_same(gpu, cpu);
    if (n > 0) {
      EXPECT_EQ(codes.get(n), want);
      if (sh.transposed) {
        EXPECT_EQ(codes_t.get(n), want_t);
      }
    }
  }
}

// Rowwise scaling of a transpose without forming it, against the CPU on the transposed
// tensor: the same per-column scales and codes, bit for bit; from fp32, bf16 and from
// rowwise codes (dequantized on the CPU, then transposed and quantized).
TEST(CudaRowwiseTransposed, MatchesTheCpuOnTheTransposedTensor) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{256, 512}, {48, 20}, {1024, 68}}) {
    for (const Format f : {Format::E4M3FN, Format::E5M2, Format::E4M3FNUZ}) {
      QuantRecipe r;
      r.kind = ScalingKind::Rowwise;
      r.format = f;
      r.margin = f == Format::E5M2 ? 1 : 0;
      const std::vector<float> x = tensor(rows, cols, static_cast<uint32_t>(rows + cols));
      std::vector<uint16_t> xb(x.size());
      for (size_t i = 0; i < x.size(); ++i) xb[i] = static_cast<uint16_t>(float_bits(x[i]) >> 16);
      auto transpose = [&](const std::vector<float>& a) {
        std::vector<float> t(a.size());
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
        return t;
      };
      std::vector<float> xbf(x.size());
      for (size_t i = 0; i < x.size(); ++i) xbf[i] = bits_float(uint32_t{xb[i]} << 16);
      SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " " << format_info(f).name);

      // The CPU's rowwise codes of x (what the codes form starts from), dequantized.
      std::vector<uint8_t> xcodes(x.size());
      const auto qx = quantize_current(TensorRef::of(x.data(), rows, cols), r, {xcodes.data()});
      std::vector<float> xdq(x.size());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          xdq[i * cols + j] = decode(xcodes[i * cols + j], codec_spec(f)) * qx.scales.scale_inv[i];

      for (int source = 0; source < 3; ++source) {
        SCOPED_TRACE(source == 0 ? "fp32" : source == 1 ? "bf16" : "codes");
        const std::vector<float> ref_in = transpose(source == 0 ? x : source == 1 ? xbf : xdq);
        std::vector<uint8_t> ref_codes(x.size());
        const auto ref =
            quantize_current(TensorRef::of(ref_in.data(), cols, rows), r, {ref_codes.data()});
        Dev<float> dx(x.size()), buf(3 * cols), dsi(rows);
        Dev<uint16_t> dxb(xb.size());
        Dev<uint8_t> dcodes(x.size()), dcodes_t(x.size());
        bool ok = false;
        if (source == 0) {
          dx.put(x);
          DeviceTensor t{dx.p, nullptr, rows, cols};
          ok = rowwise_transposed_cuda(t, r, buf.p, buf.p + cols, buf.p + 2 * cols, dcodes_t.p);
        } else if (source == 1) {
          dxb.put(xb);
          DeviceTensor t{nullptr, dxb.p, rows, cols};
          ok = rowwise_transposed_cuda(t, r, buf.p, buf.p + cols, buf.p + 2 * cols, dcodes_t.p);
        } else {
          dcodes.put(xcodes);
          dsi.put(qx.scales.scale_inv);
          DeviceCodes c{dcodes.p, dsi.p, f, rows, cols};
          ok = rowwise_transposed_cuda(c, r, buf.p, buf.p + cols, buf.p + 2 * cols, dcodes_t.p);
        }
        ASSERT_TRUE(ok);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::vector<float> got = buf.get(3 * cols);
        EXPECT_EQ(std::vector<float>(got.begin() + cols, got.begin() + 2 * cols), ref.scales.scale);
        EXPECT_EQ(std::vector<float>(got.begin() + 2 * cols, got.end()), ref.scales.scale_inv);
        EXPECT_EQ(dcodes_t.get(x.size()), ref_codes);
      }
    }
  }
  // Shapes the kernels cannot take are declined, not mangled.
  QuantRecipe r;
  r.kind = ScalingKind::Rowwise;
  Dev<float> dx(40 * 8), buf(24);
  Dev<uint8_t> dcodes_t(40 * 8);
  EXPECT_FALSE(rowwise_transposed_cuda(DeviceTensor{dx.p, nullptr, 40, 8}, r, buf.p, buf.p + 8,
                                       buf.p + 16, dcodes_t.p));
  r.kind = ScalingKind::Tensorwise;
  EXPECT_FALSE(rowwise_transposed_cuda(DeviceTensor{dx.p, nullptr, 32, 8}, r, buf.p, buf.p + 8,
                                       buf.p + 16, dcodes_t.p));
}

// The hardware conversion (cvt.rn.satfinite on sm_89+) against the software codec on every
// fp32 bit pattern: codes, saturation, the flags read off the codes, dequantized values.
TEST(CudaConversion, HardwareMatchesTheCodecOnEveryFp32Pattern) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (const Format f : {Format::E4M3FN, Format::E5M2}) {
    for (const float scale_inv : {1.0f, 1.0f / 448.0f, 3.0e-38f}) {
      const ConversionCheck r = check_conversion_cuda(f, scale_inv);
      EXPECT_EQ(r.mismatches, 0u) << format_info(f).name << " scale_inv " << scale_inv
                                  << ": first pattern 0x" << std::hex << r.first_bits;
      if (f == Format::E4M3FN && scale_inv == 1.0f) {
        std::cout << "FP8 conversion instructions on this GPU: " << (r.hardware ? "yes" : "no")
                  << "\n";
      }
    }
  }
}

TEST(CudaQuantizeErrors, BadRequests) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::vector<float> x(64 * 64, 1.0f);
  QuantRecipe rowwise;
  rowwise.kind = ScalingKind::Rowwise;
  EXPECT_THROW(quantize_current_cuda(TensorRef::of(x.data(), 64, 64), rowwise, true),
               std::invalid_argument);
  QuantRecipe blocks;
  blocks.kind = ScalingKind::Block1x128;
  EXPECT_THROW(quantize_current_cuda(TensorRef::of(x.data(), 64, 64), blocks, false),
               std::invalid_argument);
  const auto empty = quantize_current_cuda(TensorRef::of(x.data(), 0, 64), {}, false);
  EXPECT_EQ(empty.stats.raw.numel, 0u);
}

}  // namespace
}  // namespace fp8wb
