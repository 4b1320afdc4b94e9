// The replay of delayed scaling (replay.h): step for step the kernels' DelayedScaler (the
// engine's host scaler), the saturation threshold from the formats' rounding, a hand-made
// history whose ranking is worked out by hand, the histogram estimates, and bad grids.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>

#include "fp8wb/core/replay/replay.h"
#include "fp8wb/kernels/recipe.h"

namespace fp8wb {
namespace {

uint32_t bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u;
}

ReplayInput one_tensor(const std::vector<float>& amax, Format f = Format::E4M3FN) {
  ReplayInput in;
  in.tensors.push_back({"fc1", Role::Input, f});
  for (size_t i = 0; i < amax.size(); ++i) in.steps.push_back(static_cast<int64_t>(i));
  in.amax = amax;
  return in;
}

// A trace with drift, a 1000x spike, steps with amax 0, a decay, and steps where the
// tensor was not quantized (NaN: its history does not move).
std::vector<float> trace(size_t n) {
  std::mt19937 rng(7);
  std::lognormal_distribution<float> noise(0.0f, 0.3f);
  std::vector<float> a(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = 0.5f * std::exp(0.002f * static_cast<float>(i)) * noise(rng);
    if (i == 300) a[i] *= 1000.0f;
    if (i >= 500 && i < 510) a[i] = 0.0f;
    if (i > 900) a[i] *= std::exp(-0.01f * static_cast<float>(i - 900));
    if (i % 97 == 13) a[i] = std::nanf("");
  }
  return a;
}

TEST(Replay, ScalesAreTheDelayedScalersStepForStep) {
  const std::vector<float> a = trace(1500);
  const ReplayInput in = one_tensor(a, Format::E5M2);
  for (int window : {1, 3, 16, 1024}) {
    for (AmaxAlgo algo : {AmaxAlgo::Max, AmaxAlgo::MostRecent}) {
      for (int margin : {-2, 0, 3}) {
        for (InitialScale init : {InitialScale::One, InitialScale::BootstrapCurrent}) {
          const std::vector<float> got = replay_scales(in, 0, {margin, window, algo}, init);
          DelayedScaler ref(Format::E5M2, {window, margin, algo, init});
          for (size_t i = 0; i < a.size(); ++i) {
            if (std::isnan(a[i])) {
              EXPECT_TRUE(std::isnan(got[i]));
              continue;
            }
            ASSERT_EQ(bits(got[i]), bits(ref.scale_for_step(a[i])))
                << "window " << window << " margin " << margin << " step " << i;
            ref.update(a[i]);
          }
        }
      }
    }
  }
}

TEST(Replay, CurrentScalingIsTheStepsOwnScale) {
  const std::vector<float> a = trace(200);
  const ReplayInput in = one_tensor(a);
  RunScalingSettings run;
  run.delayed = false;
  run.config.margin = 1;
  const std::vector<float> s = run_scales(in, 0, run);
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) continue;
    EXPECT_EQ(bits(s[i]), bits(scale_for_amax(a[i], 448.0, 1))) << i;
  }
}

TEST(Replay, SaturationThresholdIsWhereRoundingPassesTheMax) {
  // E4M3FN: 448 = 1.110b x 2^8; halfway to the next step (480, which is NaN) is 464, a tie
  // that goes to 448's even mantissa: only values above 464 overflow.
  EXPECT_EQ(saturation_threshold(Format::E4M3FN), std::nextafter(464.0f, INFINITY));
  // E5M2: above 57344 = 1.11b x 2^15 comes 2^16 (inf); 57344's mantissa is odd, so the
  // tie at 61440 rounds up to 2^16 and overflows.
  EXPECT_EQ(saturation_threshold(Format::E5M2), 61440.0f);
}

