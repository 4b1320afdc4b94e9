// The classroom demos reproduce the reference results of numerics.md.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "fp8wb/core/demos.h"

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
