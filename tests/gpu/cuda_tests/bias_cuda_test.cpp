// The linear layer's bias add on the GPU (fp8wb/kernels/bias_cuda.h) against ATen's own
// broadcast add, bit for bit: every bf16 pattern under biases of every kind, fp32, and
// float8_linear() with a bias against the same layer without one plus ATen's add. The
// bias's gradient (column sums) against fp64 sums and ATen's sum, and the high-precision
// layer's backward against ATen's linear's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
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

// One bf16 step (ulp) at |v|.
float bf16_ulp(double v) {
  const int e = v == 0 ? -133 : std::ilogb(v);
  return std::ldexp(1.0f, std::max(e, -126) - 7);
}

// The column sums: within half a bf16 step of the fp64 sums (plus fp32's accumulation,
// far below it here), the same as ATen's dy.sum(0) but for the few columns whose fp32
// sums straddle a bf16 rounding boundary (then one step apart), and the same bits on every
// call. Shapes: the GPT's, rows that no share divides, one row, a narrow matrix.
TEST(BiasCuda, GradIsTheColumnSumsRoundedAsAtensSum) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(11);
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {8192, 768}, {8192, 3072}, {1001, 2304}, {1, 264}, {37, 8}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    const torch::Tensor dy =
        (torch::randn({rows, cols}, torch::kCUDA) * 0.01 + 0.001).to(torch::kBFloat16);
    const int64_t ws = bias_grad_workspace(rows, cols);
    ASSERT_GT(ws, 0);
    const torch::Tensor work = torch::empty({ws}, dy.options().dtype(torch::kFloat));
    auto run = [&] {
      torch::Tensor out = torch::empty({cols}, dy.options().dtype(torch::kFloat));
      bias_grad_bf16_cuda(static_cast<const uint16_t*>(dy.data_ptr()), rows, cols,
                          work.data_ptr<float>(), out.data_ptr<float>());
      return out.cpu();
    };
    const torch::Tensor got = run();
    EXPECT_EQ(differing(got, run()), 0) << "not deterministic";
    const torch::Tensor exact = dy.to(torch::kDouble).sum(0).cpu();
    const torch::Tensor aten = dy.sum(0).to(torch::kFloat).cpu();
    int64_t apart = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double e = exact[c].item<double>();
      const float g = got[c].item<float>(), a = aten[c].item<float>();
      ASSERT_LE(std::abs(g - e), 0.5 * bf16_ulp(e) + 1e-5 * std::abs(e) + 1e-30)
          << "column " << c << ": " << g << " against " << e;
      if (g != a) {
        ++apart;
        EXPECT_LE(std::abs(g - a), bf16_ulp(e)) << "column " << c;
      }
    }
    EXPECT_LE(apart, std::max<int64_t>(2, cols / 20)) << "columns apart from ATen's sum";
  }
}

// Infinities and NaN in a column make its sum as ATen's: +inf, NaN (inf - inf, or a NaN).
TEST(BiasCuda, GradOfNonFiniteColumns) {
  SKIP_WITHOUT_CUDA();
  torch::Tensor dy = torch::ones({300, 16}, torch::kCUDA);
  dy.index_put_({5, 1}, INFINITY);
  dy.index_put_({5, 2}, INFINITY);
  dy.index_put_({200, 2}, -INFINITY);
  dy.index_put_({7, 3}, NAN);
  dy = dy.to(torch::kBFloat16);
  torch::Tensor out = torch::empty({16}, dy.options().dtype(torch::kFloat));
  const torch::Tensor work =
      torch::empty({bias_grad_workspace(300, 16)}, dy.options().dtype(torch::kFloat));
  bias_grad_bf16_cuda(static_cast<const uint16_t*>(dy.data_ptr()), 300, 16, work.data_ptr<float>(),
                      out.data_ptr<float>());
  const torch::Tensor got = out.cpu();
  EXPECT_EQ(got[0].item<float>(), 300.0f);
  EXPECT_EQ(got[1].item<float>(), INFINITY);
  EXPECT_TRUE(std::isnan(got[2].item<float>()));
  EXPECT_TRUE(std::isnan(got[3].item<float>()));
}

// The high-precision layer on the GPU (its own backward) against ATen's linear and its
// autograd, for a 3-D bf16 input as the GPT's layers get it: the input's gradient bit for
// bit (the same GEMM), the weight's within the bf16 GEMM's rounding of the fp64 product,
// the bias's as the column sums above; no input gradient asked for, none computed.
TEST(BiasCuda, HighPrecisionLayerBackwardIsAtensLinears) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(13);
  LinearLayer layer(768, 2304);
  layer->to(torch::kCUDA);
  const torch::Tensor x0 = torch::randn({4, 256, 768}, torch::kCUDA).to(torch::kBFloat16);
  const torch::Tensor r = torch::randn({4, 256, 2304}, torch::kCUDA).to(torch::kBFloat16);
  const torch::Tensor x = x0.clone().requires_grad_(true);
  (layer->forward(x) * r).sum().backward();
  const torch::Tensor w = layer->weight.detach().clone().requires_grad_(true);
  const torch::Tensor b = layer->bias.detach().clone().requires_grad_(true);
  const torch::Tensor xa = x0.clone().requires_grad_(true);
  (torch::linear(xa, w.to(torch::kBFloat16), b.to(torch::kBFloat16)) * r).sum().backward();
  EXPECT_EQ(differing(x.grad(), xa.grad()), 0);
  ASSERT_EQ(layer->weight.grad().scalar_type(), torch::kFloat);
  ASSERT_TRUE(layer->weight.grad().is_contiguous());
  const torch::Tensor dy = r.reshape({-1, 2304}).to(torch::kDouble);
  const torch::Tensor dw64 = dy.t().mm(x0.reshape({-1, 768}).to(torch::kDouble));
  const double scale = dw64.abs().max().item<double>();
  EXPECT_LT((layer->weight.grad().to(torch::kDouble) - dw64).abs().max().item<double>(),
            scale * 0.008);
  EXPECT_LT((layer->weight.grad() - w.grad()).abs().max().item<double>(), scale * 0.008);
  EXPECT_LT((layer->bias.grad() - b.grad()).abs().max().item<double>(),
            b.grad().abs().max().item<double>() * 0.008);
  // An input that needs no gradient: the weight's and bias's still come.
  layer->zero_grad();
  (layer->forward(x0) * r).sum().backward();
  EXPECT_TRUE(layer->weight.grad().defined());
  EXPECT_TRUE(layer->bias.grad().defined());
}

}  // namespace
}  // namespace fp8wb
