// The training engine on a GPU: a GPT with FP8 linears beside its bf16 reference, with
// the per-model peak memory each step records. FP8 layers keep FP8 codes, not the
// high-precision input, for the backward, so the FP8 model's peak must be below the
// reference's; both must count at least their parameters and AdamW state.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "fp8wb/core/train/trainer.h"
#include "train/models.h"
#include "train/trainer_step.h"

namespace fp8wb {
namespace {

struct Collect : MetricConsumer {
  std::mutex m;
  std::vector<StepMetrics> steps;
  std::vector<TensorMetrics> tensors;
  RunStatus status = RunStatus::Running;
  std::string message;
  void consume(const MetricBatch& b) override {
    const std::lock_guard<std::mutex> lock(m);
    steps.insert(steps.end(), b.steps.begin(), b.steps.end());
    tensors.insert(tensors.end(), b.tensors.begin(), b.tensors.end());
    if (b.final) {
      status = b.status;
      message = b.message;
    }
  }
};

TEST(TrainerCuda, FP8ModelPeaksBelowItsReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: GPU trainer test skipped";
  RunConfig c;
  c.device = "cuda:0";
  c.d_model = 1024;
  c.heads = 16;
  c.layers = 4;
  c.context = 256;
  c.batch = 32;
  c.dtype = ActivationDtype::Bf16;
  c.reference = true;
  c.steps = 4;
  c.stats_interval = 0;
  c.sqnr_interval = 0;
  auto got = std::make_shared<Collect>();
  auto bus = std::make_shared<MetricBus>();
  bus->add(got);
  Trainer t(c, bus);
  t.run();
  ASSERT_EQ(got->status, RunStatus::Finished) << got->message;
  ASSERT_FALSE(got->steps.empty());
  const StepMetrics& last = got->steps.back();
  ASSERT_TRUE(std::isfinite(last.mem_fp8));
  ASSERT_TRUE(std::isfinite(last.mem_ref));
  // Parameters (fp32) and AdamW's two moments: at least 12 bytes a parameter.
  const double params = 4.0 * 12.0 * c.d_model * c.d_model;  // the blocks' linears alone
  EXPECT_GT(last.mem_fp8, 12.0 * params / 4.0);
  EXPECT_GT(last.mem_ref, 12.0 * params / 4.0);
  EXPECT_LT(last.mem_fp8, last.mem_ref)
      << "FP8 " << last.mem_fp8 / 1e9 << " GB, reference " << last.mem_ref / 1e9 << " GB";
  std::printf("peak memory: FP8 %.3f GB, bf16 reference %.3f GB (%.2fx)\n", last.mem_fp8 / 1e9,
              last.mem_ref / 1e9, last.mem_ref / last.mem_fp8);
  for (const StepMetrics& m : got->steps) EXPECT_TRUE(std::isfinite(m.peak_rss));
}

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() /
         b.to(torch::kDouble).norm().item<double>();
}

// The fused attention in bf16 on the GPU against the unfused path it replaces and against
// fp64: no further from fp64 than the unfused path, and within bf16's rounding of it.
TEST(TrainerCuda, FusedAttentionInBf16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  if (!train::fused_attention_available()) GTEST_SKIP() << "no scaled_dot_product_attention";
  torch::manual_seed(5);
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  for (const int64_t dh : {64, 48, 20}) {  // 20: not the flash kernel's
    const torch::Tensor q = torch::randn({4, 8, 256, dh}, o), k = torch::randn({4, 8, 256, dh}, o),
                        v = torch::randn({4, 8, 256, dh}, o);
    const torch::Tensor fused = train::causal_attention(q, k, v, true);
    const torch::Tensor plain = train::causal_attention(q, k, v, false);
    const torch::Tensor ref = train::causal_attention(q.to(torch::kDouble), k.to(torch::kDouble),
                                                      v.to(torch::kDouble), false);
    const double e_fused = rel(fused, ref), e_plain = rel(plain, ref), apart = rel(fused, plain);
    std::printf("attention bf16, head size %lld: fused %.2e, unfused %.2e from fp64; %.2e apart\n",
                static_cast<long long>(dh), e_fused, e_plain, apart);
    EXPECT_LE(e_fused, e_plain * 1.05);
    EXPECT_LT(apart, 1e-2);
  }
}

// Layer norm in bf16 on the GPU against the fp32 round trip it replaces, forward and
// backward (input and weight gradients), and both against fp64.
TEST(TrainerCuda, LayerNormInBf16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(11);
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  const torch::Tensor x0 = (torch::randn({512, 768}, o) * 3 + 1).to(torch::kBFloat16);
  const torch::Tensor w0 = 1 + 0.1 * torch::randn({768}, o), b0 = 0.1 * torch::randn({768}, o);
  const torch::Tensor dy = torch::randn({512, 768}, o).to(torch::kBFloat16);
  struct Out {
    torch::Tensor y, dx, dw;
  };
  const auto run = [&](bool fast, torch::ScalarType dt) {
    if (dt == torch::kDouble) {  // the reference: layer norm in fp64 throughout
      torch::Tensor x = x0.to(dt).clone().requires_grad_(true),
                    w = w0.to(dt).clone().requires_grad_(true),
                    b = b0.to(dt).clone().requires_grad_(true);
      torch::Tensor y = torch::layer_norm(x, {768}, w, b, 1e-5);
      y.backward(dy.to(dt));
      return Out{y.detach(), x.grad(), w.grad()};
    }
    // Leaves of their own: each run's gradients are its own.
    torch::Tensor x = x0.to(dt).clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
                  b = b0.clone().requires_grad_(true);
    torch::Tensor y = train::layer_norm(x, w, b, 1e-5, fast);
    y.backward(dy.to(y.scalar_type()));
    return Out{y.detach(), x.grad(), w.grad()};
  };
  const Out fast = run(true, torch::kBFloat16), plain = run(false, torch::kBFloat16),
            ref = run(false, torch::kDouble);
  EXPECT_EQ(fast.y.scalar_type(), torch::kBFloat16);
  const double ey = rel(fast.y, ref.y), dy_apart = rel(fast.y, plain.y);
  std::printf(
      "layer norm bf16: y %.2e (fp32 round trip %.2e) from fp64, %.2e apart; dx %.2e "
      "(%.2e), dw %.2e (%.2e)\n",
      ey, rel(plain.y, ref.y), dy_apart, rel(fast.dx, ref.dx), rel(plain.dx, ref.dx),
      rel(fast.dw, ref.dw), rel(plain.dw, ref.dw));
  // bf16 keeps 8 significant bits: 2^-9 relative rounding of the output, the weight's too.
  EXPECT_LT(ey, 4e-3);
  EXPECT_LT(dy_apart, 4e-3);
  EXPECT_LT(rel(fast.dx, ref.dx), 1e-2);
  EXPECT_LT(rel(fast.dw, ref.dw), 1e-2);
}

// Whether a and b (fp32 tensors of bf16-rounded values) are at most one bf16 step apart
// everywhere, and how many elements differ at all.
std::pair<bool, int64_t> within_a_bf16_step(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor big = torch::max(a.abs(), b.abs()).clamp_min(1e-30);
  const torch::Tensor step = torch::pow(2.0, torch::floor(torch::log2(big)) - 7);
  return {((a - b).abs() <= step).all().item<bool>(), (a != b).sum().item<int64_t>()};
}

// The GPU layer norm's own backward against ATen's layer norm with the weight and bias
// rounded to bf16 as it rounds them: the output and the input's gradient bit for bit (the
// same kernels); the weight's and bias's gradients (fp32 sums in another order, rounded to
// bf16) within one bf16 step of ATen's, few apart at all, and the same on every run; rows
// that no share divides.
TEST(TrainerCuda, LayerNormGradsAreAtens) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(12);
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  for (const auto& shape : std::vector<std::vector<int64_t>>{{8, 1024, 768}, {3, 333, 1024}}) {
    const int64_t d = shape.back();
    SCOPED_TRACE("width " + std::to_string(d));
    const torch::Tensor x0 = (torch::randn(shape, o) * 2 + 0.5).to(torch::kBFloat16);
    const torch::Tensor dy = torch::randn(shape, o).to(torch::kBFloat16);
    const torch::Tensor w0 = 1 + 0.1 * torch::randn({d}, o), b0 = 0.1 * torch::randn({d}, o);
    const auto ours = [&] {
      torch::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
                    b = b0.clone().requires_grad_(true);
      torch::Tensor y = train::layer_norm(x, w, b, 1e-5, true);
      y.backward(dy);
      return std::make_tuple(y.detach(), x.grad(), w.grad(), b.grad());
    };
    torch::Tensor xa = x0.clone().requires_grad_(true), wa = w0.clone().requires_grad_(true),
                  ba = b0.clone().requires_grad_(true);
    torch::Tensor ya =
        torch::layer_norm(xa, {d}, wa.to(torch::kBFloat16), ba.to(torch::kBFloat16), 1e-5);
    ya.backward(dy);
    const auto [y, dx, dw, db] = ours();
    const auto [y2, dx2, dw2, db2] = ours();
    EXPECT_TRUE(torch::equal(y, ya.detach()));
    EXPECT_TRUE(torch::equal(dx, xa.grad()));
    ASSERT_EQ(dw.scalar_type(), torch::kFloat);
    ASSERT_EQ(db.scalar_type(), torch::kFloat);
    EXPECT_TRUE(torch::equal(dw, dw2) && torch::equal(db, db2)) << "not deterministic";
    for (const auto& [got, want, what] :
         {std::make_tuple(dw, wa.grad(), "weight"), std::make_tuple(db, ba.grad(), "bias")}) {
      const auto [close, apart] = within_a_bf16_step(got, want);
      EXPECT_TRUE(close) << what;
      EXPECT_LE(apart, d / 20) << what << ": elements apart from ATen's";
    }
  }
}

