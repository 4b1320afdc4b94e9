// DelayedScaler against an independent replay of Transformer Engine's DelayedScaling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "fp8wb/kernels/delayed_scaling.h"
#include "fp8wb/kernels/recipe.h"

namespace fp8wb {
namespace {

// A recorded-like amax trace: a drifting log-normal walk, a 1000x spike, steps with no
// signal (amax 0), and a slow decay.
std::vector<float> amax_trace() {
  std::vector<float> t;
  std::mt19937 rng(17);
  std::normal_distribution<double> step(0.0, 0.15);
  double log_a = std::log(3.0);
  for (int i = 0; i < 1500; ++i) {
    log_a += step(rng);
    float a = static_cast<float>(std::exp(log_a));
    if (i == 50) a *= 1000.0f;
    if (i >= 80 && i <= 82) a = 0.0f;
    if (i > 1200) a = static_cast<float>(std::exp(log_a) * std::exp(-(i - 1200) / 40.0));
    t.push_back(a);
  }
  return t;
}

// TE semantics written out plainly: the scale of step t uses amaxes t-window..t-1.
std::vector<float> reference_scales(const std::vector<float>& trace, int window, AmaxAlgo algo,
                                    int margin, bool bootstrap, float fmax) {
  std::vector<float> out;
  float scale = 1.0f;
  for (size_t t = 0; t < trace.size(); ++t) {
    if (t == 0 && bootstrap) {
      out.push_back(static_cast<float>(
          std::ldexp(static_cast<float>(fmax / static_cast<double>(trace[0])), -margin)));
    } else {
      out.push_back(scale);
    }
    // After step t: amax_t enters; the next step's scale comes from the last `window`.
    float amax_h = 0;
    if (algo == AmaxAlgo::MostRecent) {
      amax_h = trace[t];
    } else {
      const size_t lo =
          t + 1 >= static_cast<size_t>(window) ? t + 1 - static_cast<size_t>(window) : 0;
      for (size_t k = lo; k <= t; ++k) amax_h = std::max(amax_h, trace[k]);
    }
    if (amax_h > 0 && std::isfinite(amax_h)) {
      float s = fmax / amax_h;
      s = std::ldexp(s, -margin);
      scale = std::isinf(s) ? FLT_MAX : s;
    }
  }
  return out;
}

struct Case {
  int window;
  AmaxAlgo algo;
  int margin;
  bool bootstrap;
};

class DelayedTrace : public ::testing::TestWithParam<Case> {};

TEST_P(DelayedTrace, EveryStepMatchesTheReplay) {
  const Case c = GetParam();
  const auto trace = amax_trace();
  DelayedScaler scaler(Format::E4M3FN,
                       {c.window, c.margin, c.algo,
                        c.bootstrap ? InitialScale::BootstrapCurrent : InitialScale::One});
  const auto want = reference_scales(trace, c.window, c.algo, c.margin, c.bootstrap, 448.0f);
  for (size_t t = 0; t < trace.size(); ++t) {
    ASSERT_EQ(scaler.scale_for_step(trace[t]), want[t]) << "step " << t;
    scaler.update(trace[t]);
  }
  EXPECT_EQ(scaler.steps(), static_cast<int64_t>(trace.size()));
  const auto h = scaler.history();
  ASSERT_EQ(h.size(), static_cast<size_t>(c.window));
  EXPECT_EQ(h[0], trace.back());  // newest first
  if (c.window > 1) {
    EXPECT_EQ(h[1], trace[trace.size() - 2]);
  }
}

INSTANTIATE_TEST_SUITE_P(
    WindowsAndAlgos, DelayedTrace,
    ::testing::Values(Case{1, AmaxAlgo::Max, 0, false}, Case{16, AmaxAlgo::Max, 0, false},
                      Case{1024, AmaxAlgo::Max, 0, false}, Case{1, AmaxAlgo::MostRecent, 0, false},
                      Case{16, AmaxAlgo::MostRecent, 0, false},
                      Case{1024, AmaxAlgo::MostRecent, 0, false}, Case{16, AmaxAlgo::Max, 2, false},
                      Case{1024, AmaxAlgo::Max, 1, true}, Case{16, AmaxAlgo::MostRecent, 3, true}));

TEST(DelayedScaler, HandWorkedSteps) {
  DelayedScaler s(Format::E4M3FN, {16, 0, AmaxAlgo::Max, InitialScale::One});
  EXPECT_EQ(s.scale(), 1.0f);  // TE starts at 1
  s.update(4.0f);              // step 0 saw amax 4
  EXPECT_EQ(s.scale(), 112.0f);
  s.update(2.0f);  // max over {4, 2} is still 4
  EXPECT_EQ(s.scale(), 112.0f);
  s.update(0.0f);  // amax 0 enters; the max is still 4
  EXPECT_EQ(s.scale(), 112.0f);
  s.update(8.0f);
  EXPECT_EQ(s.scale(), 56.0f);
  EXPECT_EQ(s.history_amax(), 8.0f);

  DelayedScaler recent(Format::E5M2, {1024, 1, AmaxAlgo::MostRecent, InitialScale::One});
  recent.update(7.0f);
  EXPECT_EQ(recent.scale(), 4096.0f);  // (57344 / 7) / 2
  recent.update(0.0f);                 // nothing seen: keep the previous scale
  EXPECT_EQ(recent.scale(), 4096.0f);

  DelayedScaler tiny(Format::E4M3FN, {1, 0, AmaxAlgo::Max, InitialScale::One});
  tiny.update(1e-44f);  // the scale overflows fp32: FLT_MAX
  EXPECT_EQ(tiny.scale(), FLT_MAX);
}

TEST(DelayedScaler, WindowOneForgetsAtOnce) {
  DelayedScaler s(Format::E4M3FN, {1, 0, AmaxAlgo::Max, InitialScale::One});
  s.update(448.0f);
  EXPECT_EQ(s.scale(), 1.0f);
  s.update(4.48f);
  EXPECT_EQ(s.scale(), 100.0f);
}

TEST(DelayedScaler, BadConfigurations) {
  EXPECT_THROW(DelayedScaler(Format::E4M3FN, {0, 0, AmaxAlgo::Max, InitialScale::One}),
               std::invalid_argument);
  EXPECT_THROW(DelayedScaler(Format::E4M3FN, {-3, 0, AmaxAlgo::Max, InitialScale::One}),
               std::invalid_argument);
  EXPECT_THROW(DelayedScaler(Format::E4M3FN, {16, 65, AmaxAlgo::Max, InitialScale::One}),
               std::invalid_argument);
  try {
    validate_delayed_config({0, 0, AmaxAlgo::Max, InitialScale::One});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("window 0"), std::string::npos);
  }
}

// The kernels' vocabularies: one name per value, in the enum's order (name_table.h), the
// names configs, statistics and inspect write.
TEST(KernelNames, TablesNameEveryValue) {
  EXPECT_EQ(table_names(kAmaxAlgos), "max, most_recent");
  EXPECT_EQ(amax_algo_name(AmaxAlgo::MostRecent), "most_recent");
  EXPECT_EQ(parse_table_name(kAmaxAlgos, "max"), AmaxAlgo::Max);
  EXPECT_FALSE(parse_table_name(kAmaxAlgos, "mean").has_value());
  EXPECT_EQ(table_names(kScalingKinds), "tensorwise, rowwise, 1x128, 128x128, mx, nvfp4");
  for (const ScalingKindEntry& e : kScalingKinds) {
    EXPECT_EQ(scaling_kind_name(e.value), e.name);
    EXPECT_EQ(parse_scaling_kind(e.name), e.value);
  }
  EXPECT_EQ(table_names(kMxRoundings), "floor, rceil");
  QuantRecipe mx;
  mx.kind = ScalingKind::MX;
  mx.mx_rounding = MxRounding::RCeil;
  EXPECT_EQ(recipe_name(mx), "E4M3FN mx rceil");
  for (const FormatNameEntry& e : kFormatNames) {
    EXPECT_EQ(format_info(e.value).name, e.name);
    EXPECT_EQ(format_info(e.value).ml_dtypes, e.ml_dtypes);
    EXPECT_EQ(parse_format(e.name), e.value);
  }
  EXPECT_EQ(format_names(), table_names(kFormatNames));
}

}  // namespace
}  // namespace fp8wb
