// The final loss and loss gap have one definition: the mean over the last 10% of a run's
// steps, the reference's over the same steps. Computed here by hand, in double, from the
// values written to the store, for runs whose window holds a skipped (non-finite) step and
// steps stored only every 5; the sweep's points, `fp8wb sweep --json`, `fp8wb runs show`
// (text and --json) and `fp8wb runs list` all give that figure. A run's tokens/s is one
// figure in `runs list`, `runs show` and `train`'s summary too, named.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/final_loss.h"
#include "fp8wb/core/sweep/sweep.h"
#include "temp_dir_test.h"

namespace {

using fp8wb::test::run;

struct Written {
  std::vector<int64_t> steps;
  std::vector<double> loss, ref;
};

// 100 steps, stored every 5 and the last (0, 5, ..., 95, 99); the loss at step 95 is NaN
// (an update skipped), and with `ref_nan_last` the reference's at step 99 too.
Written written_run(double base, bool ref_nan_last) {
  Written w;
  for (int64_t s = 0; s < 100; s += 5) w.steps.push_back(s);
  w.steps.push_back(99);
  for (const int64_t s : w.steps) {
    const double loss =
        base + 2.0 * std::exp(-static_cast<double>(s) / 20.0) + 0.03 * static_cast<double>(s % 3);
    w.loss.push_back(s == 95 ? NAN : loss);
    w.ref.push_back(ref_nan_last && s == 99 ? NAN
                                            : loss - 0.04 + 0.01 * static_cast<double>(s % 2));
  }
  return w;
}

// By hand: the run made steps 0..99, so its last 10% are steps 90..99; of those, the
// stored steps with a finite loss are 90 and 99.
struct Hand {
  double loss, ref, gap;
};
Hand by_hand(const Written& w) {
  double sum = 0, ref = 0;
  int n = 0;
  bool ref_ok = true;
  for (size_t i = 0; i < w.steps.size(); ++i) {
    if (w.steps[i] < 90 || !std::isfinite(w.loss[i])) continue;
    sum += w.loss[i];
    ref += w.ref[i];
    ref_ok = ref_ok && std::isfinite(w.ref[i]);
    ++n;
  }
  EXPECT_EQ(n, 2);
  const double l = sum / n, r = ref / n;
  return {l, ref_ok ? r : NAN, ref_ok ? l - r : NAN};
}

class FinalLoss : public fp8wb::test::TempDirTest {
 protected:
  FinalLoss() : TempDirTest("fp8wb-final-loss") {}
};

TEST_F(FinalLoss, OneFigureForTheSweepTheCliAndTheRun) {
  using namespace fp8wb;
  SweepSpec spec;
  spec.name = "defined";
  spec.base.model = ModelKind::Mlp;
  spec.base.steps = 100;
  spec.axes = {parse_grid("margin=0,1")};
  const std::vector<SweepTrial> trials = expand_sweep(spec);
  ASSERT_EQ(trials.size(), 2u);
  const Written w[2] = {written_run(0.5, false), written_run(0.7, true)};
  int64_t sweep = 0, ids[2] = {0, 0};
  {
    auto store = RunStore::open(path_);
    sweep = store->create_sweep(spec.name, sweep_json(spec));
    for (int t = 0; t < 2; ++t) {
      ids[t] = store->create_run(trials[t].config.name, fp8wb::RunKind::SweepTrial,
                                 run_config_json(trials[t].config), "cpu", sweep);
      MetricBatch b;
      b.run_id = ids[t];
      for (size_t i = 0; i < w[t].steps.size(); ++i) {
        StepMetrics m;
        m.step = w[t].steps[i];
        m.loss = w[t].loss[i];
        m.ref_loss = w[t].ref[i];
        m.loss_gap = m.loss - m.ref_loss;
        b.steps.push_back(m);
      }
      b.final = true;
      b.status = RunStatus::Finished;
      store->write(std::move(b));
    }
    store->set_sweep_status(sweep, fp8wb::SweepStatus::Finished);
    store->flush();
  }
  const Hand hand[2] = {by_hand(w[0]), by_hand(w[1])};
  ASSERT_TRUE(std::isfinite(hand[0].gap));
  ASSERT_TRUE(std::isnan(hand[1].gap));  // the reference's last step is not finite

  // The sweep's points.
  {
    const auto store = RunStore::open_read_only(path_);
    const auto points = sweep_points(*store, sweep);
    ASSERT_EQ(points.size(), 2u);
    for (int t = 0; t < 2; ++t) {
      EXPECT_DOUBLE_EQ(points[t].final_loss, hand[t].loss) << t;
      if (t == 0) {
        EXPECT_DOUBLE_EQ(points[t].loss_gap, hand[t].gap);
      } else {
        EXPECT_TRUE(std::isnan(points[t].loss_gap));
      }
    }
  }
  // fp8wb sweep --json (resuming the finished sweep runs nothing and reports its points).
  auto r = run({"sweep", "--db", path_, "--resume", std::to_string(sweep), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["points"][0]["final_loss"].get<double>(), hand[0].loss);
  EXPECT_DOUBLE_EQ(j["points"][0]["loss_gap"].get<double>(), hand[0].gap);
  EXPECT_DOUBLE_EQ(j["points"][1]["final_loss"].get<double>(), hand[1].loss);
  EXPECT_TRUE(j["points"][1]["loss_gap"].is_null());
  EXPECT_EQ(j["finished"], 2);
  EXPECT_EQ(j["trials"], 2);
  EXPECT_NE(j["definition"].get<std::string>().find("last 10%"), std::string::npos);

  for (int t = 0; t < 2; ++t) {
    // fp8wb runs show --json
    r = run({"runs", "show", std::to_string(ids[t]), "--db", path_, "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto s = nlohmann::json::parse(r.out);
    EXPECT_DOUBLE_EQ(s["final"]["loss"].get<double>(), hand[t].loss) << t;
    EXPECT_EQ(s["final"]["from_step"], 90);
    EXPECT_EQ(s["final"]["to_step"], 99);
    EXPECT_EQ(s["final"]["steps_averaged"], 2);
    if (t == 0) {
      EXPECT_DOUBLE_EQ(s["final"]["loss_gap"].get<double>(), hand[t].gap);
      EXPECT_DOUBLE_EQ(s["final"]["ref_loss"].get<double>(), hand[t].ref);
    } else {
      EXPECT_TRUE(s["final"]["loss_gap"].is_null());
    }
    // fp8wb runs show, as people read it: the figure, its steps and its definition.
    r = run({"runs", "show", std::to_string(ids[t]), "--db", path_});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find(fmt::format("final loss    {:.6g} (mean over steps 90-99)", hand[t].loss)),
              std::string::npos)
        << r.out;
    if (t == 0) {
      EXPECT_NE(r.out.find(fmt::format("loss gap      {:+.6g}", hand[t].gap)), std::string::npos)
          << r.out;
    } else {
      EXPECT_NE(r.out.find("loss gap      none"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("! no comparison: the high-precision reference diverged (a loss "
                           "that is not finite at step 99)"),
                std::string::npos)
          << r.out;
    }
    EXPECT_NE(r.out.find(std::string(kFinalLossDefinition)), std::string::npos) << r.out;
  }
  // fp8wb runs list's columns: the final loss, and the loss gap its footnote defines ("-"
  // without a finite reference loss; "!" where the reference diverged, as run 2's did).
  r = run({"runs", "list", "--db", path_});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("final loss  loss gap"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("! the high-precision reference of that run diverged or blew up"),
            std::string::npos)
      << r.out;
  for (int t = 0; t < 2; ++t) {
    const std::string gap = t == 0 ? fmt::format("{:+.4f}", hand[t].gap) : std::string("-!");
    EXPECT_NE(r.out.find(fmt::format(" {:.4f} {:>9} ", hand[t].loss, gap)), std::string::npos)
        << r.out;
  }
}

// tokens/s: `runs list` and `runs show` give one figure, the median over the run's stored
// steps (here by hand: ten steps, a slow first and last among them, whose middle two are
// 4300 and 4400), and say which it is; the JSON of both carries it too.
TEST_F(FinalLoss, ListAndShowGiveOneSpeedAndNameIt) {
  using namespace fp8wb;
  const double tps[] = {120, 4100, 4300, 4200, 4500, 4400, 4600, 4700, 4800, 2000};
  int64_t id = 0;
  {
    auto store = RunStore::open(path_);
    id = store->create_run("speed", fp8wb::RunKind::Train, "{}", "cpu");
    MetricBatch b;
    b.run_id = id;
    for (int64_t s = 0; s < 10; ++s) {
      StepMetrics m;
      m.step = s;
      m.loss = 3.0 - 0.1 * static_cast<double>(s);
      m.tokens_per_s = tps[s];
      // Per wall-clock step (both models): none for the first step, then 1000 + 10 s.
      if (s > 0) m.wall_tokens_per_s = 1000.0 + 10.0 * static_cast<double>(s);
      b.steps.push_back(m);
    }
    b.final = true;
    b.status = RunStatus::Finished;
    store->write(std::move(b));
    store->flush();
  }
  const double by_hand = (4300.0 + 4400.0) / 2;  // the mean of the middle two of ten
  auto r = run({"runs", "list", "--db", path_});
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t row = r.out.find("speed ");
  ASSERT_NE(row, std::string::npos) << r.out;
  const std::string line = r.out.substr(row, r.out.find('\n', row) - row);
  EXPECT_NE(line.find(" 4350 "), std::string::npos) << line;
  EXPECT_NE(
      r.out.find("tokens/s: of one model's step (the FP8 model's alone where a reference trains "
                 "beside it), the median over the run's stored steps"),
      std::string::npos)
      << r.out;
  r = run({"runs", "show", std::to_string(id), "--db", path_});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("tokens/s      4350 (median over 10 stored steps"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("the last step 2000"), std::string::npos) << r.out;
  // The per-model figure is said to be one model's, and the wall-clock one beside it: the
  // median of 1010..1090 over nine steps, 1050.
  EXPECT_NE(r.out.find("one model's step, the FP8 model's alone"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wall-clock    1050 tokens/s per wall-clock step (median over 9)"),
            std::string::npos)
      << r.out;
  r = run({"runs", "list", "--db", path_, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out)[0]["tokens_per_s"].get<double>(), by_hand);
  r = run({"runs", "show", std::to_string(id), "--db", path_, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["tokens_per_s"]["median"].get<double>(), by_hand);
  EXPECT_DOUBLE_EQ(j["tokens_per_s"]["last"].get<double>(), 2000.0);
  EXPECT_EQ(j["tokens_per_s"]["steps"], 10);
  EXPECT_DOUBLE_EQ(j["wall_tokens_per_s"]["median"].get<double>(), 1050.0);
  EXPECT_EQ(j["wall_tokens_per_s"]["steps"], 9);
}

// A run stored at every step averages exactly its last tenth; no loss, no figure.
// `fp8wb train` ends with the run's final loss and gap as `runs show` gives them (its
// last step's loss beside it, said to be the last step's), in text and in JSON, and with
// its tokens/s as `runs show` gives it (the median over the stored steps: it gave the last
// step's, another figure under the same name).
TEST_F(FinalLoss, TrainEndsWithTheRunsFinalLoss) {
  const std::vector<std::string> base = {"train", "--db",     path_,   "--set",  "model=mlp",
                                         "--set", "steps=20", "--set", "lr=0.01"};
  auto text_args = base;
  text_args.push_back("-q");
  const auto t = run(text_args);
  ASSERT_EQ(t.rc, 0) << t.err;
  auto json_args = base;
  json_args.push_back("--json");
  const auto j = run(json_args);
  ASSERT_EQ(j.rc, 0) << j.err;
  const auto got = nlohmann::json::parse(j.out);
  for (int id : {1, 2}) {
    const auto shown = run({"runs", "show", std::to_string(id), "--db", path_, "--json"});
    ASSERT_EQ(shown.rc, 0) << shown.err;
    const auto shown_json = nlohmann::json::parse(shown.out);
    const auto fin = shown_json["final"];
    const auto speed = shown_json["tokens_per_s"];
    ASSERT_TRUE(speed["median"].is_number()) << shown.out;
    ASSERT_TRUE(fin["loss"].is_number()) << shown.out;
    ASSERT_TRUE(fin["loss_gap"].is_number()) << shown.out;
    if (id == 1) {
      EXPECT_NE(
          t.out.find(fmt::format("at the last step; final loss {:.4f}, gap {:+.4g} "
                                 "(mean over steps {}-{})",
                                 fin["loss"].get<double>(), fin["loss_gap"].get<double>(),
                                 fin["from_step"].get<int64_t>(), fin["to_step"].get<int64_t>())),
          std::string::npos)
          << t.out;
      EXPECT_NE(
          t.out.find(fmt::format("; {:.0f} tokens/s (median over {} stored steps)",
                                 speed["median"].get<double>(), speed["steps"].get<int64_t>())),
          std::string::npos)
          << t.out;
    } else {
      EXPECT_DOUBLE_EQ(got["tokens_per_s"].get<double>(), speed["median"].get<double>());
      EXPECT_DOUBLE_EQ(got["final_loss"].get<double>(), fin["loss"].get<double>());
      EXPECT_DOUBLE_EQ(got["loss_gap"].get<double>(), fin["loss_gap"].get<double>());
    }
  }
}

TEST(FinalLossDefinition, TheLastTenthOfTheStepsAndNoLossNoFigure) {
  std::vector<fp8wb::SeriesPoint> loss, ref;
  for (int64_t s = 0; s < 150; ++s) {
    loss.push_back({s, static_cast<double>(s)});
    ref.push_back({s, static_cast<double>(s) / 2});
  }
  const fp8wb::FinalLoss f = fp8wb::final_loss(loss, ref);
  EXPECT_EQ(f.from_step, 135);
  EXPECT_EQ(f.to_step, 149);
  EXPECT_EQ(f.points, 15);
  EXPECT_DOUBLE_EQ(f.loss, 142.0);  // (135 + 149) / 2
  EXPECT_DOUBLE_EQ(f.ref_loss, 71.0);
  EXPECT_DOUBLE_EQ(f.gap, 71.0);
  const fp8wb::FinalLoss none = fp8wb::final_loss({}, ref);
  EXPECT_TRUE(std::isnan(none.loss));
  EXPECT_TRUE(std::isnan(none.gap));
}

}  // namespace