// The fused AdamW (one kernel, skips on the device) against torch::optim::AdamW in fp32.
TEST(TrainerCuda, FusedAdamWIsTorchAdamW) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  torch::manual_seed(7);
  std::vector<torch::Tensor> a{torch::randn({64, 128}, o), torch::randn({128}, o)};
  std::vector<torch::Tensor> b{a[0].clone(), a[1].clone()};
  train::AdamW mine(a, 3e-3, 0.01);
  EXPECT_EQ(mine.fused(), train::fused_adamw_available(torch::kCUDA));
  torch::optim::AdamW theirs(b, torch::optim::AdamWOptions(3e-3).weight_decay(0.01));
  for (int step = 0; step < 20; ++step) {
    for (size_t i = 0; i < a.size(); ++i) {
      const torch::Tensor g = torch::randn(a[i].sizes(), o);
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    const bool skip = step == 5 || step == 6;
    mine.step(torch::full({1}, skip ? 1.0f : 0.0f, o));
    if (!skip) theirs.step();
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(rel(a[i], b[i]), 1e-6) << "parameter " << i;
}

// The global-norm clip on the device against LibTorch's, and its norm.
TEST(TrainerCuda, ClipGradNormOnTheDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  torch::manual_seed(9);
  std::vector<torch::Tensor> a{torch::randn({300, 70}, o), torch::randn({70}, o)};
  std::vector<torch::Tensor> b{a[0].clone(), a[1].clone()};
  for (size_t i = 0; i < a.size(); ++i) {
    a[i].mutable_grad() = a[i] * 2;
    b[i].mutable_grad() = b[i] * 2;
  }
  const torch::Tensor n = train::clip_grad_norm(a, 1.0);
  EXPECT_TRUE(n.is_cuda());
  const double want = torch::nn::utils::clip_grad_norm_(b, 1.0);
  EXPECT_NEAR(n.item<double>(), want, 1e-5 * want);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(rel(a[i].grad(), b[i].grad()), 1e-6);
}

// Every step sampled, each read after the next step is launched: each step's statistics
// are that step's own. Under delayed scaling the newest history entry is the step's amax,
// which a copy taken after the next step's forward would not hold; a run sampling every
// other step stores the same figures at the steps both sample.
TEST(TrainerCuda, SampledStepsReadAfterTheNextLaunchAreTheirOwn) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto run = [](int interval) {
    RunConfig c;
    c.device = "cuda:0";
    c.d_model = 64;
    c.heads = 4;
    c.layers = 2;
    c.context = 32;
    c.batch = 8;
    c.dtype = ActivationDtype::Bf16;
    c.reference = false;
    c.steps = 8;
    c.scaling = ScalingMode::Delayed;
    c.window = 4;
    c.stats_interval = interval;
    c.sqnr_interval = 0;
    auto got = std::make_shared<Collect>();
    auto bus = std::make_shared<MetricBus>();
    bus->add(got);
    Trainer t(c, bus);
    t.run();
    EXPECT_EQ(got->status, RunStatus::Finished) << got->message;
    return got;
  };
  const auto every = run(1), other = run(2);
  std::map<std::tuple<int64_t, std::string, int>, const TensorMetrics*> by_key;
  std::set<int64_t> steps;
  for (const TensorMetrics& t : every->tensors) {
    steps.insert(t.step);
    by_key[{t.step, t.layer, role_index(t.role)}] = &t;
    ASSERT_FALSE(t.amax_history.empty()) << t.layer << " step " << t.step;
    EXPECT_EQ(t.amax_history.front(), t.amax)
        << t.layer << " role " << role_index(t.role) << " step " << t.step;
  }
  EXPECT_EQ(steps.size(), 8u);
  size_t compared = 0;
  for (const TensorMetrics& t : other->tensors) {
    const auto it = by_key.find({t.step, t.layer, role_index(t.role)});
    ASSERT_NE(it, by_key.end()) << t.layer << " step " << t.step;
    EXPECT_EQ(it->second->amax, t.amax) << t.layer << " step " << t.step;
    EXPECT_EQ(it->second->scale, t.scale) << t.layer << " step " << t.step;
    EXPECT_EQ(it->second->amax_history, t.amax_history) << t.layer << " step " << t.step;
    ++compared;
  }
  EXPECT_GT(compared, 0u);
}

