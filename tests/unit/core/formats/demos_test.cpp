// The classroom demos reproduce the reference results of numerics.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fp8wb/core/formats/demos.h"

namespace fp8wb {
namespace {

TEST(OutlierDemo, PerTensorErrorGrowsWhileBlocksHold) {
  // The source chapter: per tensor 2.6% / 4.9% / 14.1% at k = 1e2 / 1e4 / 3e4, 1x128
  // blocks 2.6%. The exact figures depend on the random tensor's amax (seeds give
  // 3.9-4.5% and 10.9-13.2% at the larger factors); the shape of the result does not.
  const OutlierDemoResult r = run_outlier_demo({});
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_NEAR(r.rows[0].tensorwise_error_pct, 2.6, 0.3);
  EXPECT_NEAR(r.rows[1].tensorwise_error_pct, 4.6, 0.8);
  EXPECT_NEAR(r.rows[2].tensorwise_error_pct, 13.0, 2.5);
  for (const auto& row : r.rows) EXPECT_NEAR(row.block_error_pct, 2.6, 0.3) << row.factor;
  EXPECT_LT(r.rows[0].tensorwise_underflow_pct, r.rows[2].tensorwise_underflow_pct);
  EXPECT_GT(r.rows[2].tensorwise.raw.underflow, r.rows[2].block.raw.underflow);
}

TEST(OutlierDemo, E5M2HasRangeButLessPrecision) {
  OutlierDemoConfig c;
  c.format = Format::E5M2;
  c.factors = {1e2};
  const auto r = run_outlier_demo(c);
  EXPECT_GT(r.rows[0].block_error_pct, 4.0);  // two mantissa bits: about twice E4M3's error
}

TEST(OutlierDemo, BadConfig) {
  OutlierDemoConfig c;
  c.cols = 1000;
  EXPECT_THROW(run_outlier_demo(c), std::invalid_argument);
  c = {};
  c.factors = {-1};
  EXPECT_THROW(run_outlier_demo(c), std::invalid_argument);
  c = {};
  c.outlier_channels = 200;
  EXPECT_THROW(run_outlier_demo(c), std::invalid_argument);
}

TEST(GradientDemo, E4M3UnderflowsWhereE5M2DoesNot) {
  const GradientDemoResult r = run_gradient_demo({});
  ASSERT_EQ(r.cases.size(), 4u);
  const auto& e4_plain = r.cases[0];
  const auto& e4_scaled = r.cases[1];
  const auto& e5_plain = r.cases[2];
  const auto& e5_scaled = r.cases[3];
  // Unscaled, E4M3 keeps nothing below 2^-10 ~ 9.8e-4: log10(0.1 / 9.8e-4) of 7 decades
  // survive, so about 71% underflow.
  EXPECT_NEAR(e4_plain.stats.underflow_pct(),
              100.0 * (1 - std::log10(0.1 / std::ldexp(1.0, -10)) / 7), 0.5);
  // Scaled to amax = 448, E4M3 keeps down to 2^-10 / scale: ~19% still underflow.
  EXPECT_NEAR(e4_scaled.stats.underflow_pct(), 19.1, 0.6);
  EXPECT_NEAR(e5_plain.stats.underflow_pct(),
              100.0 * (1 - std::log10(0.1 / std::ldexp(1.0, -17)) / 7), 0.5);
  EXPECT_EQ(e5_scaled.stats.raw.underflow, 0u);
  EXPECT_GT(e4_scaled.stats.sqnr_db(),
            e5_scaled.stats.sqnr_db());  // E4M3: more precision where it fits
  // A loss scale of 2^10 moves gradients into E4M3's range.
  GradientDemoConfig c;
  c.gradient_scale = 1024;
  const auto scaled = run_gradient_demo(c);
  EXPECT_LT(scaled.cases[0].stats.underflow_pct(), e4_plain.stats.underflow_pct() - 30);
}

TEST(GradientDemo, BadConfig) {
  GradientDemoConfig c;
  c.gradient_scale = 0;
  EXPECT_THROW(run_gradient_demo(c), std::invalid_argument);
  c = {};
  c.lo = 1;
  c.hi = 0.5;
  EXPECT_THROW(run_gradient_demo(c), std::invalid_argument);
  c = {};
  c.n = 0;
  EXPECT_THROW(run_gradient_demo(c), std::invalid_argument);
}

}  // namespace
}  // namespace fp8wb