// amax 1 at every step but step 100 (4), 300 steps, E4M3 (max 448), windows 1 and 200,
// margins 0-2, max. Worked by hand: step 100 is quantized with 448/2^m and saturates for
// m = 0 (1792) and m = 1 (896), not m = 2 (448). Median headroom (binades):
//   m=2 w=1: 2 (p = 112 but at steps 0, 100, 101)     m=2 w=200: 4 (28 after the spike)
//   m=0 w=1: 0; m=1 w=1: 1; m=0 w=200: 2; m=1 w=200: 3 (each with 1 saturating step).
TEST(Replay, RankingFollowsItsRuleOnAHandMadeHistory) {
  std::vector<float> a(300, 1.0f);
  a[100] = 4.0f;
  const ReplayInput in = one_tensor(a);
  ReplayGrid g;
  g.margins = {0, 1, 2};
  g.windows = {1, 200};
  g.algos = {AmaxAlgo::Max};
  ReplayOptions opt;
  opt.run.config = {200, 2, AmaxAlgo::Max, InitialScale::One};
  const ReplayResult r = replay_amax(in, g, opt);
  ASSERT_EQ(r.cells.size(), 6u);
  const auto cell = [&](int m, int w) -> const ReplayCell& {
    for (const ReplayCell& c : r.cells)
      if (c.setting.margin == m && c.setting.window == w) return c;
    throw std::runtime_error("no cell");
  };
  EXPECT_EQ(cell(2, 1).all.saturating_steps, 0);
  EXPECT_EQ(cell(2, 200).all.saturating_steps, 0);
  EXPECT_EQ(cell(0, 1).all.saturating_steps, 1);
  EXPECT_EQ(cell(1, 200).all.saturating_steps, 1);
  EXPECT_DOUBLE_EQ(cell(0, 1).all.worst_over_binades, 2.0);  // 1792 = 4 x 448
  EXPECT_DOUBLE_EQ(cell(1, 1).all.worst_over_binades, 1.0);
  EXPECT_DOUBLE_EQ(cell(2, 1).all.median_headroom_binades, 2.0);
  EXPECT_DOUBLE_EQ(cell(2, 200).all.median_headroom_binades, 4.0);
  EXPECT_DOUBLE_EQ(cell(0, 1).all.median_headroom_binades, 0.0);
  EXPECT_DOUBLE_EQ(cell(1, 200).all.median_headroom_binades, 3.0);
  const std::vector<std::pair<int, int>> expected = {{2, 1}, {2, 200}, {0, 1},
                                                     {1, 1}, {0, 200}, {1, 200}};
  ASSERT_EQ(r.ranking.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const ReplayCell& c = r.cells[r.ranking[i]];
    EXPECT_EQ(c.setting.margin, expected[i].first) << "rank " << i + 1;
    EXPECT_EQ(c.setting.window, expected[i].second) << "rank " << i + 1;
    EXPECT_EQ(c.rank, static_cast<int>(i + 1));
  }
  EXPECT_TRUE(cell(2, 200).is_run_setting);
  EXPECT_FALSE(cell(2, 1).is_run_setting);
}

// The same history with margin 3 in the grid. Margin 2 took the spike at step 100 with no
// headroom left (4 x 448/4 = 448, the max itself): one amax a little larger and it saturates,
// so a setting that kept room at its closest approach comes first, though it uses less of
// the range. Closest approaches (binades): m=3: 1 (4 x 56 = 224), m=2: 0, m=1: -1, m=0: -2.
TEST(Replay, ACellWithoutRoomAtItsClosestApproachIsNotCalledBest) {
  std::vector<float> a(300, 1.0f);
  a[100] = 4.0f;
  const ReplayInput in = one_tensor(a);
  ReplayGrid g;
  g.margins = {0, 1, 2, 3};
  g.windows = {1, 200};
  g.algos = {AmaxAlgo::Max};
  ReplayOptions opt;
  opt.run.config = {200, 2, AmaxAlgo::Max, InitialScale::One};
  const ReplayResult r = replay_amax(in, g, opt);
  ASSERT_EQ(r.cells.size(), 8u);
  for (const ReplayCell& c : r.cells) {
    SCOPED_TRACE("margin " + std::to_string(c.setting.margin) + " window " +
                 std::to_string(c.setting.window));
    EXPECT_DOUBLE_EQ(c.all.min_headroom_binades, c.setting.margin - 2.0);
  }
  // Safe (m=3) by median headroom (3 at w=1, 5 at w=200); then m=2 (no saturation, no
  // room) by median; then the saturating cells, one saturating step each, by median.
  const std::vector<std::pair<int, int>> expected = {{3, 1}, {3, 200}, {2, 1},   {2, 200},
                                                     {0, 1}, {1, 1},   {0, 200}, {1, 200}};
  ASSERT_EQ(r.ranking.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const ReplayCell& c = r.cells[r.ranking[i]];
    EXPECT_EQ(c.setting.margin, expected[i].first) << "rank " << i + 1;
    EXPECT_EQ(c.setting.window, expected[i].second) << "rank " << i + 1;
  }
}

