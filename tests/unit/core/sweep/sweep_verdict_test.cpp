// A sweep's verdict follows its stated rule (kSweepVerdictRule): the lowest final loss
// among finished points, never a point whose loss spiked over the reference's while one
// that did not is there, and no best where the lowest are within the noise (2% of the
// final loss, or the seeds' spread where larger). The loss spike is the largest excess of
// the loss over the reference's at one step. Runs written straight into a store.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/final_loss.h"
#include "fp8wb/core/sweep/sweep.h"
#include "temp_dir_test.h"

namespace fp8wb {
namespace {

constexpr int64_t kSteps = 100;  // the final loss's window: steps 90..99

// The reference's loss: falling from 63 to about 23.
double ref_at(int64_t s) {
  return 23 + 40 * std::exp(-static_cast<double>(s) / 10);
}

class SweepVerdictTest : public test::TempDirTest {
 protected:
  SweepVerdictTest() : TempDirTest("fp8wb-verdict") {}

  // A sweep over `axes` with `seeds` seeds; each trial's run follows the reference plus
  // offset(trial) over the whole run (so its final loss is 23 + offset, nearly), and
  // spikes to `spike(trial)` at step 72 where that is not NaN.
  int64_t sweep(RunStore& store, const std::vector<const char*>& axes, int seeds,
                const std::function<double(const SweepTrial&)>& offset,
                const std::function<double(const SweepTrial&)>& spike, double ref_spike = NAN) {
    SweepSpec spec;
    spec.name = "verdict";
    spec.base.model = ModelKind::Mlp;
    spec.seeds = seeds;
    for (const char* a : axes) spec.axes.push_back(parse_grid(a));
    const int64_t id = store.create_sweep(spec.name, sweep_json(spec));
    for (const SweepTrial& t : expand_sweep(spec)) {
      const int64_t run = store.create_run(t.config.name, fp8wb::RunKind::SweepTrial,
                                           run_config_json(t.config), "cpu", id);
      MetricBatch b;
      b.run_id = run;
      for (int64_t s = 0; s < kSteps; ++s) {
        StepMetrics m;
        m.step = s;
        m.ref_loss = s == 50 && !std::isnan(ref_spike) ? ref_spike : ref_at(s);
        m.loss = s == 72 && !std::isnan(spike(t)) ? spike(t) : ref_at(s) + offset(t);
        m.loss_gap = m.loss - m.ref_loss;
        b.steps.push_back(m);
      }
      b.final = true;
      b.status = RunStatus::Finished;
      store.write(std::move(b));
    }
    store.set_sweep_status(id, fp8wb::SweepStatus::Finished);
    store.flush();
    return id;
  }
};

std::string label(const SweepPoint& p) {
  return "margin=" + p.values[0] + " window=" + p.values[1];
}

const SweepPoint& at(const std::vector<SweepPoint>& points, const std::string& margin,
                     const std::string& window) {
  for (const SweepPoint& p : points)
    if (p.values[0] == margin && p.values[1] == window) return p;
  throw std::runtime_error("no point " + margin + " " + window);
}

TEST(LossSpike, IsTheLargestExcessOverTheReference) {
  const std::vector<SeriesPoint> loss = {{0, 5}, {1, 4}, {2, 9}, {3, NAN}, {4, 2}};
  const std::vector<SeriesPoint> ref = {{0, 5}, {1, 3}, {2, 4.5}, {3, 3}, {4, 2.5}};
  const LossSpike s = loss_spike(loss, ref);
  EXPECT_DOUBLE_EQ(s.excess, 4.5);
  EXPECT_DOUBLE_EQ(s.ref, 4.5);
  EXPECT_EQ(s.step, 2);
  EXPECT_TRUE(s.spiked());  // 100% over the reference's loss
  // 40% over: not a spike.
  EXPECT_FALSE(loss_spike({{0, 1.4}}, {{0, 1.0}}).spiked());
  EXPECT_TRUE(loss_spike({{0, 1.6}}, {{0, 1.0}}).spiked());
  // No reference: no figure, no spike.
  const LossSpike none = loss_spike(loss, {});
  EXPECT_TRUE(std::isnan(none.excess));
  EXPECT_FALSE(none.spiked());
}

// The case: a margin x window sweep whose margin-4 trials have the lowest final
// loss but spiked to 60 at step 72, where the reference was near 23.
TEST_F(SweepVerdictTest, ASpikedPointIsNeverTheBestWhileAnotherIsThere) {
  auto store = RunStore::open(path_);
  const int64_t id = sweep(
      *store, {"margin=0,1,4", "window=1,16,1024"}, 1,
      [](const SweepTrial& t) {
        if (t.values[0] == "4") return -0.9;                        // the lowest final losses
        if (t.values[0] == "1" && t.values[1] == "16") return 0.0;  // the best unflagged
        return 2.0;  // about 9% above it: beyond the noise assumed with one seed (5%)
      },
      [](const SweepTrial& t) { return t.values[0] == "4" ? 60.0 : NAN; });
  const auto points = sweep_points(*store, id);
  ASSERT_EQ(points.size(), 9u);
  const SweepPoint& spiked = at(points, "4", "16");
  EXPECT_EQ(spiked.spiked, 1);
  EXPECT_NEAR(spiked.spike, 60 - ref_at(72), 1e-9);
  ASSERT_EQ(spiked.trial_figures.size(), 1u);
  EXPECT_EQ(spiked.trial_figures[0].spike.step, 72);
  EXPECT_TRUE(spiked.trial_figures[0].flagged());
  EXPECT_EQ(at(points, "0", "1").spiked, 0);
  EXPECT_DOUBLE_EQ(sweep_metric(spiked, SweepMetric::Spike), spiked.spike);
  EXPECT_EQ(sweep_counts(SweepSpec{}, points).spiked, 3u);

  const SweepVerdict v = sweep_verdict(points);
  ASSERT_EQ(v.kind, SweepVerdict::Kind::Best);
  EXPECT_EQ(label(*v.lowest), "margin=1 window=16");
  ASSERT_EQ(v.passed_over.size(), 3u);
  for (const SweepPoint* p : v.passed_over) EXPECT_EQ(p->values[0], "4");
  const std::string text = sweep_verdict_text(v, label);
  EXPECT_EQ(text.rfind("best: margin=1 window=16", 0), 0u) << text;
  EXPECT_NE(text.find("passed over as their loss spiked (the mildest spike first): margin=4 "
                      "window=1 "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(+161%) at step 72"), std::string::npos) << text;
  EXPECT_NE(text.find("at step 72"), std::string::npos) << text;
}

// Every point spiked: none is called the best; the lowest is named with its spike.
TEST_F(SweepVerdictTest, EveryPointSpikedNamesNoBest) {
  auto store = RunStore::open(path_);
  const int64_t id = sweep(
      *store, {"margin=0,4", "window=1"}, 1,
      [](const SweepTrial& t) { return t.values[0] == "4" ? -0.9 : 0.0; },
      [](const SweepTrial&) { return 60.0; });
  const auto points = sweep_points(*store, id);  // the verdict points into them
  const SweepVerdict v = sweep_verdict(points);
  ASSERT_EQ(v.kind, SweepVerdict::Kind::AllFlagged);
  EXPECT_EQ(label(*v.lowest), "margin=4 window=1");
  const std::string text = sweep_verdict_text(v, label);
  EXPECT_EQ(text.rfind("no best: ", 0), 0u) << text;
}

// Final losses 1% apart with one seed: within the noise (5% with one seed), no best named;
// 10% apart: a best, with how far below the next.
TEST_F(SweepVerdictTest, DifferencesWithinTheNoiseCrownNoWinner) {
  auto store = RunStore::open(path_);
  const int64_t close = sweep(
      *store, {"margin=0,1,2", "window=1"}, 1,
      [](const SweepTrial& t) { return 0.1 * std::stod(t.values[0]); },  // 23.0, 23.1, 23.2
      [](const SweepTrial&) { return NAN; });
  const auto close_points = sweep_points(*store, close);
  SweepVerdict v = sweep_verdict(close_points);
  ASSERT_EQ(v.kind, SweepVerdict::Kind::WithinNoise);
  EXPECT_EQ(v.tied.size(), 3u);
  EXPECT_EQ(label(*v.tied.front()), "margin=0 window=1");
  EXPECT_TRUE(v.one_seed);
  EXPECT_NEAR(v.noise, 0.05 * 23, 0.01);
  std::string text = sweep_verdict_text(v, label);
  EXPECT_EQ(text.rfind("no clear best: 3 settings", 0), 0u) << text;
  EXPECT_NE(text.find("one seed per point measures no noise"), std::string::npos) << text;

  const int64_t apart = sweep(
      *store, {"margin=0,1", "window=1"}, 1,
      [](const SweepTrial& t) { return t.values[0] == "1" ? 2.3 : 0.0; },  // 10% apart
      [](const SweepTrial&) { return NAN; });
  const auto apart_points = sweep_points(*store, apart);
  v = sweep_verdict(apart_points);
  ASSERT_EQ(v.kind, SweepVerdict::Kind::Best);
  EXPECT_EQ(label(*v.lowest), "margin=0 window=1");
  ASSERT_TRUE(v.next);
  text = sweep_verdict_text(v, label);
  EXPECT_NE(text.find("10.0% below the next, margin=1 window=1"), std::string::npos) << text;
  EXPECT_NE(text.find("(one seed per point: beyond 5%"), std::string::npos) << text;
}

// Issue #52: one seed per point and final losses 3.5% apart (0.3648 against 0.3776 in the
// tryout's sweep): one seed measures no noise, so no best is crowned from it; with two
// seeds that agree closely the same gap is a best.
TEST_F(SweepVerdictTest, OneSeedPerPointCrownsNoBestFromASmallDifference) {
  auto store = RunStore::open(path_);
  const int64_t one = sweep(
      *store, {"margin=0,2", "window=1"}, 1,
      [](const SweepTrial& t) { return t.values[0] == "2" ? 0.0 : 0.8; },  // 3.5% apart
      [](const SweepTrial&) { return NAN; });
  const auto one_points = sweep_points(*store, one);
  SweepVerdict v = sweep_verdict(one_points);
  EXPECT_TRUE(v.one_seed);
  ASSERT_EQ(v.kind, SweepVerdict::Kind::WithinNoise) << sweep_verdict_text(v, label);
  std::string text = sweep_verdict_text(v, label);
  EXPECT_EQ(text.rfind("no clear best: 2 settings are within the noise", 0), 0u) << text;

  const int64_t two = sweep(
      *store, {"margin=0,2", "window=1"}, 2,
      [](const SweepTrial& t) {
        return (t.values[0] == "2" ? 0.0 : 0.8) + (t.seed_index == 0 ? -0.01 : 0.01);
      },
      [](const SweepTrial&) { return NAN; });
  const auto two_points = sweep_points(*store, two);
  v = sweep_verdict(two_points);
  EXPECT_FALSE(v.one_seed);
  ASSERT_EQ(v.kind, SweepVerdict::Kind::Best) << sweep_verdict_text(v, label);
  EXPECT_EQ(label(*v.lowest), "margin=2 window=1");
}

// With several seeds the seeds' spread is the noise where it passes 2%: points 5% apart
// whose seeds spread over 10% are within it; the spread is shown.
TEST_F(SweepVerdictTest, TheSeedsSpreadIsTheNoiseWhereLarger) {
  auto store = RunStore::open(path_);
  const int64_t id = sweep(
      *store, {"margin=0,1", "window=1"}, 2,
      [](const SweepTrial& t) {
        const double level = t.values[0] == "1" ? 1.15 : 0.0;
        return level + (t.seed_index == 0 ? -1.2 : 1.2);  // seeds 2.4 (about 10%) apart
      },
      [](const SweepTrial&) { return NAN; });
  const auto points = sweep_points(*store, id);
  const SweepPoint& p = at(points, "0", "1");
  EXPECT_NEAR(p.final_loss_spread(), 2.4, 1e-9);
  const SweepVerdict v = sweep_verdict(points);
  ASSERT_EQ(v.kind, SweepVerdict::Kind::WithinNoise);
  EXPECT_NEAR(v.noise, 2.4, 1e-9);
  const std::string text = sweep_verdict_text(v, label);
  EXPECT_NE(text.find("no clear best: 2 settings"), std::string::npos) << text;
}

TEST(ReferenceTrouble, ABlowUpOrANonFiniteLossOfTheReferenceItself) {
  // Falls from 10 to 2, then jumps to 12 at step 3 (after the warm-up of 2 of its 5
  // steps): 10 over its lowest 2 (more than it, and more than the drop of 8 before it).
  ReferenceTrouble t = reference_trouble({{0, 10}, {1, 4}, {2, 2}, {3, 12}, {4, 2}});
  EXPECT_TRUE(t.blew_up());
  EXPECT_FALSE(t.diverged);
  EXPECT_EQ(t.step, 3);
  EXPECT_DOUBLE_EQ(t.rise, 10);
  EXPECT_EQ(t.broke_step, 2);  // its climb began at its lowest, step 2
  // A rise of 5 over 2 is less than the drop of 8 before it: a bump, not a blow-up.
  EXPECT_FALSE(reference_trouble({{0, 10}, {1, 4}, {2, 2}, {3, 7}, {4, 2}}).troubled());
  EXPECT_DOUBLE_EQ(t.low, 2);
  // The noise of a small loss after a large drop is no spike: 0.01 to 0.02.
  EXPECT_FALSE(reference_trouble({{0, 1}, {1, 0.01}, {2, 0.02}, {3, 0.01}}).troubled());
  // A falling loss, and none at all: no trouble.
  EXPECT_FALSE(reference_trouble({{0, 3}, {1, 2}, {2, 1}}).troubled());
  EXPECT_FALSE(reference_trouble({}).troubled());
  t = reference_trouble({{0, 3}, {1, NAN}, {2, INFINITY}});
  EXPECT_TRUE(t.diverged);
  EXPECT_EQ(t.diverged_step, 1);
}

// Spiked points are told apart by their spike's size: the size is in the text, and the
// points passed over are ranked by it, the mildest first (not all "spiked" alike).
TEST_F(SweepVerdictTest, SpikedPointsAreRankedByTheSpikesSize) {
  auto store = RunStore::open(path_);
  const int64_t id = sweep(
      *store, {"margin=0,1,2", "window=1"}, 1,
      [](const SweepTrial& t) {
        // margin 0 the lowest, margin 1 next; margin 2 the best unflagged
        return t.values[0] == "0" ? -2.0 : t.values[0] == "1" ? -1.0 : 0.0;
      },
      [](const SweepTrial& t) {
        // margin 0 spikes ten times as far over the reference as margin 1
        return t.values[0] == "0" ? ref_at(72) + 200 : t.values[0] == "1" ? ref_at(72) + 20 : NAN;
      });
  const auto points = sweep_points(*store, id);
  const SweepPoint& big = at(points, "0", "1");
  EXPECT_NEAR(big.spike_fraction, 200 / ref_at(72), 1e-9);
  const SweepVerdict v = sweep_verdict(points);
  ASSERT_EQ(v.kind, SweepVerdict::Kind::Best);
  EXPECT_EQ(label(*v.lowest), "margin=2 window=1");
  ASSERT_EQ(v.passed_over.size(), 2u);
  EXPECT_EQ(label(*v.passed_over[0]), "margin=1 window=1");  // the milder spike first
  EXPECT_EQ(label(*v.passed_over[1]), "margin=0 window=1");
  const std::string text = sweep_verdict_text(v, label);
  const std::string pct =
      "(+" + std::to_string(static_cast<int>(std::lround(2000 / ref_at(72)))) + "%)";
  EXPECT_NE(text.find(pct), std::string::npos) << pct << " in " << text;
  EXPECT_EQ(text.find("caution"), std::string::npos) << text;

  // Every point spiked: the mildest is named beside the lowest.
  const int64_t all = sweep(
      *store, {"margin=0,1", "window=1"}, 1,
      [](const SweepTrial& t) { return t.values[0] == "0" ? -2.0 : 0.0; },
      [](const SweepTrial& t) { return ref_at(72) + (t.values[0] == "0" ? 200 : 20); });
  const auto all_points = sweep_points(*store, all);
  const SweepVerdict va = sweep_verdict(all_points);
  ASSERT_EQ(va.kind, SweepVerdict::Kind::AllFlagged);
  EXPECT_EQ(label(*va.lowest), "margin=0 window=1");
  ASSERT_TRUE(va.mildest);
  EXPECT_EQ(label(*va.mildest), "margin=1 window=1");
  EXPECT_NE(sweep_verdict_text(va, label).find("the mildest spike: margin=1 window=1"),
            std::string::npos);
}

// Where the reference itself blew up in every run (issue #52: all 4 trials' references),
// nothing was measured against one that held: no best is crowned, and the verdict says why.
TEST_F(SweepVerdictTest, EveryReferenceBlownUpCrownsNoBest) {
  auto store = RunStore::open(path_);
  const int64_t id = sweep(
      *store, {"margin=0,1", "window=1"}, 1,
      [](const SweepTrial& t) { return t.values[0] == "1" ? 5.0 : 0.0; },
      [](const SweepTrial&) { return NAN; }, /*ref_spike=*/200);
  const auto points = sweep_points(*store, id);
  EXPECT_EQ(at(points, "0", "1").reference_troubled, 1);
  const SweepVerdict v = sweep_verdict(points);
  EXPECT_EQ(v.reference_troubled, 2);
  ASSERT_EQ(v.kind, SweepVerdict::Kind::ReferencesBroken) << sweep_verdict_text(v, label);
  EXPECT_EQ(label(*v.lowest), "margin=0 window=1");
  const std::string text = sweep_verdict_text(v, label);
  EXPECT_EQ(text.rfind("no clear best: the high-precision reference itself blew up in all 2 "
                       "runs",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find("at step 50"), std::string::npos) << text;
  EXPECT_NE(text.find("the lowest final loss, margin=0 window=1"), std::string::npos) << text;
  EXPECT_EQ(text.find("best: margin"), std::string::npos) << text;
}

// Several seeds: the loss gap's spread is kept beside its mean.
TEST_F(SweepVerdictTest, TheLossGapsSpreadAcrossSeedsIsKept) {
  auto store = RunStore::open(path_);
  const int64_t id = sweep(
      *store, {"margin=0", "window=1"}, 2,
      [](const SweepTrial& t) { return t.seed_index == 0 ? -1.0 : 3.0; },
      [](const SweepTrial&) { return NAN; });
  const auto points = sweep_points(*store, id);
  const SweepPoint& p = at(points, "0", "1");
  EXPECT_NEAR(p.loss_gap, 1.0, 1e-9);
  EXPECT_NEAR(p.loss_gap_min, -1.0, 1e-9);
  EXPECT_NEAR(p.loss_gap_max, 3.0, 1e-9);
  EXPECT_NEAR(p.loss_gap_spread(), 4.0, 1e-9);
}

// Issue #52's sweep, by hand: a loss falling from about 2.4 to 0.34 over 150 steps; both
// models bump over steps 0-16 (the warm-up), the FP8 model's further.
constexpr int64_t kLongSteps = 150;
double curve(int64_t s, double level) {
  const double x = static_cast<double>(s);
  const double bump = s <= 16 ? 1.5 * std::sin(3.14159265 * x / 16) : 0.0;
  return level + 2 * std::exp(-x / 15) + bump;
}

// Runs of a sweep over `axes` x `seeds`, each with the given loss and reference curves.
int64_t sweep_of_curves(RunStore& store, const std::vector<const char*>& axes, int seeds,
                        const std::function<double(const SweepTrial&, int64_t)>& loss,
                        const std::function<double(const SweepTrial&, int64_t)>& ref) {
  SweepSpec spec;
  spec.name = "curves";
  spec.base.model = ModelKind::Mlp;
  spec.seeds = seeds;
  for (const char* a : axes) spec.axes.push_back(parse_grid(a));
  const int64_t id = store.create_sweep(spec.name, sweep_json(spec));
  for (const SweepTrial& t : expand_sweep(spec)) {
    const int64_t run = store.create_run(t.config.name, fp8wb::RunKind::SweepTrial,
                                         run_config_json(t.config), "cpu", id);
    MetricBatch b;
    b.run_id = run;
    for (int64_t s = 0; s < kLongSteps; ++s) {
      StepMetrics m;
      m.step = s;
      m.ref_loss = ref(t, s);
      m.loss = loss(t, s);
      m.loss_gap = m.loss - m.ref_loss;
      b.steps.push_back(m);
    }
    b.final = true;
    b.status = RunStatus::Finished;
    store.write(std::move(b));
  }
  store.set_sweep_status(id, fp8wb::SweepStatus::Finished);
  store.flush();
  return id;
}

std::vector<SeriesPoint> series(int64_t steps, const std::function<double(int64_t)>& f) {
  std::vector<SeriesPoint> v;
  for (int64_t s = 0; s < steps; ++s) v.push_back({s, f(s)});
  return v;
}

// The warm-up bump both models share is no spike, nor trouble of the reference.
TEST(LossSpike, AnEarlyBumpBothShareIsNoSpike) {
  const auto ref = series(kLongSteps, [](int64_t s) { return curve(s, 0.34); });
  // The FP8 model's bump stays 1.2 over the reference's: 51% over it at step 0.
  const auto loss =
      series(kLongSteps, [](int64_t s) { return curve(s, 0.34) + (s <= 16 ? 1.2 : 0.0); });
  EXPECT_FALSE(loss_spike(loss, ref).spiked());
  EXPECT_FALSE(reference_trouble(ref).troubled());
  EXPECT_EQ(warmup_end(kLongSteps - 1), 20);
}

// A rise of 0.2 over a loss of 0.34 (59%) is the noise of a small loss, not a spike.
TEST(LossSpike, ASmallRiseAtALowLossIsNoSpike) {
  const auto ref = series(kLongSteps, [](int64_t) { return 0.34; });
  const auto loss = series(kLongSteps, [](int64_t s) { return s == 100 ? 0.54 : 0.35; });
  const LossSpike spike = loss_spike(loss, ref);
  EXPECT_NEAR(spike.excess, 0.2, 1e-12);
  EXPECT_FALSE(spike.spiked());
}

// An FP8-only spike (run 5: 6.19 where the reference had 2.16 at step 112) is flagged,
// and never dismissed, even where another run's reference blew up.
// (The reference's own bump to 2.16 is less than its drop from 2.36 to 0.36 before it: no
// blow-up, so the FP8 loss is measured against it there.)
TEST(LossSpike, AnFp8OnlySpikeIsFlaggedAndNotDismissed) {
  const auto ref = series(kLongSteps, [](int64_t s) { return s == 112 ? 2.16 : curve(s, 0.36); });
  const auto loss = series(kLongSteps, [](int64_t s) { return s == 112 ? 6.19 : curve(s, 0.37); });
  EXPECT_FALSE(reference_trouble(ref).troubled());
  const LossSpike spike = loss_spike(loss, ref);
  EXPECT_TRUE(spike.spiked());
  EXPECT_EQ(spike.step, 112);
  EXPECT_EQ(spike.ref_broke_step, -1);
}

TEST_F(SweepVerdictTest, AnFp8OnlySpikeIsNeverDismissed) {
  auto store = RunStore::open(path_);
  // margin 0 spikes at step 112; margin 1's reference (seed 2) blows up to 110.
  const int64_t id = sweep_of_curves(
      *store, {"margin=0,1", "window=1"}, 1,
      [](const SweepTrial& t, int64_t s) {
        return t.values[0] == "0" && s == 112 ? 6.19 : curve(s, 0.37);
      },
      [](const SweepTrial& t, int64_t s) {
        if (t.values[0] == "1" && s >= 110) return 110.0;
        return s == 112 ? 2.16 : curve(s, 0.36);
      });
  const auto points = sweep_points(*store, id);
  EXPECT_EQ(at(points, "0", "1").spiked, 1);
  const SweepVerdict v = sweep_verdict(points);
  ASSERT_EQ(v.kind, SweepVerdict::Kind::Best);
  EXPECT_EQ(label(*v.lowest), "margin=1 window=1");
  ASSERT_EQ(v.passed_over.size(), 0u);  // margin 0's final loss is no lower
  EXPECT_EQ(v.reference_troubled, 1);
  const std::string text = sweep_verdict_text(v, label);
  EXPECT_EQ(text.find("means little"), std::string::npos) << text;
  EXPECT_NE(text.find("blew up in 1 run"), std::string::npos) << text;
}

// The repro: window=1 ends about 6% below window=128 (beyond the 2% rule and the seeds'
// spread), both with the shared early bump and a late rise of 0.2 at a loss of 0.34;
// seed 2's reference blows up to 35 then 110 at steps 110-120. window=1 is the best, and
// the blown-up references' gaps are left out of the mean gap.
TEST_F(SweepVerdictTest, AClearWinnerBeyondTheNoiseIsNamed) {
  auto store = RunStore::open(path_);
  const int64_t id = sweep_of_curves(
      *store, {"margin=0", "window=1,128"}, 2,
      [](const SweepTrial& t, int64_t s) {
        const double level =
            (t.values[1] == "1" ? 0.372 : 0.395) + (t.seed_index == 0 ? -0.0075 : 0.0075);
        return curve(s, level) + (s <= 16 ? 1.2 : 0.0) + (s == 90 ? 0.2 : 0.0);
      },
      [](const SweepTrial& t, int64_t s) {
        if (t.seed_index == 1 && s >= 110) return s < 120 ? 35.0 : 110.0;
        return curve(s, 0.36);
      });
  const auto points = sweep_points(*store, id);
  for (const SweepPoint& p : points) {
    EXPECT_EQ(p.spiked, 0) << label(p);
    EXPECT_EQ(p.reference_troubled, 1) << label(p);
    EXPECT_EQ(p.gap_ref_broken, 1) << label(p);
    // The mean gap is the one held seed's, not averaged with a gap of -109.
    ASSERT_EQ(p.trial_figures.size(), 2u);
    EXPECT_NEAR(p.loss_gap, p.trial_figures[0].loss_gap, 1e-9) << label(p);
    EXPECT_GT(p.loss_gap, 0) << label(p);
  }
  const SweepVerdict v = sweep_verdict(points);
  ASSERT_EQ(v.kind, SweepVerdict::Kind::Best) << sweep_verdict_text(v, label);
  const std::string text = sweep_verdict_text(v, label);
  EXPECT_EQ(text.rfind("best: margin=0 window=1, final loss 0.372", 0), 0u) << text;
  EXPECT_NE(text.find("their loss gaps are left out of the mean gap"), std::string::npos) << text;
}

// Issue #52: a trial whose FP8 loss stayed below its exploding reference, and went over it
// only after the reference blew up (its reference falling back to 0.3 while the FP8 model
// held 1.0), did not spike: past the reference's blow-up nothing is measured against it.
TEST(LossSpike, NoSpikeIsMeasuredPastTheReferencesBlowUp) {
  const auto ref = series(kLongSteps, [](int64_t s) {
    if (s < 60) return 3.0 - 2.0 * static_cast<double>(s) / 60;  // falls to 1
    return s < 80 ? 20.0 : 0.3;                                  // blows up, then falls
  });
  const auto loss = series(
      kLongSteps, [](int64_t s) { return s < 60 ? 3.0 - 2.0 * static_cast<double>(s) / 60 : 1.0; });
  const ReferenceTrouble t = reference_trouble(ref);
  ASSERT_TRUE(t.blew_up());
  EXPECT_EQ(t.broke_step, 59);  // its lowest, where the climb began
  const LossSpike spike = loss_spike(loss, ref);
  EXPECT_EQ(spike.ref_broke_step, 59);
  EXPECT_FALSE(spike.spiked()) << spike.excess << " at step " << spike.step;
  EXPECT_LT(spike.step, 59);
  // The same loss against a reference that held at 0.3 from step 60 on spiked.
  const auto held = series(
      kLongSteps, [](int64_t s) { return s < 60 ? 3.0 - 2.0 * static_cast<double>(s) / 60 : 0.3; });
  EXPECT_FALSE(reference_trouble(held).troubled());
  EXPECT_TRUE(loss_spike(loss, held).spiked());
  // A diverged reference breaks at its first non-finite loss.
  EXPECT_EQ(reference_trouble({{0, 3}, {1, 2}, {2, NAN}}).broke_step, 2);
}

TEST(SweepVerdict, NoFinishedPointNamesNone) {
  SweepPoint p;
  p.values = {"0", "1"};
  p.trials = 2;
  p.runs = p.finished = 1;
  const std::vector<SweepPoint> points = {p};
  const SweepVerdict v = sweep_verdict(points);
  EXPECT_EQ(v.kind, SweepVerdict::Kind::None);
  EXPECT_FALSE(v.lowest);
}

}  // namespace
}  // namespace fp8wb