// Master weights, loss scaling, and the bf16/fp16 rounding they use, against references
// computed here: the host's own fp32 and _Float16 arithmetic, and rounding in double to
// a grid by nearbyint (ties to even).
namespace fp8wb {
namespace {

// x rounded to nearest even on the grid of a float format with `mbits` mantissa bits and
// smallest normal exponent `emin` (no overflow handling: the callers stay in range).
double grid_round(double x, int mbits, int emin) {
  if (x == 0) return x;
  const int e = std::max(std::ilogb(std::fabs(x)), emin);
  const double q = std::ldexp(1.0, e - mbits);
  return std::nearbyint(x / q) * q;  // the default rounding mode: to nearest, ties to even
}

std::vector<double> reference_trajectory(int mbits, int emin, int steps, float update) {
  std::vector<double> w = {1.0};
  for (int k = 0; k < steps; ++k) {
    // The add in fp32, then the store in the format, as the demo defines it.
    const float sum = static_cast<float>(w.back()) + update;
    w.push_back(grid_round(sum, mbits, emin));
  }
  return w;
}

std::string four(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

const MasterWeightsTrack& track(const MasterWeightsResult& r, StorageFormat f,
                                Rounding rounding = Rounding::NearestEven) {
  for (const auto& t : r.tracks) {
    if (t.format == f && t.rounding == rounding) return t;
  }
  throw std::runtime_error("no such track");
}

TEST(MasterWeights, Bf16LosesTheUpdateFp32KeepsItFp16RoundsIt) {
  const MasterWeightsResult r = run_master_weights_demo({});
  ASSERT_EQ(r.tracks.size(), 6u);
  // fp32 master weights: the host's own fp32 adds.
  float w32 = 1.0f;
  for (int k = 0; k < 1000; ++k) w32 += 1e-3f;
  EXPECT_EQ(track(r, StorageFormat::FP32).final_mean, static_cast<double>(w32));
  EXPECT_EQ(four(track(r, StorageFormat::FP32).final_mean), "2.0000");
  // bf16: spacing 2^-7 near 1; 1e-3 is below half of it.
  EXPECT_EQ(track(r, StorageFormat::BF16).mean, reference_trajectory(7, -126, 1000, 1e-3f));
  EXPECT_EQ(four(track(r, StorageFormat::BF16).final_mean), "1.0000");
  EXPECT_EQ(track(r, StorageFormat::BF16).spacing_at_start, std::ldexp(1.0, -7));
  // fp16: spacing 2^-10; 1e-3 is above half of it, so every add moves by exactly 2^-10.
  const auto& fp16 = track(r, StorageFormat::FP16);
  EXPECT_EQ(fp16.mean, reference_trajectory(10, -14, 1000, 1e-3f));
  EXPECT_EQ(fp16.final_mean, 1.0 + 1000 * std::ldexp(1.0, -10));
  EXPECT_EQ(four(fp16.final_mean), "1.9766");
#ifdef __FLT16_MAX__
  _Float16 h = 1;
  for (int k = 0; k < 1000; ++k) h = static_cast<_Float16>(static_cast<float>(h) + 1e-3f);
  EXPECT_EQ(fp16.final_mean, static_cast<double>(static_cast<float>(h)));
#endif
  // E4M3 and E5M2: spacing 2^-3 and 2^-2 near 1; 1e-3 is far below half, the weight stays.
  for (const auto& [f, spacing] :
       {std::pair{StorageFormat::E4M3, -3}, std::pair{StorageFormat::E5M2, -2}}) {
    const auto& t = track(r, f);
    EXPECT_EQ(t.spacing_at_start, std::ldexp(1.0, spacing));
    EXPECT_EQ(t.mean, std::vector<double>(1001, 1.0)) << storage_format_name(f);
    EXPECT_EQ(four(t.final_mean), "1.0000");
  }
}

TEST(MasterWeights, StochasticRoundingIsRightOnAverage) {
  const MasterWeightsResult r = run_master_weights_demo({});
  const auto& sr = track(r, StorageFormat::BF16, Rounding::Stochastic);
  // Each add moves by 2^-7 (2^-6 above 2) with probability update / spacing: unbiased, the
  // spread sqrt(steps * p (1 - p)) spacings, about 0.08; the mean of 32 seeds within 0.05.
  EXPECT_NEAR(sr.final_mean, 2.0, 0.05);
  EXPECT_GT(sr.final_std, 0.02);
  EXPECT_LT(sr.final_std, 0.2);
  EXPECT_LE(sr.low.back(), sr.final_mean);
  EXPECT_GE(sr.high.back(), sr.final_mean);
  // Every value of every run lies on the bf16 grid; a fixed seed gives the same runs.
  for (double v : sr.low) EXPECT_EQ(v, grid_round(v, 7, -126));
  const auto again = run_master_weights_demo({});
  EXPECT_EQ(track(again, StorageFormat::BF16, Rounding::Stochastic).mean, sr.mean);
}

TEST(MasterWeights, BadConfig) {
  MasterWeightsConfig c;
  c.steps = 0;
  EXPECT_THROW(run_master_weights_demo(c), std::invalid_argument);
  c = {};
  c.update = 0;
  EXPECT_THROW(run_master_weights_demo(c), std::invalid_argument);
  c = {};
  c.seeds = 0;
  EXPECT_THROW(run_master_weights_demo(c), std::invalid_argument);
}

TEST(WideRounding, Bf16AndFp16MatchAReferenceRounding) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    if (i % 4 == 1) u = (u & 0x807FFFFFu) | ((100u + (u % 40u)) << 23);  // fp16's range
    if (i % 4 == 2) u = (u & 0x80FFFFFFu) | 0x33000000u;                 // around fp16's subnormals
    if (i % 8 == 3) u &= 0xFFFF8000u;                                    // ties for bf16 (and fp16)
    const float x = bits_float(u);
    if (!std::isfinite(x)) continue;
    const double ref_bf16 = grid_round(x, 7, -126);
    if (std::fabs(ref_bf16) <= 0x1.FEp127) {
      ASSERT_EQ(static_cast<double>(round_to(StorageFormat::BF16, x)), ref_bf16) << x;
    }
    const double ref_fp16 = grid_round(x, 10, -14);
    const float got = round_to(StorageFormat::FP16, x);
    if (std::fabs(ref_fp16) <= 65504) {
      ASSERT_EQ(static_cast<double>(got), ref_fp16) << x;
    } else {
      ASSERT_TRUE(std::isinf(got)) << x;
    }
#ifdef __FLT16_MAX__
    ASSERT_EQ(got, static_cast<float>(static_cast<_Float16>(x))) << x;
#endif
    ++checked;
  }
  EXPECT_GT(checked, 150000);
  EXPECT_TRUE(std::isinf(round_to(StorageFormat::FP16, 65520.0f)));  // the tie above 65504
  EXPECT_EQ(round_to(StorageFormat::FP16, 65519.0f), 65504.0f);
  EXPECT_EQ(round_to(StorageFormat::FP16, std::ldexp(1.0f, -25)), 0.0f);  // tie to even 0
  EXPECT_EQ(round_to(StorageFormat::FP16, std::ldexp(1.5f, -25)), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::signbit(round_to(StorageFormat::FP16, -1e-30f)));
  EXPECT_TRUE(std::isnan(round_to(StorageFormat::BF16, NAN)));
}

TEST(DynamicLossScaler, SkipsAndHalvesOnOverflowGrowsAfterNGoodSteps) {
  // Written out by hand: start at 8, grow after 3 good steps in a row.
  DynamicLossScaler s(8, 3);
  const bool overflow[] = {false, false, false, true, false, true, false, false, false, false};
  const double scale_after[] = {8, 8, 16, 8, 8, 4, 4, 4, 8, 8};
  const bool taken[] = {true, true, true, false, true, false, true, true, true, true};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(s.update(overflow[i]), taken[i]) << "step " << i;
    EXPECT_EQ(s.scale(), scale_after[i]) << "step " << i;
  }
  EXPECT_EQ(s.goodSteps(), 1);
  EXPECT_THROW(DynamicLossScaler(0, 3), std::invalid_argument);
  EXPECT_THROW(DynamicLossScaler(8, 0), std::invalid_argument);
}