// A best at an edge of the grid is said only where going beyond it could change the
// answer under the rule (issue #52: a safe best at the largest margin was told to "try
// beyond it", where a larger margin only adds headroom and so ranks lower).
TEST(Replay, ABestAtTheGridsEdgeIsSaidOnlyWhereBeyondCouldRankBetter) {
  std::vector<float> a(300, 1.0f);
  a[100] = 4.0f;
  const ReplayInput in = one_tensor(a);
  ReplayGrid g;
  g.margins = {0, 1, 2, 3};
  g.windows = {1, 200};
  g.algos = {AmaxAlgo::Max};
  ReplayOptions opt;
  opt.run.config = {200, 2, AmaxAlgo::Max, InitialScale::One};
  ReplayResult r = replay_amax(in, g, opt);
  const ReplayCell* best = &r.cells[r.ranking.front()];
  // Margin 3 is safe (1 binade at the spike) with the least median headroom of the safe
  // cells: margin 4 would have more and rank lower; no window below 1. Nothing to say.
  ASSERT_EQ(best->setting.margin, 3);
  ASSERT_EQ(best->setting.window, 1);
  ASSERT_EQ(best->all.saturating_steps, 0);
  ASSERT_GE(best->all.min_headroom_binades, ReplayResult::kSafeHeadroomBinades);
  ReplayGridEdge e = replay_grid_edge(g, best->setting, best->all);
  EXPECT_FALSE(e.any()) << e.text(best->setting);
  EXPECT_EQ(e.text(best->setting), "");

  // Margins 0-2: no cell is safe (margin 2 meets the spike with no room); the best, the
  // most room at the closest approach, is at the largest margin: a larger one could be safe.
  g.margins = {0, 1, 2};
  r = replay_amax(in, g, opt);
  best = &r.cells[r.ranking.front()];
  ASSERT_EQ(best->setting.margin, 2);
  ASSERT_LT(best->all.min_headroom_binades, ReplayResult::kSafeHeadroomBinades);
  e = replay_grid_edge(g, best->setting, best->all);
  EXPECT_EQ(e.names(), std::vector<std::string>{"margin_max"});
  EXPECT_EQ(e.text(best->setting),
            "at the edge of the grid (margin 2, the largest given): try beyond it");

  // Margins 3-4: the safe best at the smallest margin given: a smaller one may be safe
  // with less headroom, so it is worth trying.
  g.margins = {3, 4};
  r = replay_amax(in, g, opt);
  best = &r.cells[r.ranking.front()];
  ASSERT_EQ(best->setting.margin, 3);
  e = replay_grid_edge(g, best->setting, best->all);
  EXPECT_EQ(e.names(), std::vector<std::string>{"margin_min"});

  // By hand: a safe best at the largest window has nothing beyond; one that is not safe
  // does (a longer history of the largest amax adds room), but not for the most recent
  // amax, which keeps no history.
  ReplayGrid h;
  h.margins = {0, 1};
  h.windows = {1, 16, 128};
  ReplayFigures safe, unsafe;
  safe.min_headroom_binades = 1;
  unsafe.min_headroom_binades = 0.2;
  EXPECT_FALSE(replay_grid_edge(h, {0, 128, AmaxAlgo::Max}, safe).window_high);
  EXPECT_TRUE(replay_grid_edge(h, {0, 128, AmaxAlgo::Max}, safe).margin_low);
  EXPECT_EQ(replay_grid_edge(h, {1, 128, AmaxAlgo::Max}, unsafe).names(),
            (std::vector<std::string>{"margin_max", "window_max"}));
  EXPECT_EQ(replay_grid_edge(h, {1, 128, AmaxAlgo::MostRecent}, unsafe).names(),
            std::vector<std::string>{"margin_max"});
  EXPECT_FALSE(replay_grid_edge(h, {1, 1, AmaxAlgo::Max}, safe).any());
  // An axis of one value has no edge to go beyond.
  h.margins = {1};
  EXPECT_FALSE(replay_grid_edge(h, {1, 16, AmaxAlgo::Max}, unsafe).any());
}