// A sampled step's histories copied at once (one gather, one copy) equal each role's own
// copy: GPU layers of two windows and a CPU layer among them, read after a sync.
TEST(TrainerCuda, HistoriesCopiedAtOnceAreEachRolesOwn) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  std::vector<Float8Linear> layers;
  for (int i = 0; i < 4; ++i) {
    Float8LinearConfig cfg;
    cfg.delayed = true;
    cfg.delayed_scaling = {i == 1 ? 3 : 5, 0, AmaxAlgo::Max, InitialScale::BootstrapCurrent};
    layers.emplace_back(64, 32, false, cfg);
    if (i != 2) layers.back()->to(torch::kCUDA);
  }
  for (int step = 0; step < 7; ++step) {
    for (size_t i = 0; i < layers.size(); ++i) {
      const torch::Device d = i == 2 ? torch::kCPU : torch::kCUDA;
      const double gain = std::pow(2.0, step + static_cast<int>(i));
      const torch::Tensor x = (torch::randn({16, 64}) * gain).to(d).requires_grad_(true);
      layers[i]->forward(x).backward((torch::randn({16, 32}) * gain).to(d));
    }
  }
  std::vector<std::pair<const Float8LinearState*, Role>> which;
  for (Float8Linear& l : layers) {
    for (const RoleEntry& r : kRoles) which.emplace_back(&l->state(), r.value);
  }
  std::swap(which[1], which[7]);  // not in layer order
  const auto copies = train::amax_history_copies(which);
  torch::cuda::synchronize();
  ASSERT_EQ(copies.size(), which.size());
  for (size_t k = 0; k < which.size(); ++k) {
    const std::vector<float> want = which[k].first->amax_history(which[k].second);
    EXPECT_EQ(want.size(), which[k].first == &layers[1]->state() ? 3u : 5u) << k;
    EXPECT_EQ(copies[k].history(), want) << "entry " << k;
  }
}

}  // namespace
}  // namespace fp8wb
