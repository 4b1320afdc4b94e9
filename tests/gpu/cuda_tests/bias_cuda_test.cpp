// The linear layer's bias add on the GPU (fp8wb/kernels/bias_cuda.h) against ATen's own
// broadcast add, bit for bit: every bf16 pattern under biases of every kind, fp32, and
// float8_linear() with a bias against the same layer without one plus ATen's add.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "fp8wb/core/torch/float8_linear.h"
#include "fp8wb/kernels/bias_cuda.h"

namespace fp8wb {
namespace {

#define SKIP_WITHOUT_CUDA()         \
  if (!torch::cuda::is_available()) \
  GTEST_SKIP() << "no CUDA device (or a CPU-only LibTorch): GPU bias tests skipped"

int64_t differing(const torch::Tensor& a, const torch::Tensor& b) {
  const auto t = a.scalar_type() == torch::kBFloat16 ? torch::kShort : torch::kInt;
  return (a.contiguous().view(t) != b.contiguous().view(t)).sum().item<int64_t>();
}

// Every bf16 pattern as y (65536 rows of 8 columns: each pattern in every column) under a
// bias of zeros, infinities, NaN, the extremes, subnormals and ordinary values.
TEST(BiasCuda, Bf16GivesAtensBitsForEveryPattern) {
  SKIP_WITHOUT_CUDA();
  std::vector<int16_t> bits(65536 * 8);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<int16_t>(i / 8 + 977 * (i % 8));
  const torch::Tensor y = torch::from_blob(bits.data(), {65536, 8}, torch::kShort)
                              .clone()
                              .view(torch::kBFloat16)
                              .to(torch::kCUDA);
  std::vector<int16_t> b = {0x0000, static_cast<int16_t>(0x8000), 0x7F80, 0x7FC0, 0x0001, 0x7F7F,
                            0x3F80, static_cast<int16_t>(0xBF81)};
  const torch::Tensor bias = torch::from_blob(b.data(), {8}, torch::kShort)
                                 .clone()
                                 .view(torch::kBFloat16)
                                 .to(torch::kCUDA);
  const torch::Tensor want = y + bias;
  torch::Tensor got = y.clone();
  ASSERT_TRUE(bias_rows_vectorisable(got.data_ptr(), bias.data_ptr(), 8, 2));
  add_bias_rows_bf16_cuda(static_cast<uint16_t*>(got.data_ptr()),
                          static_cast<const uint16_t*>(bias.data_ptr()), 65536, 8);
  EXPECT_EQ(differing(got, want), 0);
}

TEST(BiasCuda, Fp32GivesAtensBits) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(3);
  const torch::Tensor y = torch::randn({1000, 44}, torch::kCUDA) * 100;
  const torch::Tensor bias = torch::randn({44}, torch::kCUDA);
  torch::Tensor got = y.clone();
  add_bias_rows_f32_cuda(got.data_ptr<float>(), bias.data_ptr<float>(), 1000, 44);
  EXPECT_EQ(differing(got, y + bias), 0);
  EXPECT_FALSE(bias_rows_vectorisable(got.data_ptr(), bias.data_ptr(), 42, 4));
}

// The layer: its output with a bias is its output without one plus ATen's add, for the
// FP8 GEMM (tensorwise) and the high-precision one, bf16 and fp32 inputs, and widths the
// kernels take (a multiple of 8) and do not (ATen's add then).
TEST(BiasCuda, LinearWithBiasIsLinearWithoutPlusAtensAdd) {
  SKIP_WITHOUT_CUDA();
  for (const bool fp8 : {true, false}) {
    for (const auto dtype : {torch::kBFloat16, torch::kFloat}) {
      for (const int64_t out : {256, 52}) {
        SCOPED_TRACE(std::string(fp8 ? "fp8" : "high precision") + " " + c10::toString(dtype) +
                     " out " + std::to_string(out));
        Float8LinearConfig cfg;
        cfg.fprop_fp8 = cfg.dgrad_fp8 = cfg.wgrad_fp8 = fp8;
        torch::manual_seed(5);
        const torch::Tensor x = (torch::randn({64, 512}, torch::kCUDA) * 2).to(dtype);
        const torch::Tensor w = torch::randn({out, 512}, torch::kCUDA) * 0.05;
        const torch::Tensor b = torch::randn({out}, torch::kCUDA);
        torch::NoGradGuard ng;
        const torch::Tensor with = float8_linear(x, w, b, cfg);
        const torch::Tensor without = float8_linear(x, w, torch::Tensor(), cfg);
        ASSERT_EQ(with.scalar_type(), without.scalar_type());
        EXPECT_EQ(differing(with, without + b.to(without.scalar_type())), 0);
      }
    }
  }
}

// A high-precision LinearLayer on the GPU gives PyTorch's nn.Linear bits (ATen's linear:
// the bias in cuBLASLt's epilogue), for a 3-D bf16 input as the GPT's layers get it.
TEST(BiasCuda, HighPrecisionLayerGivesAtensLinearBits) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(9);
  LinearLayer layer(768, 3072);
  layer->to(torch::kCUDA);
  const torch::Tensor x = torch::randn({8, 256, 768}, torch::kCUDA).to(torch::kBFloat16);
  torch::NoGradGuard ng;
  const torch::Tensor want =
      torch::linear(x, layer->weight.to(torch::kBFloat16), layer->bias.to(torch::kBFloat16));
  EXPECT_EQ(differing(layer->forward(x), want), 0);
}

}  // namespace
}  // namespace fp8wb
