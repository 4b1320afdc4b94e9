// Float8Linear on CUDA tensors against the CPU emulation of the same layer: the same FP8
// codes and scales (the project's kernels on both sides), so outputs and gradients agree
// up to accumulation order (and bf16 rounding where _scaled_mm gives bf16); the same
// statistics; delayed scaling step by step; GEMMs on FP8 tensor cores where this GPU and
// LibTorch take them. Skips without a CUDA device (or with a CPU-only LibTorch).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cctype>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/torch/float8_linear.h"

namespace fp8wb {
namespace {

#define SKIP_WITHOUT_CUDA()         \
  if (!torch::cuda::is_available()) \
  GTEST_SKIP() << "no CUDA device (or a CPU-only LibTorch): GPU Float8Linear tests skipped"

double rel(const torch::Tensor& got, const torch::Tensor& want) {
  const torch::Tensor w = want.to(torch::kCPU, torch::kDouble);
  return (got.to(torch::kCPU, torch::kDouble) - w).norm().item<double>() / w.norm().item<double>();
}

QuantRecipe R(ScalingKind k, Format f) {
  QuantRecipe r;
  r.kind = k;
  r.format = f;
  return r;
}

// The real FP8 GEMMs that an H200 with PyTorch >= 2.4 runs: all three (tensorwise), or
// at least fprop (per-row and block recipes, where some pairs are emulated).
enum class Expect { AllReal, FpropReal, Emulated };

struct GpuCase {
  const char* name;
  QuantRecipe x, w, dy;
  Expect expect;
  double tol;  // relative, fp32 accumulation (no fast accumulation) + bf16 output rounding
  int64_t in = 512, out = 256, tokens = 256;
};

bool fp8_hardware() {
  const BackendInfo b = probe_backend();
  return b.fp8_gemm_real;
}

class Float8LinearCuda : public ::testing::TestWithParam<GpuCase> {
 protected:
  void SetUp() override { SKIP_WITHOUT_CUDA(); }
};

TEST_P(Float8LinearCuda, MatchesTheCpuEmulation) {
  const GpuCase c = GetParam();
  Float8LinearConfig cfg;
  cfg.input = c.x;
  cfg.weight = c.w;
  cfg.grad_output = c.dy;
  cfg.fprop_fast_accum = false;
  torch::manual_seed(0);
  Float8Linear cpu(c.in, c.out, true, cfg);
  Float8Linear gpu(c.in, c.out, true, cfg);
  {
    torch::NoGradGuard ng;
    gpu->weight.copy_(cpu->weight);
    gpu->bias.copy_(cpu->bias);
  }
  gpu->to(torch::kCUDA);
  const torch::Tensor x = torch::randn({4, c.tokens / 4, c.in}) * 3;
  const torch::Tensor dy = torch::randn({4, c.tokens / 4, c.out});
  const torch::Tensor xc = x.clone().requires_grad_(true);
  const torch::Tensor xg = x.to(torch::kCUDA).requires_grad_(true);
  const torch::Tensor yc = cpu->forward(xc);
  const torch::Tensor yg = gpu->forward(xg);
  ASSERT_TRUE(yg.is_cuda());
  ASSERT_EQ(yg.sizes(), yc.sizes());
  yc.backward(dy);
  yg.backward(dy.to(torch::kCUDA));
  EXPECT_LT(rel(yg.detach(), yc.detach()), c.tol);
  EXPECT_LT(rel(xg.grad(), xc.grad()), c.tol);
  EXPECT_LT(rel(gpu->weight.grad(), cpu->weight.grad()), c.tol);
  EXPECT_LT(rel(gpu->bias.grad(), cpu->bias.grad()), 1e-5);

  // The same quantizations: identical counters and histograms, sums to round-off.
  const Float8Probe& pc = cpu->probe();
  const Float8Probe& pg = gpu->probe();
  for (const auto& [name, a, b] :
       {std::tuple<const char*, const RoleStats*, const RoleStats*>{"input", &pg.input, &pc.input},
        {"weight", &pg.weight, &pc.weight},
        {"grad_output", &pg.grad_output, &pc.grad_output}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(a->valid && b->valid);
    EXPECT_EQ(a->stats.raw.numel, b->stats.raw.numel);
    EXPECT_EQ(a->stats.raw.underflow, b->stats.raw.underflow);
    EXPECT_EQ(a->stats.raw.saturated, b->stats.raw.saturated);
    EXPECT_EQ(a->stats.raw.amax_bits, b->stats.raw.amax_bits);
    for (int i = 0; i < kHistBins; ++i) EXPECT_EQ(a->stats.raw.hist[i], b->stats.raw.hist[i]);
    // fp32 sums of four squares on the GPU (numerics.md): at most 5 roundings of 2^-24.
    EXPECT_NEAR(a->stats.raw.sq_err, b->stats.raw.sq_err, 5 * 0x1p-24 * b->stats.raw.sq_err);
    ASSERT_EQ(a->stats.map_sq_err.size(), b->stats.map_sq_err.size());
  }
  EXPECT_EQ(pg.gemms_real + pg.gemms_emulated, 3);
  if (fp8_hardware()) {
    if (c.expect == Expect::AllReal) {
      EXPECT_EQ(pg.gemms_real, 3);
    }
    if (c.expect == Expect::FpropReal) {
      EXPECT_GE(pg.gemms_real, 1);
    }
  }
  if (c.expect == Expect::Emulated) {
    EXPECT_EQ(pg.gemms_real, 0);
  }
  std::printf("[ %s ] real FP8 GEMMs: %lld of 3\n", c.name, static_cast<long long>(pg.gemms_real));
}

// FP8 tensor cores accumulate with fewer bits than fp32 even without fast accumulation:
// against an fp32 GEMM of the same FP8 values, about 1e-4 relative (measured on an H200;
// tests/gpu/scaled_mm_support.py shows it for PyTorch's own FP8 GEMM too).
constexpr double kFp8Accum = 5e-4;
const auto E4 = Format::E4M3FN;
const auto E5 = Format::E5M2;
const auto T = ScalingKind::Tensorwise;

INSTANTIATE_TEST_SUITE_P(
    Recipes, Float8LinearCuda,
    ::testing::Values(
        GpuCase{"hybrid_tensorwise", R(T, E4), R(T, E4), R(T, E5), Expect::AllReal, kFp8Accum},
        GpuCase{"e4m3_tensorwise", R(T, E4), R(T, E4), R(T, E4), Expect::AllReal, kFp8Accum},
        GpuCase{"e4m3_rowwise", R(ScalingKind::Rowwise, E4), R(ScalingKind::Rowwise, E4),
                R(ScalingKind::Rowwise, E4), Expect::FpropReal, 1e-2},
        GpuCase{"hybrid_rowwise", R(ScalingKind::Rowwise, E4), R(ScalingKind::Rowwise, E4),
                R(ScalingKind::Rowwise, E5), Expect::FpropReal, 1e-2},
        // dgrad and wgrad contract over 256 here: emulated (see float8_linear_cuda.cpp).
        GpuCase{"e4m3_blockwise", R(ScalingKind::Block1x128, E4), R(ScalingKind::Block128x128, E4),
                R(ScalingKind::Block1x128, E4), Expect::FpropReal, 1e-2},
        GpuCase{"e4m3_blockwise_k512", R(ScalingKind::Block1x128, E4),
                R(ScalingKind::Block128x128, E4), R(ScalingKind::Block1x128, E4), Expect::AllReal,
                1e-2, 1024, 512, 512},
        GpuCase{"hybrid_blockwise_k512", R(ScalingKind::Block1x128, E4),
                R(ScalingKind::Block128x128, E4), R(ScalingKind::Block1x128, E5), Expect::AllReal,
                1e-2, 1024, 512, 512},
        GpuCase{"mxfp8", R(ScalingKind::MX, E4), R(ScalingKind::MX, E4), R(ScalingKind::MX, E5),
                Expect::Emulated, 1e-5},
        GpuCase{"e4m3fnuz_tensorwise", R(T, Format::E4M3FNUZ), R(T, Format::E4M3FNUZ),
                R(T, Format::E5M2FNUZ), Expect::Emulated, 1e-5}),
    [](const ::testing::TestParamInfo<GpuCase>& p) { return std::string(p.param.name); });

TEST(Float8LinearCudaFastAccum, StaysCloseToTheEmulation) {
  SKIP_WITHOUT_CUDA();
  Float8LinearConfig cfg;  // fast accumulation in fprop (the default)
  torch::manual_seed(1);
  Float8Linear cpu(1024, 512, false, cfg);
  Float8Linear gpu(1024, 512, false, cfg);
  {
    torch::NoGradGuard ng;
    gpu->weight.copy_(cpu->weight);
  }
  gpu->to(torch::kCUDA);
  const torch::Tensor x = torch::randn({256, 1024});
  EXPECT_LT(rel(gpu->forward(x.to(torch::kCUDA)).detach(), cpu->forward(x).detach()), 2e-3);
}

TEST(Float8LinearCudaDelayed, FollowsTheCpuScalerStepByStep) {
  SKIP_WITHOUT_CUDA();
  for (const InitialScale init : {InitialScale::One, InitialScale::BootstrapCurrent}) {
    Float8LinearConfig cfg;
    cfg.delayed = true;
    cfg.delayed_scaling = {4, 1, AmaxAlgo::Max, init};
    cfg.fprop_fast_accum = false;
    cfg.stats_interval = 2;
    torch::manual_seed(2);
    Float8Linear cpu(256, 128, false, cfg);
    Float8Linear gpu(256, 128, false, cfg);
    {
      torch::NoGradGuard ng;
      gpu->weight.copy_(cpu->weight);
    }
    gpu->to(torch::kCUDA);
    for (int step = 0; step < 8; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      // Activations that drift by 4x a step, then fall back: the window's lag shows.
      const double gain = step < 5 ? std::pow(4.0, step) : 0.25;
      const torch::Tensor x = torch::randn({128, 256}) * gain;
      const torch::Tensor dy = torch::randn({128, 128}) * gain;
      const torch::Tensor xc = x.clone().requires_grad_(true);
      const torch::Tensor xg = x.to(torch::kCUDA).requires_grad_(true);
      // Small blocks full of NaN back in the allocator's cache: a pass that read a scale
      // not yet written would measure its errors with NaN.
      const auto nan_blocks = [] {
        for (int i = 0; i < 16; ++i) (void)torch::full({1}, NAN, torch::device(torch::kCUDA));
      };
      nan_blocks();
      const torch::Tensor yc = cpu->forward(xc), yg = gpu->forward(xg);
      yc.backward(dy);
      nan_blocks();
      yg.backward(dy.to(torch::kCUDA));
      EXPECT_LT(rel(yg.detach(), yc.detach()), kFp8Accum);
      EXPECT_LT(rel(xg.grad(), xc.grad()), kFp8Accum);
      for (const RoleEntry& role : kRoles) {
        EXPECT_EQ(gpu->state().amax_history(role.value), cpu->state().amax_history(role.value))
            << "role " << role.name;
      }
      cpu->weight.mutable_grad() = torch::Tensor();
      gpu->weight.mutable_grad() = torch::Tensor();
    }
    EXPECT_EQ(gpu->probe().stats_step, 6);
    EXPECT_EQ(gpu->probe().input.stats.raw.amax_bits, cpu->probe().input.stats.raw.amax_bits);
    // The scale each role's statistics say it used (the delayed update writes it on the GPU),
    // and the errors measured with it: the same codes and scale give the CPU's counts, and
    // its square sums up to their order of summation.
    for (const RoleEntry& role : kRoles) {
      const RoleStats &g = gpu->probe().stats(role.value), &c = cpu->probe().stats(role.value);
      EXPECT_TRUE(g.valid) << "role " << role.name;
      EXPECT_EQ(g.scale, c.scale) << "role " << role.name;
      EXPECT_EQ(g.stats.raw.underflow, c.stats.raw.underflow) << "role " << role.name;
      EXPECT_EQ(g.stats.raw.saturated, c.stats.raw.saturated) << "role " << role.name;
      EXPECT_NEAR(g.stats.raw.sq_err, c.stats.raw.sq_err, 1e-6 * c.stats.raw.sq_err)
          << "role " << role.name;
      ASSERT_EQ(g.stats.map_sq_err.size(), c.stats.map_sq_err.size()) << "role " << role.name;
      for (size_t i = 0; i < c.stats.map_sq_err.size(); ++i) {
        EXPECT_NEAR(g.stats.map_sq_err[i], c.stats.map_sq_err[i], 1e-6 * c.stats.map_sq_err[i])
            << "role " << role.name << ", cell " << i;
      }
    }
  }
}

TEST(Float8LinearCudaTraining, Bf16FP8TracksBf16) {
  SKIP_WITHOUT_CUDA();
  // A two-layer MLP fitting a fixed random teacher, bf16 on the GPU: FP8 (HYBRID,
  // tensorwise) against plain bf16 from the same start.
  auto run = [](bool fp8) {
    torch::manual_seed(3);
    LinearLayer fc1(256, 512), fc2(512, 256);
    fc1->to(torch::kCUDA, torch::kBFloat16);
    fc2->to(torch::kCUDA, torch::kBFloat16);
    if (fp8) {
      fc1->to_float8({});
      fc2->to_float8({});
    }
    torch::Tensor teacher = torch::randn({256, 256}).to(torch::kCUDA) / 16;
    std::vector<torch::Tensor> params = fc1->parameters();
    for (auto& p : fc2->parameters()) params.push_back(p);
    torch::optim::Adam opt(params, torch::optim::AdamOptions(1e-3));
    double first = 0, last = 0;
    for (int step = 0; step < 150; ++step) {
      const torch::Tensor x = torch::randn({512, 256}).to(torch::kCUDA);
      const torch::Tensor target = x.matmul(teacher).to(torch::kBFloat16);
      const torch::Tensor y = fc2->forward(torch::gelu(fc1->forward(x.to(torch::kBFloat16))));
      torch::Tensor loss = torch::mse_loss(y.to(torch::kFloat), target.to(torch::kFloat));
      opt.zero_grad();
      loss.backward();
      opt.step();
      last = loss.item<double>();
      if (step == 0) first = last;
    }
    return std::make_pair(first, last);
  };
  const auto [bf16_first, bf16] = run(false);
  const auto [fp8_first, fp8] = run(true);
  std::printf("loss: bf16 %.5f -> %.5f, FP8 %.5f -> %.5f\n", bf16_first, bf16, fp8_first, fp8);
  EXPECT_LT(fp8, 0.5 * fp8_first);
  EXPECT_LT(std::abs(fp8 - bf16), 0.25 * bf16 + 2e-3);
}

TEST(Float8LinearCudaErrors, MixedDevicesAndSmallLayers) {
  SKIP_WITHOUT_CUDA();
  Float8Linear layer(64, 64, true, Float8LinearConfig{});
  EXPECT_THROW(layer->forward(torch::randn({8, 64}).to(torch::kCUDA)), std::invalid_argument);
  struct Net : torch::nn::Module {
    LinearLayer small{nullptr}, big{nullptr};
    Net() {
      small = register_module("small", LinearLayer(64, 64));
      big = register_module("big", LinearLayer(1024, 1024));
    }
  };
  auto net = std::make_shared<Net>();
  net->to(torch::kCUDA);
  const ConvertReport r = convert_to_float8(*net, Float8LinearConfig{});
  EXPECT_EQ(r.converted, std::vector<std::string>{"big"});
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("too small"), std::string::npos) << r.skipped[0];
}

}  // namespace
}  // namespace fp8wb
