// Sweeps: a small grid on the CPU finishes with every child run in the store; the grid
// points' figures equal the runs' own; an interrupted sweep resumes without rerunning
// finished trials; an invalid grid is refused, naming the field, before anything runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/sweep.h"

namespace fp8wb {
namespace {

std::string temp_db(const char* name) {
  const auto p = std::filesystem::temp_directory_path() /
                 (std::string("fp8wb-sweep-") + name + "-" + std::to_string(getpid()) + ".sqlite");
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(p.string() + ext);
  return p.string();
}

SweepSpec small_spec() {
  SweepSpec s;
  s.name = "small";
  s.base.model = ModelKind::Mlp;
  s.base.steps = 12;
  s.base.stats_interval = 4;
  s.base.reference = true;
  s.axes = {parse_grid("margin=0,1"), parse_grid("window=1,4")};
  return s;
}

double tail_mean(const std::vector<SeriesPoint>& s) {
  const size_t from = s.size() - std::max<size_t>(1, s.size() / 10);
  double sum = 0;
  for (size_t i = from; i < s.size(); ++i) sum += s[i].value;
  return sum / static_cast<double>(s.size() - from);
}

TEST(Sweep, FinishesWithEveryChildRunAndItsFigures) {
  const std::string path = temp_db("small");
  auto store = RunStore::open(path);
  SweepRunner r(small_spec(), *store, 2);
  ASSERT_EQ(r.trials().size(), 4u);
  std::atomic<int> ended{0};
  r.run([&](size_t, RunStatus s) {
    EXPECT_EQ(s, RunStatus::Finished);
    ++ended;
  });
  EXPECT_EQ(ended.load(), 4);
  EXPECT_EQ(store->sweep(r.sweepId())->status, fp8wb::SweepStatus::Finished);
  int children = 0;
  for (const RunInfo& run : store->runs()) {
    if (run.parent_sweep != r.sweepId()) continue;
    ++children;
    EXPECT_EQ(run.status, RunStatus::Finished);
    EXPECT_EQ(run.last_step, 11);
  }
  EXPECT_EQ(children, 4);
  // The heatmap's figures are the runs' own.
  const auto points = sweep_points(*store, r.sweepId());
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].values, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(points[3].values, (std::vector<std::string>{"1", "4"}));
  for (const SweepPoint& p : points) {
    ASSERT_EQ(p.run_ids.size(), 1u);
    EXPECT_DOUBLE_EQ(p.final_loss, tail_mean(store->series(p.run_ids[0], "loss")));
    EXPECT_DOUBLE_EQ(p.loss_gap, tail_mean(store->series(p.run_ids[0], "loss_gap")));
    double sat = 0;
    const auto ts = store->tensor_stats(p.run_ids[0]);
    for (const auto& t : ts)
      sat += 100.0 * static_cast<double>(t.raw.saturated) /
             static_cast<double>(t.raw.numel - t.raw.nonfinite);
    EXPECT_NEAR(p.saturated_pct, sat / static_cast<double>(ts.size()), 1e-12);
  }
  store.reset();
  std::filesystem::remove(path);
}

// Trials side by side give the numbers they give one at a time, to the bit: each trial's
// model is built from its own seed, whatever else runs. Both with the same threads per
// trial (a sum split over more threads rounds differently: a 16-core machine gives one
// trial alone 16 and three side by side 5 each).
TEST(Sweep, TrialsSideBySideGiveTheSameNumbersAsOneAtATime) {
  std::map<size_t, std::vector<double>> losses[2];
  for (int parallel : {1, 2}) {
    const std::string path = temp_db(parallel == 1 ? "serial" : "parallel");
    auto store = RunStore::open(path);
    SweepSpec s = small_spec();
    s.base.model = ModelKind::Gpt;
    s.base.d_model = 256;  // models that take a while to build, so that builds overlap
    s.base.heads = 4;
    s.base.layers = 4;
    s.base.context = 16;
    s.base.batch = 2;
    s.base.steps = 2;
    s.axes = {parse_grid("margin=0,1,2"), parse_grid("window=1,4")};
    SweepRunner r(s, *store, parallel == 1 ? 1 : 3);
    r.setThreadsPerTrial(2);
    r.run();
    for (const RunInfo& run : store->runs()) {
      for (size_t t = 0; t < r.trials().size(); ++t) {
        if (run.name != r.trials()[t].config.name) continue;
        for (const SeriesPoint& p : store->series(run.id, "loss"))
          losses[parallel - 1][t].push_back(p.value);
      }
    }
    store.reset();
    std::filesystem::remove(path);
  }
  ASSERT_EQ(losses[0].size(), 6u);
  for (const auto& [t, serial] : losses[0]) {
    ASSERT_EQ(serial.size(), 2u);
    EXPECT_EQ(losses[1][t], serial) << "trial " << t;
  }
}

TEST(Sweep, InterruptedSweepResumesWithoutRerunningFinishedTrials) {
  const std::string path = temp_db("resume");
  auto store = RunStore::open(path);
  int64_t id = 0;
  {
    SweepRunner r(small_spec(), *store, 1);
    id = r.sweepId();
    r.run([&](size_t, RunStatus) { r.stop(); });  // interrupted after the first trial
    EXPECT_EQ(store->sweep(id)->status, fp8wb::SweepStatus::Stopped);
  }
  auto resumed = SweepRunner::resume(*store, id, 2);
  EXPECT_EQ(resumed->skipped(), 1u);
  std::atomic<int> ran{0};
  resumed->run([&](size_t, RunStatus) { ++ran; });
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(store->sweep(id)->status, fp8wb::SweepStatus::Finished);
  std::map<std::string, int> finished;
  for (const RunInfo& run : store->runs()) {
    if (run.parent_sweep == id && run.status == RunStatus::Finished) finished[run.name]++;
  }
  EXPECT_EQ(finished.size(), 4u);
  for (const auto& [name, n] : finished) EXPECT_EQ(n, 1) << name << " ran twice";
  store.reset();
  std::filesystem::remove(path);
}

// A run is of a trial by the trial's name, or that name with " #k" (k >= 2) after it: a
// trial run again after an interruption; where the name was cut to make room, the one
// trial it begins.
TEST(Sweep, ARunAgainIsOfItsTrial) {
  SweepSpec s = small_spec();
  const std::vector<SweepTrial> trials = expand_sweep(s);
  const std::string& name = trials[1].config.name;
  EXPECT_EQ(sweep_trial_of_run(trials, name), 1u);
  EXPECT_EQ(sweep_trial_of_run(trials, name + " #2"), 1u);
  EXPECT_EQ(sweep_trial_of_run(trials, name + " #12"), 1u);
  for (const std::string other : {name + " #1", name + " #0", name + " #", name + " #2x",
                                  name + "#2", std::string("small"), std::string()})
    EXPECT_EQ(sweep_trial_of_run(trials, other), trials.size()) << other;
  // Trials' names kMaxRunNameLength long: " #2" takes the place of their last 3 characters.
  s.axes = {parse_grid("margin=0,1")};
  const size_t rest = expand_sweep(s)[0].config.name.size() - s.name.size();
  s.name = std::string(kMaxRunNameLength - rest, 'n');
  const std::vector<SweepTrial> full = expand_sweep(s);
  ASSERT_EQ(full[1].config.name.size(), kMaxRunNameLength);
  const std::string cut = full[1].config.name.substr(0, kMaxRunNameLength - 3) + " #2";
  EXPECT_EQ(sweep_trial_of_run(full, cut), 1u);
}

TEST(Sweep, InvalidGridIsRefusedBeforeAnyTrial) {
  const std::string path = temp_db("invalid");
  auto store = RunStore::open(path);
  SweepSpec s = small_spec();
  s.axes = {parse_grid("margin=0,1"), parse_grid("window=1,-3")};
  try {
    SweepRunner r(s, *store);
    FAIL() << "an invalid grid was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("window"), std::string::npos) << e.what();
  }
  s.axes = {parse_grid("recipe=rowwise")};  // with delayed scaling: an invalid combination
  EXPECT_THROW(SweepRunner(s, *store), std::invalid_argument);
  s.axes = {parse_grid("nosuchfield=1")};
  EXPECT_THROW(SweepRunner(s, *store), std::invalid_argument);
  EXPECT_THROW(parse_grid("margin"), std::invalid_argument);
  EXPECT_THROW(parse_grid("margin=1,,2"), std::invalid_argument);
  // Fields every trial has set for it: a grid on them would only relabel one trial.
  for (const char* axis : {"name=a,b", "on_nonfinite=skip,stop", "seed=1,2", "weights=a.pt"}) {
    s.axes = {parse_grid(axis)};
    try {
      expand_sweep(s);
      ADD_FAILURE() << "a grid on " << axis << " was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string key = std::string(axis).substr(0, std::string(axis).find('='));
      EXPECT_NE(std::string(e.what()).find("'" + key + "'"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(store->sweeps().empty());
  EXPECT_TRUE(store->runs().empty());
  store.reset();
  std::filesystem::remove(path);
}

TEST(Sweep, DuplicateValuesAndHugeGridsAreRefused) {
  try {
    parse_grid("margin=0,1,0");
    FAIL() << "a value given twice was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("twice"), std::string::npos) << e.what();
  }
  // 1000^3 points: refused by its size, before a trial is built.
  SweepSpec s = small_spec();
  for (const char* key : {"lr", "weight_decay", "min_lr_ratio"}) {
    std::string text = std::string(key) + "=";
    for (int i = 1; i <= 1000; ++i) text += (i > 1 ? "," : "") + std::to_string(i * 1e-4);
    s.axes.push_back(parse_grid(text));
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    expand_sweep(s);
    FAIL() << "a 10^9-trial grid was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("trials"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

// However many trials are asked for side by side, and with however many threads each,
// their compute threads together stay within OpenBLAS's limit (past it, it crashed):
// the trials beyond it wait their turn.
TEST(Sweep, TrialsSideBySideStayWithinTheBlasThreadLimit) {
  const int limit = blas_thread_limit();
  if (limit <= 0) GTEST_SKIP() << "the BLAS linked in states no thread limit";
  const std::string path = temp_db("blas");
  auto store = RunStore::open(path);
  SweepSpec s = small_spec();
  s.seeds = 300;  // 1200 trials
  for (const int parallel : {1, 2, limit, limit + 1, 128, 1024}) {
    SweepRunner r(s, *store, parallel);
    for (const int threads : {0, 1, 4}) {
      r.setThreadsPerTrial(threads);
      const SweepRunner::Plan p = r.plan();
      const int per = threads > 0 ? threads : 1;
      EXPECT_LE(p.side_by_side * std::max(1, p.threads), std::max(limit, p.threads))
          << parallel << " x " << threads;
      EXPECT_EQ(p.side_by_side, std::min(parallel, limit / per)) << parallel << " x " << threads;
      EXPECT_EQ(p.blas_capped, parallel > limit / per) << parallel << " x " << threads;
    }
  }
  store.reset();
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
}

// The store filling up mid-sweep: the sweep stops with the reason, its summary still
// reads, and no trainer is touched after it is gone (a failed trial left the active set).
TEST(Sweep, AFullDiskStopsTheSweepCleanly) {
  const std::string path = temp_db("full");
  setenv("FP8WB_STORE_MAX_PAGES", "60", 1);
  auto store = RunStore::open(path);
  unsetenv("FP8WB_STORE_MAX_PAGES");
  SweepSpec s = small_spec();
  s.base.steps = 400;
  s.base.stats_interval = 1;
  s.axes = {parse_grid("margin=0,1,2,3")};
  int64_t sweep_id = 0;
  {
    SweepRunner r(s, *store, 2);
    sweep_id = r.sweepId();
    try {
      r.run();
      FAIL() << "the sweep finished on a full disk";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("disk full"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(sweep_points(*store, sweep_id));
  for (const RunInfo& r : store->runs()) EXPECT_NE(r.status, RunStatus::Running) << r.id;
  store.reset();
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
}

}  // namespace
}  // namespace fp8wb

// A stored sweep's seeds that are no whole number of int's range (a fraction, 3.3e25, a
// number beyond int) are refused by name, not converted (found by the fuzzer).
TEST(Sweep, StoredSeedsThatAreNoWholeNumberAreRefused) {
  for (const char* seeds : {"3.3e25", "1.5", "4294967296", "-9999999999", "\"2\""}) {
    const std::string text = std::string("{\"name\": \"s\", \"seeds\": ") + seeds +
                             ", \"base\": {}, \"axes\": [{\"key\": \"margin\", \"values\": "
                             "[\"0\", \"1\"]}]}";
    EXPECT_THROW(fp8wb::sweep_from_json(text), std::invalid_argument) << seeds;
  }
  const fp8wb::SweepSpec ok = fp8wb::sweep_from_json(
      "{\"name\": \"s\", \"seeds\": 2, \"base\": {}, \"axes\": [{\"key\": \"margin\", "
      "\"values\": [\"0\", \"1\"]}]}");
  EXPECT_EQ(ok.seeds, 2);
}
