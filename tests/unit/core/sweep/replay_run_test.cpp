// Per-step amax recorded by real engine runs and replayed (replay_run.h): every step gets a
// row whatever log_interval says, and the run's own settings replayed reproduce the scales
// stored at its sampled steps bit for bit, for delayed and for current scaling; a run
// without per-step amax says so and offers its sampled steps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "fp8wb/core/replay/replay_run.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/train/trainer.h"

namespace fp8wb {
namespace {

struct StoredRun {
  std::string path;
  std::unique_ptr<RunStore> store;
  int64_t id = 0;
  ~StoredRun() {
    store.reset();
    for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
  }
};

void train_into(StoredRun& r, const RunConfig& c, const std::string& name) {
  r.path = (std::filesystem::temp_directory_path() /
            ("fp8wb-replay-" + name + "-" + std::to_string(getpid()) + ".sqlite"))
               .string();
  for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(r.path + ext);
  r.store = RunStore::open(r.path);
  r.id = r.store->create_run(name, fp8wb::RunKind::Train, run_config_json(c), "cpu");
  auto bus = std::make_shared<MetricBus>();
  bus->add(r.store->consumer());
  Trainer t(c, bus, r.id);
  t.run();
  ASSERT_EQ(t.status(), RunStatus::Finished) << t.message();
  r.store->flush();
}

RunConfig small_run(const std::string& scaling) {
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.steps = 30;
  c.stats_interval = 3;
  c.sqnr_interval = 0;
  c.log_interval = 7;  // the amax is recorded every step all the same
  c.reference = false;
  c.scaling = parse_table_name(kScalingModes, scaling).value();
  c.margin = 1;
  c.window = 4;
  c.lr = 3e-2;  // amaxes that move
  return c;
}

void expect_own_scales_reproduced(const std::string& scaling) {
  StoredRun r;
  train_into(r, small_run(scaling), scaling);
  const StepAmaxTable t = r.store->step_amax(r.id);
  ASSERT_EQ(t.steps.size(), 30u);
  ASSERT_EQ(t.tensors.size(), 9u);  // 3 layers x 3 roles
  for (size_t i = 0; i < t.steps.size(); ++i) EXPECT_EQ(t.steps[i], static_cast<int64_t>(i));
  for (float a : t.amax) EXPECT_TRUE(std::isfinite(a) && a > 0) << a;
  // The recorded amax is the one the statistics saw at the sampled steps.
  const auto stats = r.store->tensor_stats(r.id);
  size_t same = 0;
  for (const TensorMetrics& m : stats) {
    for (size_t j = 0; j < t.tensors.size(); ++j) {
      if (t.tensors[j].layer != m.layer || t.tensors[j].role != m.role) continue;
      EXPECT_EQ(t.amax[static_cast<size_t>(m.step) * 9 + j], m.amax) << m.layer << " " << m.step;
      ++same;
    }
  }
  EXPECT_EQ(same, stats.size());

  const ReplayRun run = load_replay_run(*r.store, r.id);
  EXPECT_EQ(run.run.delayed, scaling == "delayed");
  ReplayGrid g;
  g.margins = {0, 1};
  g.windows = {1, 4};
  g.algos = {AmaxAlgo::Max, AmaxAlgo::MostRecent};
  ReplayOptions o;
  o.run = run.run;
  o.samples = run.samples;
  o.stored = run.stored;
  const ReplayResult res = replay_amax(run.input, g, o);
  EXPECT_TRUE(res.own.matches) << "first difference at step " << res.own.first_step << ", "
                               << amax_tensor_label(run.input.tensors[res.own.first_tensor])
                               << ": stored " << res.own.stored << ", replayed "
                               << res.own.replayed;
  EXPECT_EQ(res.own.compared, static_cast<int64_t>(stats.size()));
  EXPECT_EQ(stats.size(), 9u * 11u);  // steps 0, 3, ..., 27 and the last, 29
  int own_cells = 0;
  for (const ReplayCell& c : res.cells) own_cells += c.is_run_setting;
  EXPECT_EQ(own_cells, scaling == "delayed" ? 1 : 0);
  bool caveat = false;
  for (const std::string& n : run.notes)
    caveat = caveat || n.find("current scaling") != std::string::npos;
  EXPECT_EQ(caveat, scaling == "current");

  // One recorded amax made 1000x larger (of sampled step 12): the check finds the first sampled
  // step whose scale it moves (12 itself under current scaling, a later one under delayed).
  ReplayInput changed = run.input;
  changed.amax[12 * 9 + 0] *= 1000.0f;
  const OwnScalesCheck c = own_scales_check(changed, run.run, run.stored);
  EXPECT_FALSE(c.matches);
  EXPECT_EQ(c.first_step, scaling == "delayed" ? 15 : 12);
  EXPECT_EQ(c.first_tensor, 0u);
}

TEST(ReplayRun, DelayedRunsOwnScalesReproducedBitForBit) {
  expect_own_scales_reproduced("delayed");
}

TEST(ReplayRun, CurrentScalingRunsOwnScalesReproducedBitForBit) {
  expect_own_scales_reproduced("current");
}

TEST(ReplayRun, ARunWithoutPerStepAmaxSaysSoAndOffersItsSampledSteps) {
  StoredRun r;
  train_into(r, small_run("delayed"), "old");
  r.store->exec_on_writer_for_testing("DELETE FROM step_amax");
  r.store->flush();
  try {
    load_replay_run(*r.store, r.id);
    FAIL() << "a run without per-step amax was replayed";
  } catch (const ReplayError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("no per-step amax"), std::string::npos) << m;
    EXPECT_NE(m.find("sampled step"), std::string::npos) << m;
    EXPECT_NE(m.find("--sampled"), std::string::npos) << m;
  }
  const ReplayRun s = load_replay_run(*r.store, r.id, "", true);
  EXPECT_TRUE(s.from_sampled_steps);
  EXPECT_EQ(s.input.tensor_count(), 9u);
  EXPECT_EQ(s.input.step_count(), r.store->tensor_stats(r.id).size() / 9);
  EXPECT_THROW(load_replay_run(*r.store, r.id, "no.such.layer", true), ReplayError);
  EXPECT_THROW(load_replay_run(*r.store, r.id + 1), ReplayError);
}

}  // namespace
}  // namespace fp8wb
