// The tensorwise FP8 GEMMs with the cuBLASLt algorithm measured fastest
// (core/src/float8/scaled_gemm_cuda.h) against at::_scaled_mm on the same operands: the same
// bits, for problems that are timed and for those that take the heuristic's first, called
// again with other scales and with the codes as bytes; and
// Float8Linear's outputs and gradients with and without the tuning. Built only with a
// CUDA LibTorch; skips without a GPU that multiplies FP8.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "float8/scaled_gemm_cuda.h"
#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/torch/float8_linear.h"

namespace fp8wb {
namespace {

#define SKIP_WITHOUT_FP8_GEMMS()                                      \
  if (!torch::cuda::is_available() || !probe_backend().fp8_gemm_real) \
  GTEST_SKIP() << "no GPU that multiplies FP8 (or a CPU-only LibTorch): skipped"

struct Case {
  int64_t m, n, k;
  at::ScalarType ta, tb, out;
  bool fast;
};

std::string name(const Case& c) {
  return std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + " " +
         c10::toString(c.ta) + "*" + c10::toString(c.tb) + "->" + c10::toString(c.out) +
         (c.fast ? " fast" : " exact");
}

TEST(TunedScaledGemm, GivesAtScaledMmsBits) {
  SKIP_WITHOUT_FP8_GEMMS();
  const auto opt = torch::TensorOptions().device(torch::kCUDA);
  const std::vector<Case> cases = {
      // Timed (2^34 multiply-adds and more): forward-like and gradient-like.
      {4096, 4096, 1024, at::kFloat8_e4m3fn, at::kFloat8_e4m3fn, at::kBFloat16, true},
      {4096, 2048, 2048, at::kFloat8_e5m2, at::kFloat8_e4m3fn, at::kBFloat16, false},
      {2048, 4096, 4096, at::kFloat8_e5m2, at::kFloat8_e4m3fn, at::kFloat, false},
      // Below the threshold: the heuristic's first, as at::_scaled_mm.
      {256, 512, 128, at::kFloat8_e4m3fn, at::kFloat8_e4m3fn, at::kBFloat16, true},
      {384, 256, 640, at::kFloat8_e5m2, at::kFloat8_e4m3fn, at::kFloat, false}};
  torch::manual_seed(7);
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c));
    const at::Tensor a = (torch::randn({c.m, c.k}, opt) * 3).to(c.ta);
    const at::Tensor b = (torch::randn({c.n, c.k}, opt) * 3).to(c.tb);
    const at::Tensor sa = torch::full({}, 0.375f, opt), sb = torch::full({}, 1.75f, opt);
    const auto got = detail::tuned_scaled_gemm(a, b, sa, sb, c.out, c.fast);
    ASSERT_TRUE(got.has_value());
    const at::Tensor want =
        at::_scaled_mm(a, b.t(), sa, sb, std::nullopt, std::nullopt, c.out, c.fast);
    ASSERT_EQ(got->scalar_type(), c.out);
    EXPECT_TRUE(torch::equal(*got, want));
    // Again, with the choice made: the same.
    EXPECT_TRUE(torch::equal(*detail::tuned_scaled_gemm(a, b, sa, sb, c.out, c.fast), want));
    // The problem's descriptors are kept between calls: other scales must still be read
    // (from the call's own pointers), and the codes may come as bytes.
    const at::Tensor sa2 = torch::full({}, 2.5f, opt), sb2 = torch::full({}, 0.125f, opt);
    const at::Tensor want2 =
        at::_scaled_mm(a, b.t(), sa2, sb2, std::nullopt, std::nullopt, c.out, c.fast);
    ASSERT_FALSE(torch::equal(want2, want));
    EXPECT_TRUE(torch::equal(*detail::tuned_scaled_gemm(a, b, sa2, sb2, c.out, c.fast), want2));
    const auto bytes =
        detail::tuned_scaled_gemm(a.view(at::kByte), c.ta, b.view(at::kByte), c.tb,
                                  sa.data_ptr<float>(), sb.data_ptr<float>(), c.out, c.fast);
    ASSERT_TRUE(bytes.has_value());
    EXPECT_TRUE(torch::equal(*bytes, want));
  }
  // Each problem was chosen for once; the large ones were timed, the small ones not.
  const std::vector<detail::GemmChoice> chosen = detail::gemm_choices();
  for (const Case& c : cases) {
    int seen = 0;
    for (const detail::GemmChoice& g : chosen) {
      if (g.problem != name(c)) continue;
      ++seen;
      EXPECT_GT(g.offered, 0) << g.problem;
      const bool large =
          static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k) >=
          detail::kTuneMinMacs;
      EXPECT_EQ(g.first_ms > 0, large && g.offered > 1) << g.problem;
      EXPECT_LE(g.chosen_ms, g.first_ms) << g.problem;
      EXPECT_LT(g.index, g.offered) << g.problem;
    }
    EXPECT_EQ(seen, 1) << name(c);
  }
}

TEST(TunedScaledGemm, Float8LinearGivesTheSameBitsWithAndWithoutTuning) {
  SKIP_WITHOUT_FP8_GEMMS();
  // 4096 tokens, 2048 -> 4096: every GEMM has 2^35 multiply-adds (all timed).
  const auto opt = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  torch::manual_seed(3);
  const torch::Tensor x0 = torch::randn({4096, 2048}, opt);
  const torch::Tensor w0 = torch::randn({4096, 2048}, opt) / 45;
  const torch::Tensor dy = torch::randn({4096, 4096}, opt);
  std::vector<torch::Tensor> out[2];
  for (const bool tune : {false, true}) {
    Float8LinearConfig cfg;
    cfg.tune_gemms = tune;
    cfg.stats_interval = 0;
    const torch::Tensor x = x0.clone().requires_grad_(true);
    const torch::Tensor w = w0.clone().requires_grad_(true);
    Float8LinearState st;
    const torch::Tensor y = float8_linear(x, w, {}, cfg, &st);
    y.backward(dy);
    EXPECT_EQ(st.probe.gemms_real, 3);
    out[tune] = {y, x.grad(), w.grad()};
  }
  const char* what[] = {"y", "dx", "dw"};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(out[0][i], out[1][i])) << what[i];
}

}  // namespace
}  // namespace fp8wb