// The scale a run used, step by step, follows GradScaler's rules from its skipped steps.
void expect_scaler_rules(const LossScalingRun& run, double init, int interval) {
  double scale = init;
  int good = 0;
  for (size_t i = 0; i < run.steps.size(); ++i) {
    ASSERT_EQ(run.steps[i].scale, scale) << "step " << i;
    if (run.steps[i].skipped) {
      scale /= 2;
      good = 0;
    } else if (++good == interval) {
      scale *= 2;
      good = 0;
    }
  }
}

TEST(LossScalingDemo, ScalingKeepsGradientsThatTheCastFlushes) {
  const LossScalingResult r = run_loss_scaling_demo({});
  ASSERT_EQ(r.runs.size(), 4u);
  for (size_t i = 0; i < 4; i += 2) {
    const LossScalingRun& plain = r.runs[i];
    const LossScalingRun& scaled = r.runs[i + 1];
    ASSERT_FALSE(plain.scaled);
    ASSERT_TRUE(scaled.scaled);
    EXPECT_EQ(plain.steps.size(), 1000u);
    EXPECT_GT(plain.mean_underflow_pct, 10.0) << storage_format_name(plain.format);
    EXPECT_LT(scaled.mean_underflow_pct, 0.1 * plain.mean_underflow_pct)
        << storage_format_name(plain.format);
    for (const auto& st : plain.steps) ASSERT_EQ(st.scale, 1.0);
    EXPECT_EQ(plain.skipped_steps, 0);
    EXPECT_GT(scaled.skipped_steps, 0);  // the scale grows until it overflows
    expect_scaler_rules(scaled, 65536, 50);
  }
  // E5M2 keeps fewer small gradients than fp16 (its smallest subnormal is 2^-16, not 2^-24).
  EXPECT_GT(r.runs[2].mean_underflow_pct, r.runs[0].mean_underflow_pct);
}

