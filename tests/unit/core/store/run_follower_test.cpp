// Following a run that another connection (or process) writes: read_new() returns what
// was committed since the cursor and nothing twice, reads back every field as written,
// RunFollower publishes it as batches and ends with the run's status, and a run whose
// writer died reads as interrupted (not running) even where nothing can be marked.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <thread>

#include "temp_dir_test.h"

#include "fp8wb/core/store/run_follower.h"
#include "fp8wb/core/store/run_store.h"

namespace fp8wb {
namespace {

class FollowTest : public fp8wb::test::TempDirTest {
 protected:
  FollowTest() : TempDirTest("fp8wb-follow") {}
};

MetricBatch step_batch(int64_t run, int64_t step, bool tensors) {
  MetricBatch b;
  b.run_id = run;
  StepMetrics m;
  m.step = step;
  m.loss = 4.0 - 0.01 * static_cast<double>(step);
  m.ref_loss = m.loss - 0.001;
  m.loss_gap = 0.001;
  m.grad_norm = 0.25;
  m.lr = 1e-3;
  m.tokens_per_s = 5000;
  m.step_ms = 3;
  m.mem_fp8 = 1e6 + static_cast<double>(step);  // mem_ref stays NaN: not measured
  b.steps.push_back(m);
  if (tensors) {
    TensorMetrics t;
    t.step = step;
    t.layer = "blocks.0.fc1";
    t.role = Role::Weight;
    t.amax = 0.5f + static_cast<float>(step);
    t.scale = 448.0f / t.amax;
    t.raw.numel = 4096;
    t.raw.underflow = static_cast<uint64_t>(step) + 1;
    t.raw.hist[40] = 11;
    t.map_grid.rows = 1;
    t.map_grid.cols = 2;
    t.map_rel_error = {0.25f, 0.5f};
    t.amax_history = {t.amax, 0.5f};
    b.tensors.push_back(t);
    b.sqnr.push_back({step, "blocks.0.fc1", 31.0, 22.0, std::nan("")});
  }
  b.events.push_back({step, fp8wb::RunEventKind::Notice, "step " + std::to_string(step), {}});
  return b;
}

// Roles are stored as their names; a name no role has (a damaged or newer file) is a
// StoreError naming it and the known ones, for the reader and for a follower alike.
TEST_F(FollowTest, AnUnknownStoredRoleIsRefusedByName) {
  auto w = RunStore::open(path_);
  const int64_t id = w->create_run("followed", fp8wb::RunKind::Train, "{}", "cpu");
  w->write(step_batch(id, 0, true));
  w->flush();
  {
    auto r = RunStore::open_read_only(path_);
    RunCursor c;
    const MetricBatch b = r->read_new(id, c);
    ASSERT_EQ(b.tensors.size(), 1u);
    EXPECT_EQ(b.tensors[0].role, Role::Weight);
    ASSERT_EQ(w->tensor_stats(id).size(), 1u);
    EXPECT_EQ(w->tensor_stats(id)[0].role, Role::Weight);
  }
  w->exec_on_writer_for_testing("UPDATE tensor_stats SET role = 'activation'");
  w->flush();
  auto r = RunStore::open_read_only(path_);
  RunCursor c;
  try {
    r->read_new(id, c);
    FAIL() << "an unknown role was read";
  } catch (const StoreError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown role \"activation\""), std::string::npos) << m;
    EXPECT_NE(m.find("input, weight, grad_output"), std::string::npos) << m;
  }
}

// A run's status is parsed where it is read: a name no RunStatus has reads as unknown, by
// name, never as finished (the run's other rows, and other runs, read as ever).
TEST_F(FollowTest, AnUnknownStoredStatusIsReadAsUnknownByName) {
  auto w = RunStore::open(path_);
  const int64_t id = w->create_run("odd", fp8wb::RunKind::Train, "{}", "cpu");
  w->set_status(id, RunStatus::Finished);
  w->flush();
  EXPECT_EQ(RunStore::open_read_only(path_)->run(id)->status, RunStatus::Finished);
  w->exec_on_writer_for_testing("UPDATE runs SET status = 'resting'");
  w->flush();
  const RunInfo r = *RunStore::open_read_only(path_)->run(id);
  EXPECT_NE(r.status, RunStatus::Finished);
  EXPECT_EQ(r.unknown_status, "resting");
  EXPECT_EQ(run_status_text(r), "unknown (resting)");
  EXPECT_NE(r.message.find("running, paused, finished"), std::string::npos) << r.message;
}

