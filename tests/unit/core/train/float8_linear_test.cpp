// Float8Linear (CPU emulation): forward and backward against fp64 GEMMs of the same
// dequantized operands, against an fp32 linear within FP8 tolerance, conversion of a
// model, and a short training run.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "fp8wb/core/checkpoint/open_checkpoint.h"
#include "fp8wb/core/torch/float8_linear.h"
#include "fp8wb/kernels/quantize_cpu.h"

namespace fp8wb {
namespace {

// decode(code) * scale_inv for an operand quantized along its rows, computed with the
// kernels directly (fp64 result).
torch::Tensor fp8_values(const torch::Tensor& t, const QuantRecipe& r) {
  const torch::Tensor c = t.to(torch::kFloat).contiguous();
  std::vector<uint8_t> codes(static_cast<size_t>(c.numel()));
  const auto q =
      quantize_current(TensorRef::of(c.data_ptr<float>(), c.size(0), c.size(1)), r, {codes.data()});
  torch::Tensor out = torch::empty(c.sizes(), torch::kFloat);
  dequantize(codes.data(), r, q.scales, out.data_ptr<float>());
  return out.to(torch::kDouble);
}

double rel(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() /
         b.to(torch::kDouble).norm().item<double>();
}

QuantRecipe R(ScalingKind k, Format f) {
  QuantRecipe r;
  r.kind = k;
  r.format = f;
  return r;
}

struct Case {
  const char* name;
  ScalingKind x, w, dy;
};

class Float8LinearRecipes : public ::testing::TestWithParam<Case> {};

TEST_P(Float8LinearRecipes, ForwardAndBackwardMatchFp64OfTheQuantizedOperands) {
  torch::manual_seed(0);
  const Case c = GetParam();
  Float8LinearConfig cfg;
  cfg.input = R(c.x, Format::E4M3FN);
  cfg.weight = R(c.w, Format::E4M3FN);
  cfg.grad_output = R(c.dy, Format::E5M2);
  Float8Linear layer(256, 128, true, cfg);
  torch::Tensor x = torch::randn({4, 32, 256}, torch::requires_grad());
  torch::Tensor y = layer->forward(x);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{4, 32, 128}));
  const torch::Tensor x2 = x.detach().reshape({-1, 256});
  const torch::Tensor xq = fp8_values(x2, cfg.input),
                      wq = fp8_values(layer->weight.detach(), cfg.weight);
  const torch::Tensor want = xq.matmul(wq.t()) + layer->bias.detach().to(torch::kDouble);
  // Same operands, fp32 accumulation against fp64: round-off only.
  EXPECT_LT(rel(y.detach().reshape({-1, 128}), want), 1e-6);
  // Against the plain fp32 linear: FP8's own error (E4M3: a few percent).
  const torch::Tensor ref =
      torch::nn::functional::linear(x2, layer->weight.detach(), layer->bias.detach());
  EXPECT_LT(rel(y.detach().reshape({-1, 128}), ref), 0.08);

  const torch::Tensor dy = torch::randn({4, 32, 128});
  y.backward(dy);
  const torch::Tensor dy2 = dy.reshape({-1, 128});
  // dgrad: dy along N, w along N; wgrad: both along M (x from its FP8 codes).
  const torch::Tensor dx_want =
      fp8_values(dy2, cfg.grad_output)
          .matmul(fp8_values(layer->weight.detach().t().contiguous(), cfg.weight).t());
  const torch::Tensor x_fp8 = xq.to(torch::kFloat);
  const torch::Tensor dw_want = fp8_values(dy2.t().contiguous(), cfg.grad_output)
                                    .matmul(fp8_values(x_fp8.t().contiguous(), cfg.input).t());
  EXPECT_LT(rel(x.grad().reshape({-1, 256}), dx_want), 1e-6);
  EXPECT_LT(rel(layer->weight.grad(), dw_want), 1e-6);
  EXPECT_LT(rel(layer->bias.grad(), dy2.sum(0).to(torch::kDouble)), 1e-6);
  // And close to the high-precision gradients (E5M2 gradients: ~10% worst case).
  EXPECT_LT(rel(x.grad().reshape({-1, 256}), dy2.matmul(layer->weight.detach())), 0.15);
  EXPECT_LT(rel(layer->weight.grad(), dy2.t().matmul(x2)), 0.15);
  // The probe saw all three roles.
  EXPECT_TRUE(layer->probe().input.valid && layer->probe().weight.valid &&
              layer->probe().grad_output.valid);
  EXPECT_EQ(layer->probe().input.stats.raw.numel, 4u * 32 * 256);
  EXPECT_EQ(layer->probe().grad_output.stats.raw.numel, 4u * 32 * 128);
}