// Flushed gradients cost the fit: without scaling, E5M2 keeps almost none of the small
// gradients late in training and stops far above the loss that the scaled run reaches,
// which matches fp32 training (the loss of the same model with fp16 gradients, scaled,
// where nothing flushes).
TEST(LossScalingDemo, FlushedGradientsStopTheFitEarly) {
  const LossScalingResult r = run_loss_scaling_demo({});
  ASSERT_EQ(r.runs.size(), 4u);
  const LossScalingRun& fp16_scaled = r.runs[1];
  const LossScalingRun& e5m2_plain = r.runs[2];
  const LossScalingRun& e5m2_scaled = r.runs[3];
  ASSERT_EQ(e5m2_plain.format, StorageFormat::E5M2);
  ASSERT_FALSE(e5m2_plain.scaled);
  ASSERT_TRUE(e5m2_scaled.scaled);
  EXPECT_GE(e5m2_plain.final_loss, 10 * e5m2_scaled.final_loss);
  EXPECT_LT(e5m2_scaled.final_loss, 2 * fp16_scaled.final_loss);
  // Every run learns: the loss falls well below where it started.
  for (const LossScalingRun& run : r.runs)
    EXPECT_LT(run.final_loss, 0.01 * run.steps.front().loss) << storage_format_name(run.format);
}

TEST(LossScalingDemo, TooLargeAScaleOverflowsAndHalvesAtOnce) {
  LossScalingConfig c;
  c.init_scale = std::ldexp(1.0, 40);
  c.growth_interval = 7;
  c.steps = 200;
  const LossScalingResult r = run_loss_scaling_demo(c);
  for (size_t i = 1; i < r.runs.size(); i += 2) {
    const LossScalingRun& run = r.runs[i];
    EXPECT_TRUE(run.steps[0].skipped);  // gradients of order 1e-3 times 2^40 overflow
    expect_scaler_rules(run, c.init_scale, 7);
    EXPECT_LT(run.steps.back().scale, c.init_scale);
  }
}

}  // namespace
}  // namespace fp8wb