TEST_F(FollowTest, ReadNewReturnsEachCommitOnceWithEveryField) {
  auto w = RunStore::open(path_);
  const int64_t id = w->create_run("followed", fp8wb::RunKind::Train, "{}", "cpu");
  auto r = RunStore::open_read_only(path_);
  RunCursor c;
  for (int64_t step = 0; step < 6; ++step) w->write(step_batch(id, step, step % 2 == 0));
  w->flush();
  MetricBatch b = r->read_new(id, c);
  ASSERT_EQ(b.steps.size(), 6u);
  ASSERT_EQ(b.tensors.size(), 3u);
  ASSERT_EQ(b.sqnr.size(), 3u);
  ASSERT_EQ(b.events.size(), 6u);
  EXPECT_EQ(b.steps[5].step, 5);
  EXPECT_DOUBLE_EQ(b.steps[5].loss, 4.0 - 0.05);
  EXPECT_DOUBLE_EQ(b.steps[5].mem_fp8, 1e6 + 5);
  EXPECT_TRUE(std::isnan(b.steps[5].mem_ref));
  EXPECT_TRUE(std::isnan(b.steps[5].peak_rss));
  const TensorMetrics& t = b.tensors[2];
  EXPECT_EQ(t.step, 4);
  EXPECT_EQ(t.role, Role::Weight);
  EXPECT_FLOAT_EQ(t.amax, 4.5f);
  EXPECT_EQ(t.raw.underflow, 5u);
  EXPECT_EQ(t.raw.hist[40], 11u);
  EXPECT_EQ(t.map_grid.cols, 2);
  EXPECT_EQ(t.map_rel_error, (std::vector<float>{0.25f, 0.5f}));
  EXPECT_EQ(t.amax_history, (std::vector<float>{4.5f, 0.5f}));
  EXPECT_DOUBLE_EQ(b.sqnr[1].fprop_db, 31.0);
  EXPECT_TRUE(std::isnan(b.sqnr[1].wgrad_db));
  EXPECT_EQ(b.events[3].message, "step 3");

  // Nothing new: nothing read again.
  b = r->read_new(id, c);
  EXPECT_TRUE(b.steps.empty() && b.tensors.empty() && b.events.empty() && b.sqnr.empty());
  // New commits: only those.
  for (int64_t step = 6; step < 9; ++step) w->write(step_batch(id, step, true));
  w->flush();
  b = r->read_new(id, c);
  ASSERT_EQ(b.steps.size(), 3u);
  EXPECT_EQ(b.steps.front().step, 6);
  ASSERT_EQ(b.tensors.size(), 3u);
  EXPECT_EQ(b.tensors.front().step, 6);
  EXPECT_EQ(b.events.size(), 3u);
}

TEST_F(FollowTest, FollowerPublishesStepsAsTheyArriveAndTheEnd) {
  auto w = RunStore::open(path_);
  const int64_t id = w->create_run("followed", fp8wb::RunKind::Train, "{}", "cpu");
  struct Collect : MetricConsumer {
    std::mutex m;
    std::vector<int64_t> steps;
    bool final = false;
    RunStatus status = RunStatus::Running;
    std::string message;
    void consume(const MetricBatch& b) override {
      const std::lock_guard<std::mutex> lock(m);
      for (const auto& s : b.steps) steps.push_back(s.step);
      if (b.final) {
        final = true;
        status = b.status;
        message = b.message;
      }
    }
    size_t count() {
      const std::lock_guard<std::mutex> lock(m);
      return steps.size();
    }
  };
  auto got = std::make_shared<Collect>();
  auto bus = std::make_shared<MetricBus>();
  bus->add(got);
  RunFollower f(path_, id, RunCursor{}, bus, std::chrono::milliseconds(10));
  const auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(20); };
  for (int64_t step = 0; step < 40; ++step) {
    w->write(step_batch(id, step, step % 10 == 0));
    w->flush();
    if (step == 19) {  // the follower sees the first half while the run goes on
      const auto until = deadline();
      while (got->count() < 20 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_EQ(got->count(), 20u);
      EXPECT_FALSE(f.ended());
    }
  }
  MetricBatch end;
  end.run_id = id;
  end.final = true;
  end.status = RunStatus::Diverged;
  end.message = "loss blew up";
  w->write(end);
  w->flush();
  const auto until = deadline();
  while (!f.ended() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(f.ended());
  const std::lock_guard<std::mutex> lock(got->m);
  ASSERT_EQ(got->steps.size(), 40u);  // each step once, in order
  for (int64_t i = 0; i < 40; ++i) EXPECT_EQ(got->steps[static_cast<size_t>(i)], i);
  EXPECT_TRUE(got->final);
  EXPECT_EQ(got->status, RunStatus::Diverged);
  EXPECT_EQ(got->message, "loss blew up");
}

// A data-parallel run's sampled step: both ranks' amax and scale of a layer's input and
// weight, each value a function of (step, rank, role).
std::vector<RankScale> rank_rows(int64_t step) {
  std::vector<RankScale> out;
  for (Role role : {Role::Input, Role::Weight}) {
    for (int rank = 0; rank < 2; ++rank) {
      RankScale k;
      k.step = step;
      k.layer = "blocks.0.fc1";
      k.role = role;
      k.rank = rank;
      k.amax = 0.25f * static_cast<float>(step + 1) + static_cast<float>(rank) +
               (role == Role::Weight ? 8.0f : 0.0f);
      k.scale = 448.0f / (1.0f + static_cast<float>(step));
      out.push_back(k);
    }
  }
  return out;
}

void expect_rank_rows(const std::vector<RankScale>& got, int64_t from, int64_t to) {
  std::vector<RankScale> want;
  for (int64_t s = from; s < to; ++s) {
    for (const RankScale& k : rank_rows(s)) want.push_back(k);
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].step, want[i].step) << i;
    EXPECT_EQ(got[i].layer, want[i].layer) << i;
    EXPECT_EQ(got[i].role, want[i].role) << i;
    EXPECT_EQ(got[i].rank, want[i].rank) << i;
    EXPECT_EQ(got[i].amax, want[i].amax) << i;
    EXPECT_EQ(got[i].scale, want[i].scale) << i;
  }
}

