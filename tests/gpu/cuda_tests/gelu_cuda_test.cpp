// The GELU table kernels (detail::gelu_tables(), which fp8wb::gelu() takes for large CUDA
// bf16 tensors) against PyTorch's own GELU and GELU backward, bit for bit: every bf16
// input, and every input under many gradients.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "fp8wb/core/torch/layers.h"

namespace fp8wb {
namespace {

#define SKIP_WITHOUT_CUDA()         \
  if (!torch::cuda::is_available()) \
  GTEST_SKIP() << "no CUDA device (or a CPU-only LibTorch): GPU GELU tests skipped"

// bf16 tensor on the GPU holding the given bit patterns.
torch::Tensor bf16_of_bits(std::vector<int16_t> bits) {
  return torch::from_blob(bits.data(), {static_cast<int64_t>(bits.size())}, torch::kShort)
      .clone()
      .view(torch::kBFloat16)
      .to(torch::kCUDA);
}

std::vector<int16_t> every_pattern() {
  std::vector<int16_t> b(65536);
  std::iota(b.begin(), b.end(), int16_t{0});
  return b;
}

// Positions where two bf16 tensors' bits differ (NaNs included: their bits must agree too).
int64_t differing(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.contiguous().view(torch::kShort) != b.contiguous().view(torch::kShort))
      .sum()
      .item<int64_t>();
}

TEST(GeluCuda, ForwardGivesTorchsBitsForEveryBf16Input) {
  SKIP_WITHOUT_CUDA();
  const torch::Tensor x = bf16_of_bits(every_pattern());
  ASSERT_TRUE(detail::gelu_tables_take(x));
  EXPECT_EQ(differing(detail::gelu_tables(x), torch::gelu(x)), 0);
}

// Every bf16 x under each of 256 gradients (zeros, infinities, NaN, the extremes,
// subnormals and random patterns), through autograd: 16.8M pairs.
TEST(GeluCuda, BackwardGivesTorchsBitsForEveryInputUnderManyGradients) {
  SKIP_WITHOUT_CUDA();
  std::vector<int16_t> dys = {0x0000, static_cast<int16_t>(0x8000),
                              0x7F80, static_cast<int16_t>(0xFF80),
                              0x7FC0, static_cast<int16_t>(0xFFC1),
                              0x0001, static_cast<int16_t>(0x8001),
                              0x007F, 0x0080,
                              0x7F7F, static_cast<int16_t>(0xFF7F),
                              0x3F80, static_cast<int16_t>(0xBF80),
                              0x3F81, 0x4000};
  std::mt19937 rng(7);
  while (dys.size() < 256) dys.push_back(static_cast<int16_t>(rng() & 0xFFFF));
  const std::vector<int16_t> xs = every_pattern();
  std::vector<int16_t> xb, gb;
  for (int16_t g : dys) {
    xb.insert(xb.end(), xs.begin(), xs.end());
    gb.insert(gb.end(), xs.size(), g);
  }
  const torch::Tensor x0 = bf16_of_bits(xb), dy = bf16_of_bits(gb);
  const torch::Tensor a = x0.clone().requires_grad_(true), b = x0.clone().requires_grad_(true);
  detail::gelu_tables(a).backward(dy);
  torch::gelu(b).backward(dy);
  EXPECT_EQ(differing(a.grad(), b.grad()), 0);
}

// Lengths that leave a tail past the last eight elements, and tensors the tables do not
// take (not contiguous, not 16-byte aligned, fp32): the same bits as torch::gelu all along.
TEST(GeluCuda, TailsAndOtherTensorsGiveTorchsBits) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(3);
  for (int64_t n : {1, 7, 8, 9, 4099, 1 << 20}) {
    std::vector<int16_t> v(static_cast<size_t>(n)), g(static_cast<size_t>(n));
    for (auto& e : v) e = static_cast<int16_t>(rng() & 0xFFFF);
    for (auto& e : g) e = static_cast<int16_t>(rng() & 0xFFFF);
    const torch::Tensor x0 = bf16_of_bits(v), dy = bf16_of_bits(g);
    const torch::Tensor a = x0.clone().requires_grad_(true), b = x0.clone().requires_grad_(true);
    detail::gelu_tables(a).backward(dy);
    torch::gelu(b).backward(dy);
    EXPECT_EQ(differing(detail::gelu_tables(x0), torch::gelu(x0)), 0) << n;
    EXPECT_EQ(differing(a.grad(), b.grad()), 0) << n;
  }
  const torch::Tensor m =
      torch::randn({64, 96}, torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA));
  const torch::Tensor t = m.t(), shifted = m.view({-1}).narrow(0, 1, 1000);
  EXPECT_FALSE(detail::gelu_tables_take(t));
  EXPECT_FALSE(detail::gelu_tables_take(shifted));
  EXPECT_FALSE(detail::gelu_tables_take(m.to(torch::kFloat)));
  EXPECT_THROW(detail::gelu_tables(t), std::invalid_argument);
  EXPECT_EQ(differing(fp8wb::gelu(t), torch::gelu(t)), 0);
  EXPECT_EQ(differing(fp8wb::gelu(shifted), torch::gelu(shifted)), 0);
  EXPECT_TRUE(torch::equal(fp8wb::gelu(m.to(torch::kFloat)), torch::gelu(m.to(torch::kFloat))));
}

// gelu() takes the tables from kGeluTablesFrom elements: below, PyTorch's GELU.
TEST(GeluCuda, TablesFromTheirSize) {
  SKIP_WITHOUT_CUDA();
  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  EXPECT_FALSE(detail::gelu_uses_tables(torch::empty({detail::kGeluTablesFrom - 8}, bf16)));
  EXPECT_TRUE(detail::gelu_uses_tables(torch::empty({detail::kGeluTablesFrom}, bf16)));
}

}  // namespace
}  // namespace fp8wb