// One sample: 100 elements in each of bins 0 and 5 (|x s| in [1, 2) and [32, 64)) at
// stored scale 2^-3, amax 448 every step (so |x s| <= 56: bin 5 spans [32, 56]), window 1.
// Margin 14: replayed scale 2^-14, a shift of -11 binades: bin 0 lands in [2^-11, 2^-10),
// all below half E4M3's smallest subnormal (2^-10): 50% underflow. Margin 0: scale 1,
// amax x scale = 448 fits: none saturates. Margin -1: scale 2, bin 5 lands in [2^9, 896],
// all past the threshold (just above 464): 50% saturated. Margin -2 with the sample at
// stored scale 2^-2: bin 5 (|x s| in [32, 112]) lands in [128, 448]: none.
TEST(Replay, EstimatesShiftTheStoredHistogram) {
  const ReplayInput in = one_tensor(std::vector<float>(10, 448.0f));
  ReplayOptions opt;
  ReplaySample s;
  s.step = 5;
  s.scale = 0.125f;
  s.hist[0 - kHistMinExp] = 100;
  s.hist[5 - kHistMinExp] = 100;
  opt.samples.push_back(s);
  ReplayGrid g;
  g.margins = {14, 0, -1};
  g.windows = {1};
  g.algos = {AmaxAlgo::Max};
  const ReplayResult r = replay_amax(in, g, opt);
  EXPECT_DOUBLE_EQ(r.cells[0].all.est_underflow_pct, 50.0);
  EXPECT_DOUBLE_EQ(r.cells[0].all.est_saturated_pct, 0.0);
  EXPECT_DOUBLE_EQ(r.cells[1].all.est_underflow_pct, 0.0);
  EXPECT_DOUBLE_EQ(r.cells[1].all.est_saturated_pct, 0.0);
  EXPECT_DOUBLE_EQ(r.cells[2].all.est_saturated_pct, 50.0);
  EXPECT_EQ(r.cells[1].all.sampled, 1);
  // Part of a bin, the amax's: amax 500 at stored scale 2^-3 puts the largest |x s| at
  // 62.5, so bin 5 spans [32, 62.5]; margin -1 (scale 448 / 500 x 2) moves it to
  // [32 d, 500 s'] with d = s' / 2^-3, of which the part past the threshold saturates.
  const ReplayInput in2 = one_tensor(std::vector<float>(10, 500.0f));
  g.margins = {-1};
  const ReplayResult q = replay_amax(in2, g, opt);
  const double s2 = static_cast<double>(std::ldexp(448.0f / 500.0f, 1));
  const double lo = std::log2(32.0 * s2 / 0.125), hi = std::log2(500.0 * s2);
  const double thr = std::log2(static_cast<double>(saturation_threshold(Format::E4M3FN)));
  ASSERT_LT(lo, thr);
  EXPECT_NEAR(q.cells[0].all.est_saturated_pct, 100.0 * (hi - thr) / (hi - lo) / 2, 1e-9);
}

TEST(Replay, OwnSettingsCheckFindsTheFirstDifference) {
  const std::vector<float> a = trace(100);
  const ReplayInput in = one_tensor(a);
  RunScalingSettings run;
  run.config = {16, 1, AmaxAlgo::Max, InitialScale::One};
  DelayedScaler ref(Format::E4M3FN, run.config);
  std::vector<StoredScale> stored;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) continue;
    if (i % 10 == 0) stored.push_back({static_cast<int64_t>(i), 0, stored_scale_of(ref.scale())});
    ref.update(a[i]);
  }
  OwnScalesCheck c = own_scales_check(in, run, stored);
  EXPECT_TRUE(c.matches);
  EXPECT_EQ(c.compared, static_cast<int64_t>(stored.size()));
  stored[4].scale = std::nextafter(stored[4].scale, 0.0f);  // one ulp off
  c = own_scales_check(in, run, stored);
  EXPECT_FALSE(c.matches);
  EXPECT_EQ(c.first_step, stored[4].step);
  EXPECT_EQ(c.first_tensor, 0u);
}

TEST(Replay, BadGridsAreRefusedByName) {
  const ReplayInput in = one_tensor({1.0f, 2.0f});
  ReplayGrid g;
  parse_replay_axis("margin=0,1", g);
  parse_replay_axis("window=1,16", g);
  parse_replay_axis("amax_algo=max,most_recent", g);
  EXPECT_EQ(g.cell_count(), 8u);
  EXPECT_THROW(parse_replay_axis("margin=3", g), ReplayError);  // given twice
  ReplayGrid h;
  EXPECT_THROW(parse_replay_axis("window=0", h), ReplayError);
  EXPECT_THROW(parse_replay_axis("margin=1.5", h), ReplayError);
  EXPECT_THROW(parse_replay_axis("amax_algo=mean", h), ReplayError);
  EXPECT_THROW(parse_replay_axis("lr=1", h), ReplayError);
  EXPECT_THROW(parse_replay_axis("margin", h), ReplayError);
  ReplayGrid big;
  for (int m = -50; m <= 50; ++m) big.margins.push_back(m);  // 101 x 100 x 1 > 10,000
  for (int w = 1; w <= 100; ++w) big.windows.push_back(w);
  big.algos = {AmaxAlgo::Max};
  try {
    replay_amax(in, big, {});
    FAIL() << "a grid of 10100 cells was taken";
  } catch (const ReplayError& e) {
    EXPECT_NE(std::string(e.what()).find("10100 cells"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("10000"), std::string::npos) << e.what();
  }
  ReplayGrid empty;
  empty.margins = {0};
  empty.windows = {1};
  EXPECT_THROW(replay_amax(in, empty, {}), ReplayError);
}

}  // namespace
}  // namespace fp8wb