INSTANTIATE_TEST_SUITE_P(Recipes, Float8LinearRecipes,
                         ::testing::Values(Case{"tensorwise", ScalingKind::Tensorwise,
                                                ScalingKind::Tensorwise, ScalingKind::Tensorwise},
                                           Case{"rowwise", ScalingKind::Rowwise,
                                                ScalingKind::Rowwise, ScalingKind::Rowwise},
                                           Case{"blockwise", ScalingKind::Block1x128,
                                                ScalingKind::Block128x128, ScalingKind::Block1x128},
                                           Case{"mx", ScalingKind::MX, ScalingKind::MX,
                                                ScalingKind::MX}),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(Float8Linear, StatisticsAndSqnrOnTheirIntervals) {
  torch::manual_seed(5);
  Float8LinearConfig cfg;
  cfg.stats_interval = 3;
  cfg.sqnr_interval = 2;
  LinearLayer layer(128, 64);
  layer->to_float8(cfg);
  std::vector<int64_t> stats_steps, sqnr_steps;
  for (int step = 0; step < 5; ++step) {
    torch::Tensor x = torch::randn({32, 128}, torch::requires_grad());
    torch::Tensor y = layer->forward(x);
    y.backward(torch::randn_like(y));  // a random gradient: E5M2 rounds it
    stats_steps.push_back(layer->probe().stats_step);
    sqnr_steps.push_back(layer->probe().sqnr_step);
    if (step == 4) {
      // Step 4 is an SQNR step: check the figure against the outputs directly.
      const torch::Tensor hp =
          torch::nn::functional::linear(x.detach(), layer->weight.detach(), layer->bias.detach());
      const double want =
          10 * std::log10(hp.to(torch::kDouble).pow(2).sum().item<double>() /
                          (hp - y.detach()).to(torch::kDouble).pow(2).sum().item<double>());
      EXPECT_NEAR(layer->probe().fprop_sqnr_db, want, 0.05);
    }
  }
  EXPECT_EQ(stats_steps, (std::vector<int64_t>{0, 0, 0, 3, 3}));
  EXPECT_EQ(sqnr_steps, (std::vector<int64_t>{0, 0, 2, 2, 4}));
  EXPECT_EQ(layer->probe().steps, 5);
  // E4M3 operands: about 25-35 dB on the forward; E5M2 gradients: less on the backward.
  EXPECT_GT(layer->probe().fprop_sqnr_db, 20);
  EXPECT_LT(layer->probe().fprop_sqnr_db, 40);
  EXPECT_GT(layer->probe().dgrad_sqnr_db, 12);
  EXPECT_LT(layer->probe().dgrad_sqnr_db, layer->probe().fprop_sqnr_db);
  EXPECT_GT(layer->probe().wgrad_sqnr_db, 12);

  Float8LinearConfig off;
  off.stats_interval = 0;
  LinearLayer quiet(128, 64);
  quiet->to_float8(off);
  quiet->forward(torch::randn({8, 128})).sum().backward();
  EXPECT_FALSE(quiet->probe().input.valid);
  EXPECT_EQ(quiet->probe().stats_step, -1);
}

uint64_t double_bits(double d) {
  uint64_t b = 0;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

void expect_identical(const TensorStats& a, const TensorStats& b) {
  EXPECT_EQ(a.raw.numel, b.raw.numel);
  EXPECT_EQ(a.raw.underflow, b.raw.underflow);
  EXPECT_EQ(a.raw.subnormal, b.raw.subnormal);
  EXPECT_EQ(a.raw.saturated, b.raw.saturated);
  EXPECT_EQ(a.raw.amax_bits, b.raw.amax_bits);
  EXPECT_EQ(double_bits(a.raw.sq_err), double_bits(b.raw.sq_err));
  EXPECT_EQ(double_bits(a.raw.sq_sum), double_bits(b.raw.sq_sum));
  for (int i = 0; i < kHistBins; ++i) EXPECT_EQ(a.raw.hist[i], b.raw.hist[i]) << "bin " << i;
  ASSERT_EQ(a.map_sq_err.size(), b.map_sq_err.size());
  for (size_t i = 0; i < a.map_sq_err.size(); ++i) {
    EXPECT_EQ(double_bits(a.map_sq_err[i]), double_bits(b.map_sq_err[i])) << "cell " << i;
    EXPECT_EQ(double_bits(a.map_sq_sum[i]), double_bits(b.map_sq_sum[i])) << "cell " << i;
  }
}

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

// The layer's passes run on LibTorch's intra-op threads; its outputs, gradients and every
// statistic are the same bits at any count, and its statistics are the kernels' own on
// one thread. dw's GEMM sums over the 1024 tokens: a BLAS may split that sum among its
// threads (MKL in PyTorch's wheels does; Debian's OpenBLAS does not), and where the same
// fp32 GEMM alone changes with the count, dw is held to it only within fp32 rounding.
// The final step is sampled whatever the interval; an interval of 0 still samples nothing.
TEST(Float8Linear, TheFinalStepIsSampledToo) {
  torch::manual_seed(6);
  Float8LinearConfig cfg;
  cfg.stats_interval = 10;
  cfg.sqnr_interval = 0;
  cfg.final_step = 3;
  LinearLayer layer(64, 32);
  layer->to_float8(cfg);
  std::vector<int64_t> stats_steps, sqnr_steps;
  for (int step = 0; step < 5; ++step) {
    torch::Tensor x = torch::randn({16, 64}, torch::requires_grad());
    layer->forward(x).sum().backward();
    stats_steps.push_back(layer->probe().stats_step);
    sqnr_steps.push_back(layer->probe().sqnr_step);
  }
  EXPECT_EQ(stats_steps, (std::vector<int64_t>{0, 0, 0, 3, 3}));
  EXPECT_EQ(sqnr_steps, (std::vector<int64_t>(5, -1)));
}

TEST(Float8Linear, ThreadCountChangesNoResultOrStatistic) {
  torch::manual_seed(9);
  const int before = at::get_num_threads();
  const torch::Tensor x = torch::randn({1024, 64}), dy = torch::randn({1024, 256});
  LinearLayer layer(64, 256);
  Float8LinearConfig cfg;
  cfg.stats_interval = 1;
  layer->to_float8(cfg);
  struct Out {
    torch::Tensor y, dx, dw, db;
    Float8Probe probe;
  };
  auto step = [&](int threads) {
    at::set_num_threads(threads);
    layer->zero_grad();
    const torch::Tensor xi = x.clone().requires_grad_();
    Out o;
    o.y = layer->forward(xi);
    o.y.backward(dy);
    o.dx = xi.grad().clone();
    o.dw = layer->weight.grad().clone();
    o.db = layer->bias.grad().clone();
    o.probe = layer->probe();
    return o;
  };
  // Whether this BLAS gives dw's GEMM (256 x 1024 by 1024 x 64) the same bits at a count.
  const torch::Tensor ga = torch::randn({256, 1024}), gb = torch::randn({1024, 64});
  auto blas_same_bits = [&](int threads) {
    at::set_num_threads(1);
    const torch::Tensor r1 = at::mm(ga, gb);
    at::set_num_threads(threads);
    return same_bits(at::mm(ga, gb), r1);
  };
  const Out one = step(1);
  for (int threads : {2, 3, 8}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    const bool blas_exact = blas_same_bits(threads);
    const Out n = step(threads);
    EXPECT_TRUE(same_bits(n.y, one.y));
    EXPECT_TRUE(same_bits(n.dx, one.dx));
    if (blas_exact) {
      EXPECT_TRUE(same_bits(n.dw, one.dw));
    } else {
      EXPECT_LT((n.dw - one.dw).abs().max().item<float>(),
                1e-5f * one.dw.abs().max().item<float>());
    }
    EXPECT_TRUE(same_bits(n.db, one.db));
    for (Role r : {Role::Input, Role::Weight, Role::GradOutput}) {
      ASSERT_TRUE(n.probe.stats(r).valid);
      EXPECT_EQ(n.probe.stats(r).scale, one.probe.stats(r).scale);
      expect_identical(n.probe.stats(r).stats, one.probe.stats(r).stats);
    }
  }
  at::set_num_threads(before);
  // The kernels on one thread, called directly on the same operands.
  const auto ref = [](const torch::Tensor& t, const QuantRecipe& r) {
    const torch::Tensor c = t.contiguous();
    return quantize_current(TensorRef::of(c.data_ptr<float>(), c.size(0), c.size(1)), r, {}, {},
                            nullptr, 1)
        .result.stats;
  };
  expect_identical(one.probe.stats(Role::Input).stats, ref(x, cfg.input));
  expect_identical(one.probe.stats(Role::Weight).stats, ref(layer->weight.detach(), cfg.weight));
  expect_identical(one.probe.stats(Role::GradOutput).stats, ref(dy, cfg.grad_output));
}

// Delayed scaling on the CPU: step t quantizes with the scale of the amax history of
// steps < t (checked against quantize() with that scale, computed here from the amaxes
// directly), and the layer's history holds the amaxes newest first.
TEST(Float8LinearDelayed, StepUsesTheHistoryOfEarlierSteps) {
  torch::manual_seed(6);
  Float8LinearConfig cfg;
  cfg.delayed = true;
  cfg.delayed_scaling = {2, 0, AmaxAlgo::Max, InitialScale::One};
  Float8Linear layer(128, 64, false, cfg);
  const torch::Tensor w = layer->weight.detach();
  const float w_amax = w.abs().max().item<float>();
  std::vector<float> x_amax;
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const torch::Tensor x = torch::randn({32, 128}) * std::pow(8.0, step);
    const torch::Tensor y = layer->forward(x);
    // The scales that step should use: 1 at step 0, then fmax / max(last two amaxes).
    float xs = 1.0f, ws = 1.0f;
    if (step > 0) {
      const float h = step == 1 ? x_amax[0] : std::max(x_amax[step - 1], x_amax[step - 2]);
      xs = 448.0f / h;
      ws = 448.0f / w_amax;
    }
    auto with_scale = [](const torch::Tensor& t, float s) {
      const torch::Tensor c = t.contiguous();
      ScaleSet ss;
      ss.layout = make_layout(QuantRecipe{}, c.size(0), c.size(1));
      ss.scale = {s};
      ss.scale_inv = {1.0f / s};
      std::vector<uint8_t> codes(static_cast<size_t>(c.numel()));
      quantize(TensorRef::of(c.data_ptr<float>(), c.size(0), c.size(1)), QuantRecipe{}, ss,
               {codes.data()});
      torch::Tensor out = torch::empty(c.sizes());
      dequantize(codes.data(), QuantRecipe{}, ss, out.data_ptr<float>());
      return out.to(torch::kDouble);
    };
    const torch::Tensor want = with_scale(x, xs).matmul(with_scale(w, ws).t());
    EXPECT_LT(rel(y.detach(), want), 1e-6);
    x_amax.push_back(x.abs().max().item<float>());
    const std::vector<float> hist = layer->state().amax_history(0);
    ASSERT_EQ(hist.size(), 2u);
    EXPECT_EQ(hist[0], x_amax.back());
  }
}

TEST(Float8LinearDelayed, BadConfigurations) {
  Float8LinearConfig rowwise;
  rowwise.delayed = true;
  rowwise.weight.kind = ScalingKind::Rowwise;
  try {
    Float8Linear l(64, 32, true, rowwise);
    FAIL() << "a rowwise role under delayed scaling was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("weight"), std::string::npos) << e.what();
  }
  Float8LinearConfig window;
  window.delayed = true;
  window.delayed_scaling.window = 0;
  EXPECT_THROW(Float8Linear(64, 32, true, window), std::invalid_argument);
  Float8LinearConfig interval;
  interval.stats_interval = -1;
  EXPECT_THROW(Float8Linear(64, 32, true, interval), std::invalid_argument);
  // The free function needs a state to keep the history in.
  Float8LinearConfig d;
  d.delayed = true;
  EXPECT_THROW(float8_linear(torch::randn({4, 64}), torch::randn({32, 64}), {}, d),
               std::invalid_argument);
}

TEST(Float8Linear, HighPrecisionGemmsAreExact) {
  torch::manual_seed(1);
  Float8LinearConfig cfg;
  cfg.fprop_fp8 = cfg.dgrad_fp8 = cfg.wgrad_fp8 = false;
  Float8Linear layer(64, 32, false, cfg);
  torch::Tensor x = torch::randn({16, 64}, torch::requires_grad());
  torch::Tensor y = layer->forward(x);
  const torch::Tensor ref = torch::nn::functional::linear(x.detach(), layer->weight.detach());
  EXPECT_LT(rel(y.detach(), ref), 1e-6);
  y.sum().backward();
  EXPECT_LT(rel(x.grad(), torch::ones({16, 32}).matmul(layer->weight.detach())), 1e-6);
}

TEST(Float8Linear, Bf16InputsKeepTheirDtype) {
  Float8Linear layer(64, 32);
  const torch::Tensor y = layer->forward(torch::randn({8, 64}).to(torch::kBFloat16));
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
}

TEST(Float8Linear, BadInput) {
  Float8Linear layer(64, 32);
  EXPECT_THROW(layer->forward(torch::randn({8, 63})), std::invalid_argument);
  EXPECT_THROW(layer->forward(torch::randn({8, 64}, torch::kDouble)), std::invalid_argument);
  EXPECT_THROW(layer->forward(torch::randn({8, 64}, torch::kHalf)), std::invalid_argument);
  EXPECT_THROW(float8_linear(torch::randn({8, 64}), torch::randn({32, 64}, torch::kDouble), {}, {}),
               std::invalid_argument);
  EXPECT_THROW(float8_linear(torch::randn({8, 64}), torch::randn({64}), {}, {}),
               std::invalid_argument);
  EXPECT_THROW(Float8Linear(0, 8), std::invalid_argument);
  Float8LinearConfig bad;
  bad.grad_output.kind = ScalingKind::NVFP4;  // needs E2M1 elements
  EXPECT_THROW(Float8Linear(64, 32, true, bad), std::invalid_argument);
  // A non-contiguous input is fine.
  const torch::Tensor x = torch::randn({64, 8}).t();
  EXPECT_EQ(layer->forward(x).size(1), 32);
}

struct Mlp : torch::nn::Module {
  Mlp() {
    fc1 = register_module("fc1", LinearLayer(64, 128));
    fc2 = register_module("fc2", LinearLayer(128, 64));
    odd = register_module("odd", LinearLayer(64, 10));
    head = register_module("head", LinearLayer(10, 1));
    plain = register_module("plain", torch::nn::Linear(1, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::gelu(fc1->forward(x));
    x = fc2->forward(x);
    return head->forward(torch::tanh(odd->forward(x)));
  }
  LinearLayer fc1{nullptr}, fc2{nullptr}, odd{nullptr}, head{nullptr};
  torch::nn::Linear plain{nullptr};
};

TEST(ConvertToFloat8, ConvertsInPlaceAndGradientsFlow) {
  torch::manual_seed(2);
  auto model = std::make_shared<Mlp>();
  const torch::Tensor x = torch::randn({32, 64});
  const torch::Tensor before = model->forward(x).detach();
  const torch::Tensor w1 = model->fc1->weight;
  const ConvertReport report = convert_to_float8(*model, Float8LinearConfig::hybrid());
  EXPECT_EQ(report.converted, (std::vector<std::string>{"fc1", "fc2"}));
  EXPECT_EQ(report.skipped.size(), 2u);  // odd (64 -> 10) and head (10 -> 1) do not divide by 16
  EXPECT_EQ(report.not_convertible, (std::vector<std::string>{"plain"}));
  EXPECT_TRUE(model->fc1->is_float8() && model->fc2->is_float8() && !model->odd->is_float8());
  EXPECT_TRUE(model->fc1->weight.is_same(w1));  // the same parameters
  // The model's own forward now runs FP8: the output moves by FP8's error, not by zero.
  const torch::Tensor after = model->forward(x);
  const double moved = ((after.detach() - before).norm() / before.norm()).item<double>();
  EXPECT_GT(moved, 1e-4);
  EXPECT_LT(moved, 0.1);
  after.pow(2).mean().backward();
  EXPECT_GT(model->fc1->weight.grad().abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(model->fc2->bias.grad().defined());
  EXPECT_TRUE(model->fc1->probe().grad_output.valid);
  model->fc1->to_high_precision();
  EXPECT_FALSE(model->fc1->is_float8());

  auto other = std::make_shared<Mlp>();
  ConvertOptions opt;
  opt.skip_names = {"fc2"};
  EXPECT_EQ(convert_to_float8(*other, Float8LinearConfig::hybrid(), opt).converted.size(), 1u);
  auto filtered = std::make_shared<Mlp>();
  ConvertOptions only_wide;
  only_wide.filter = [](const std::string&, int64_t in, int64_t) { return in >= 128; };
  EXPECT_EQ(convert_to_float8(*filtered, Float8LinearConfig::hybrid(), only_wide).converted,
            (std::vector<std::string>{"fc2"}));
  auto blocks = std::make_shared<Mlp>();
  Float8LinearConfig bcfg;
  bcfg.input.kind = ScalingKind::Block1x128;
  EXPECT_TRUE(convert_to_float8(*blocks, bcfg).converted.empty());  // 64 is not a multiple of 128
}

TEST(Float8Linear, TrainingTracksFp32) {
  // A two-layer regression; FP8 (hybrid, tensorwise) and fp32 from the same start.
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({512, 64});
  const torch::Tensor target = torch::sin(x.matmul(torch::randn({64, 16})) * 0.5);
  auto run = [&](bool fp8) {
    torch::manual_seed(4);
    torch::nn::Sequential net(LinearLayer(64, 128), torch::nn::GELU(), LinearLayer(128, 16));
    if (fp8) {
      EXPECT_EQ(convert_to_float8(*net, Float8LinearConfig::hybrid()).converted.size(), 2u);
    }
    torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(3e-3));
    std::vector<double> losses;
    for (int step = 0; step < 150; ++step) {
      opt.zero_grad();
      const torch::Tensor loss = torch::mse_loss(net->forward(x), target);
      loss.backward();
      opt.step();
      losses.push_back(loss.item<double>());
    }
    return losses;
  };
  const auto f32 = run(false);
  const auto fp8 = run(true);
  EXPECT_NE(f32[5], fp8[5]);  // FP8 really ran
  EXPECT_LT(f32.back(), 0.1 * f32.front());
  EXPECT_LT(fp8.back(), 0.1 * fp8.front());  // FP8 learns
  // It tracks fp32 along the way, within 5% of the starting loss; at the end it sits on
  // FP8's noise floor, a few times the fp32 loss at this small scale.
  for (size_t step : {10, 25, 50, 100, 149}) {
    EXPECT_NEAR(fp8[step], f32[step], 0.05 * f32.front()) << "step " << step;
  }
}

// PyTorch state dicts (the zip archives torch.save and torch::pickle_save write) open as
// checkpoints: nested dicts flattened to dotted names, values bit for bit.
TEST(PtCheckpoint, StateDictsOpenLikeSafetensors) {
  const std::string path = "/tmp/fp8wb-pt-" + std::to_string(getpid()) + ".pt";
  torch::manual_seed(9);
  const torch::Tensor w = torch::randn({4, 3});
  const torch::Tensor ids = torch::arange(5);
  c10::impl::GenericDict inner(c10::StringType::get(), c10::AnyType::get());
  inner.insert("weight", w);
  c10::impl::GenericDict top(c10::StringType::get(), c10::AnyType::get());
  top.insert("fc", inner);
  top.insert("ids", ids);
  top.insert("lr", 0.5);  // not a tensor: skipped
  top.insert("half", w.to(torch::kHalf));
  {
    const std::vector<char> bytes = torch::pickle_save(top);
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto c = open_any_checkpoint(path);
  ASSERT_EQ(c->tensors().size(), 3u);
  const auto* fw = c->find("fc.weight");
  ASSERT_NE(fw, nullptr);
  EXPECT_EQ(fw->entry->shape, (std::vector<int64_t>{4, 3}));
  const std::vector<float> got = c->to_float(*fw);
  EXPECT_EQ(std::memcmp(got.data(), w.data_ptr<float>(), 12 * 4), 0);
  EXPECT_EQ(c->find("ids")->entry->dtype, StDtype::I64);
  EXPECT_EQ(c->to_float(*c->find("ids")), (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(c->find("half")->entry->dtype, StDtype::F16);
  // A truncated archive names the file.
  {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(path, std::ios::binary)
        .write(all.data(), static_cast<std::streamsize>(all.size() / 2));
  }
  try {
    open_any_checkpoint(path);
    FAIL() << "a truncated .pt was read";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace fp8wb
