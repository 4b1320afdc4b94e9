// GPU quantization against the CPU one: identical scales and codes, equal statistics.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
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

void expect_same(const TensorStats& gpu, const TensorStats& cpu) {
  EXPECT_EQ(gpu.raw.numel, cpu.raw.numel);
  EXPECT_EQ(gpu.raw.zeros, cpu.raw.zeros);
  EXPECT_EQ(gpu.raw.nonfinite, cpu.raw.nonfinite);
  EXPECT_EQ(gpu.raw.underflow, cpu.raw.underflow);
  EXPECT_EQ(gpu.raw.subnormal, cpu.raw.subnormal);
  EXPECT_EQ(gpu.raw.saturated, cpu.raw.saturated);
  EXPECT_EQ(gpu.raw.amax_bits, cpu.raw.amax_bits);
  // Same squares in fp64, summed in another order (and with fused multiply-adds).
  EXPECT_NEAR(gpu.raw.sq_err, cpu.raw.sq_err, 1e-9 * cpu.raw.sq_err);
  EXPECT_NEAR(gpu.raw.sq_sum, cpu.raw.sq_sum, 1e-9 * cpu.raw.sq_sum);
  for (int b = 0; b < kHistBins; ++b) EXPECT_EQ(gpu.raw.hist[b], cpu.raw.hist[b]) << "bin " << b;
  ASSERT_EQ(gpu.map_sq_err.size(), cpu.map_sq_err.size());
  for (size_t i = 0; i < cpu.map_sq_err.size(); ++i) {
    EXPECT_NEAR(gpu.map_sq_err[i], cpu.map_sq_err[i], 1e-9 * cpu.map_sq_err[i] + 1e-300)
        << "cell " << i;
    EXPECT_NEAR(gpu.map_sq_sum[i], cpu.map_sq_sum[i], 1e-9 * cpu.map_sq_sum[i] + 1e-300)
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

TEST(CudaQuantizeLarge, TensorwiseAndBlocksOnAFewMillionElements) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const auto x = tensor(2048, 2048, 4);
  for (ScalingKind k : {ScalingKind::Tensorwise, ScalingKind::Block1x128, ScalingKind::MX}) {
    QuantRecipe r;
    r.kind = k;
    std::vector<uint8_t> codes(x.size());
    const auto cpu = quantize_current(TensorRef::of(x.data(), 2048, 2048), r, {codes.data()});
    const auto gpu = quantize_current_cuda(TensorRef::of(x.data(), 2048, 2048), r, false);
    SCOPED_TRACE(recipe_name(r));
    EXPECT_EQ(gpu.codes, codes);
    expect_same(gpu.stats, cpu.result.stats);
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
