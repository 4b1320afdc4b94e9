// The training step's fast paths (core/src/train/models.h) against the paths they replace, on
// the CPU in fp32: fused attention (at::scaled_dot_product_attention, where this LibTorch
// has it) against two matmuls and a masked fp32 softmax, and against an fp64 softmax
// written here from its definition; the trainer's AdamW against torch::optim::AdamW,
// skipped updates included; the global-norm clip against torch::nn::utils::clip_grad_norm_;
// the GPT's loss through either attention path. On CUDA tensors the same comparisons are
// in tests/gpu/cuda_tests/trainer_cuda_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "train/models.h"

namespace fp8wb::train {
namespace {

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() /
         b.to(torch::kDouble).norm().item<double>();
}

// softmax(q k^T / sqrt(dh), causal) v in fp64, from the definition.
torch::Tensor attention_fp64(const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v) {
  const torch::Tensor qd = q.to(torch::kDouble), kd = k.to(torch::kDouble),
                      vd = v.to(torch::kDouble);
  const int64_t t = q.size(-2);
  torch::Tensor s = torch::matmul(qd, kd.transpose(-2, -1)) / std::sqrt(double(q.size(-1)));
  s = s.masked_fill(torch::ones({t, t}, torch::kBool).triu(1), -INFINITY);
  return torch::matmul(torch::softmax(s, -1), vd);
}

TEST(FastPaths, CausalAttentionMatchesItsDefinition) {
  torch::manual_seed(3);
  const torch::Tensor q = torch::randn({2, 3, 37, 16}) * 2, k = torch::randn({2, 3, 37, 16}),
                      v = torch::randn({2, 3, 37, 16});
  const torch::Tensor ref = attention_fp64(q, k, v);
  EXPECT_LT(rel(causal_attention(q, k, v, false), ref), 1e-6);
  if (!fused_attention_available()) {
    EXPECT_THROW(causal_attention(q, k, v, true), std::invalid_argument);
    GTEST_SKIP() << "this LibTorch has no scaled_dot_product_attention: the unfused path only";
  }
  const torch::Tensor fused = causal_attention(q, k, v, true);
  EXPECT_LT(rel(fused, ref), 1e-6);
  EXPECT_LT(rel(fused, causal_attention(q, k, v, false)), 1e-5);
  // Causal: changing the last position's keys and values leaves the earlier outputs alone.
  torch::Tensor k2 = k.clone(), v2 = v.clone();
  k2.narrow(2, 36, 1).mul_(-7);
  v2.narrow(2, 36, 1).add_(5);
  EXPECT_TRUE(
      torch::allclose(causal_attention(q, k2, v2, true).narrow(2, 0, 36), fused.narrow(2, 0, 36)));
}

TEST(FastPaths, GptLossThroughEitherAttentionPath) {
  if (!fused_attention_available())
    GTEST_SKIP() << "this LibTorch has no scaled_dot_product_attention";
  RunConfig c;
  c.d_model = 64;
  c.heads = 4;
  c.layers = 2;
  c.context = 32;
  c.batch = 4;
  auto data = make_data(c);
  auto m = make_model(c, data->vocab());
  const Batch b = data->next(torch::kCPU);
  m->fused_attention = false;
  const torch::Tensor before = m->loss(b);
  before.backward();
  std::vector<torch::Tensor> g_before;
  for (const auto& p : m->parameters()) g_before.push_back(p.grad().clone());
  for (auto& p : m->parameters()) p.mutable_grad() = torch::Tensor();
  m->fused_attention = true;
  const torch::Tensor after = m->loss(b);
  after.backward();
  EXPECT_NEAR(after.item<double>(), before.item<double>(), 1e-5 * before.item<double>());
  size_t i = 0;
  for (const auto& p : m->parameters()) EXPECT_LT(rel(p.grad(), g_before[i++]), 1e-5);
}

// Parameters and gradients that change every step, for two optimizers to see alike.
std::vector<torch::Tensor> params_like(uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({8, 16}), torch::randn({16}), torch::randn({3, 5, 7})};
}

TEST(FastPaths, AdamWIsTorchAdamWWithSkippedSteps) {
  std::vector<torch::Tensor> a = params_like(1), b = params_like(1);
  AdamW mine(a, 1e-2, 0.1);
  torch::optim::AdamW theirs(b, torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  const torch::Tensor skip = torch::ones({1}), go = torch::zeros({1});
  for (int step = 0; step < 6; ++step) {
    torch::manual_seed(100 + step);
    for (size_t i = 0; i < a.size(); ++i) {
      const torch::Tensor g = torch::randn(a[i].sizes());
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    const double lr = 1e-2 * (step + 1);
    mine.set_lr(lr);
    for (auto& g : theirs.param_groups())
      static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    // Step 2 is skipped (a non-finite loss, say): no update, and the step count stays, so
    // that the bias corrections afterwards are those of a run without it.
    if (step == 2) {
      mine.step(skip);
    } else {
      mine.step(go);
      theirs.step();
    }
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
  EXPECT_EQ(mine.state_bytes(), int64_t{2 * 4 * (8 * 16 + 16 + 3 * 5 * 7)});
  mine.zero_grad();
  for (const auto& p : a) EXPECT_FALSE(p.grad().defined());
}

TEST(FastPaths, ClipGradNormIsTorchClip) {
  for (const double max_norm : {0.5, 1e6, 0.0}) {
    std::vector<torch::Tensor> a = params_like(2), b = params_like(2);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i].mutable_grad() = a[i] * 3;
      b[i].mutable_grad() = b[i] * 3;
    }
    const torch::Tensor n = clip_grad_norm(a, max_norm);
    const double want = torch::nn::utils::clip_grad_norm_(b, max_norm > 0 ? max_norm : INFINITY);
    EXPECT_EQ(n.item<double>(), want);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].grad(), b[i].grad()));
    // The norm is the gradients' global 2-norm before clipping (fp64 here).
    double sq = 0;
    for (const auto& p : params_like(2))
      sq += (p * 3).to(torch::kDouble).pow(2).sum().item<double>();
    EXPECT_NEAR(n.item<double>(), std::sqrt(sq), 1e-5 * std::sqrt(sq));
  }
}

}  // namespace
}  // namespace fp8wb::train