// Every rank's scales come with read_new(), each row once, and a follower publishes them
// while the run goes on, also from a commit that holds nothing else.
TEST_F(FollowTest, EveryRanksScalesArriveOnceAndLive) {
  auto w = RunStore::open(path_);
  const int64_t id = w->create_run("ranks", fp8wb::RunKind::Train, "{}", "cpu");
  auto r = RunStore::open_read_only(path_);
  RunCursor c;
  for (int64_t step = 0; step < 3; ++step) {
    MetricBatch b = step_batch(id, step, true);
    b.ranks = rank_rows(step);
    w->write(b);
  }
  w->flush();
  MetricBatch b = r->read_new(id, c);
  expect_rank_rows(b.ranks, 0, 3);
  b = r->read_new(id, c);
  EXPECT_TRUE(b.ranks.empty());
  for (int64_t step = 3; step < 5; ++step) {
    MetricBatch n = step_batch(id, step, true);
    n.ranks = rank_rows(step);
    w->write(n);
  }
  w->flush();
  b = r->read_new(id, c);
  expect_rank_rows(b.ranks, 3, 5);

  struct Collect : MetricConsumer {
    std::mutex m;
    std::vector<RankScale> ranks;
    void consume(const MetricBatch& b) override {
      const std::lock_guard<std::mutex> lock(m);
      ranks.insert(ranks.end(), b.ranks.begin(), b.ranks.end());
    }
    size_t count() {
      const std::lock_guard<std::mutex> lock(m);
      return ranks.size();
    }
  };
  auto got = std::make_shared<Collect>();
  auto bus = std::make_shared<MetricBus>();
  bus->add(got);
  RunFollower f(path_, id, c, bus, std::chrono::milliseconds(10));
  const auto wait_for = [&](size_t n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (got->count() < n && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  for (int64_t step = 5; step < 9; ++step) {
    MetricBatch n;  // only the ranks' rows: nothing else new in this commit
    n.run_id = id;
    n.ranks = rank_rows(step);
    w->write(n);
    w->flush();
    wait_for(static_cast<size_t>(step - 4) * 4);
    EXPECT_EQ(got->count(), static_cast<size_t>(step - 4) * 4) << "step " << step;
    EXPECT_FALSE(f.ended());
  }
  w->set_status(id, RunStatus::Finished);
  w->flush();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!f.ended() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(f.ended());
  const std::lock_guard<std::mutex> lock(got->m);
  expect_rank_rows(got->ranks, 5, 9);
}

// A writer in a child process, killed with SIGKILL: readers (also read-only ones, which
// mark nothing) see the run as interrupted, and a follower ends with that.
TEST_F(FollowTest, AKilledWriterReadsAsInterrupted) {
  { RunStore::open(path_); }  // the schema, before the child writes
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    auto w = RunStore::open(path_);
    const int64_t id = w->create_run("doomed", fp8wb::RunKind::Train, "{}", "cpu");
    w->write(step_batch(id, 0, true));
    w->flush();
    const char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(3);
    for (;;) pause();
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  auto r = RunStore::open_read_only(path_);
  auto runs = r->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, RunStatus::Running);
  EXPECT_TRUE(runs[0].live);

  struct Final : MetricConsumer {
    std::atomic<int> status{-1};
    void consume(const MetricBatch& b) override {
      if (b.final) status = static_cast<int>(b.status);
    }
  };
  auto fin = std::make_shared<Final>();
  auto bus = std::make_shared<MetricBus>();
  bus->add(fin);
  RunFollower f(path_, runs[0].id, RunCursor{}, bus, std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(f.ended());  // the writer lives: the run goes on

  kill(child, SIGKILL);
  int st = 0;
  waitpid(child, &st, 0);
  runs = r->runs();
  EXPECT_EQ(runs[0].status, RunStatus::Interrupted);
  EXPECT_FALSE(runs[0].live);
  EXPECT_EQ(runs[0].last_step, 0);  // what was committed stays
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!f.ended() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(fin->status.load(), static_cast<int>(RunStatus::Interrupted));
}

}  // namespace
}  // namespace fp8wb
