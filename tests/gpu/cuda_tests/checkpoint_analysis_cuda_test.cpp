// Checkpoint analysis on the GPU against the same analysis on the CPU: the same counts,
// SQNRs and error maps up to the order of fp64 additions (the same blocks without a
// relative error), the same recommendation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/kernels/codec_cuda.h"
#include "test_tensors.h"

namespace fp8wb {
namespace {

void expect_same(const TensorAnalysis& gpu, const TensorAnalysis& cpu) {
  EXPECT_EQ(gpu.amax, cpu.amax);
  EXPECT_EQ(gpu.log2_hist, cpu.log2_hist);
  EXPECT_EQ(gpu.recommended, cpu.recommended);
  ASSERT_EQ(gpu.recipes.size(), cpu.recipes.size());
  for (size_t i = 0; i < cpu.recipes.size(); ++i) {
    const RecipeResult& g = gpu.recipes[i];
    const RecipeResult& c = cpu.recipes[i];
    EXPECT_EQ(g.name, c.name);
    if (std::isfinite(c.sqnr_db)) {
      // Sums within 5 * 2^-24 relative (fp32 sums of four squares on the GPU): 10 log10 of
      // the ratio moves by at most 2 * 4.343 * 3e-7 dB.
      EXPECT_NEAR(g.sqnr_db, c.sqnr_db, 3e-6) << c.name;
    } else {
      EXPECT_EQ(g.sqnr_db, c.sqnr_db) << c.name;
    }
    EXPECT_EQ(g.underflow_pct, c.underflow_pct) << c.name;  // from integer counts
    EXPECT_EQ(g.saturated_pct, c.saturated_pct) << c.name;
    ASSERT_EQ(g.map_rel_error.size(), c.map_rel_error.size()) << c.name;
    for (size_t k = 0; k < c.map_rel_error.size(); ++k) {
      if (std::isnan(c.map_rel_error[k])) {  // a block without finite nonzero values
        EXPECT_TRUE(std::isnan(g.map_rel_error[k])) << c.name << " cell " << k;
      } else {
        EXPECT_NEAR(g.map_rel_error[k], c.map_rel_error[k], 1e-6 * c.map_rel_error[k] + 1e-30)
            << c.name << " cell " << k;
      }
    }
  }
}

TEST(CheckpointAnalysisCuda, MatchesTheCpuForEveryRecipeAndFormat) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(analysis_gpu_available());
  struct Shape {
    int64_t rows, cols;
  };
  // Whole blocks, partial blocks on both sides, one row, a K that is not a multiple of 4.
  for (const Shape s : {Shape{256, 512}, Shape{300, 200}, Shape{1, 4096}, Shape{129, 131}}) {
    const std::vector<float> x = test::mixed_test_tensor(s.rows, s.cols, 17, false);
    AnalysisOptions cpu, gpu;
    cpu.device = AnalysisDevice::Cpu;
    gpu.device = AnalysisDevice::Gpu;
    SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.cols));
    expect_same(analyze_values("x", "F32", {s.rows, s.cols}, x, gpu),
                analyze_values("x", "F32", {s.rows, s.cols}, x, cpu));
  }
  // Blocks without finite nonzero values (a 128x128 block of NaN, one of zeros): NaN in
  // the maps of both.
  std::vector<float> x = test::mixed_test_tensor(256, 512, 19, false);
  for (size_t r = 0; r < 128; ++r) {
    for (size_t c = 0; c < 128; ++c) {
      x[r * 512 + c] = std::nanf("");
      x[r * 512 + c + 128] = 0.0f;
    }
  }
  AnalysisOptions cpu, gpu;
  cpu.device = AnalysisDevice::Cpu;
  gpu.device = AnalysisDevice::Gpu;
  const TensorAnalysis c = analyze_values("x", "F32", {256, 512}, x, cpu);
  expect_same(analyze_values("x", "F32", {256, 512}, x, gpu), c);
  bool some_nan = false;
  for (const RecipeResult& r : c.recipes)
    for (float e : r.map_rel_error) some_nan = some_nan || std::isnan(e);
  EXPECT_TRUE(some_nan);
}

TEST(CheckpointAnalysisCuda, Bf16CheckpointsReadInPlaceMatchTheCpu) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 384, cols = 640;
  const std::vector<float> x = test::mixed_test_tensor(rows, cols, 23, true);
  std::vector<uint8_t> bf16(x.size() * 2);
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t b;
    std::memcpy(&b, &x[i], 4);
    const auto h = static_cast<uint16_t>(b >> 16);
    std::memcpy(&bf16[2 * i], &h, 2);
  }
  const auto ckpt = Checkpoint::from_image(
      safetensors_image({{"w", StDtype::BF16, {rows, cols}, bf16}}), "in memory");
  AnalysisOptions cpu, gpu;
  cpu.device = AnalysisDevice::Cpu;
  gpu.device = AnalysisDevice::Gpu;
  const auto g = analyze_checkpoint(*ckpt, gpu);
  const auto c = analyze_checkpoint(*ckpt, cpu);
  ASSERT_EQ(g.size(), 1u);
  expect_same(g[0], c[0]);
}

}  // namespace
}  // namespace fp8wb
