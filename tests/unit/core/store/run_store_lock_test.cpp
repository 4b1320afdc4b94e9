// The run store when another connection holds the database: writers on one file, and a
// lock held longer than SQLite's busy timeout (10 s), lose no step; a run is stored
// 'finished' only with every step; only a lock held past the store's wait fails the
// writes, saying so, and nothing queued after that failure is written.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "db_lock.h"
#include "temp_dir_test.h"

#include "fp8wb/core/store/run_store.h"

namespace fp8wb {
namespace {

using test::DbLock;
using test::lock_seconds;

class RunStoreLockTest : public test::TempDirTest {
 protected:
  RunStoreLockTest() : TempDirTest("fp8wb-store-lock") {}
};

MetricBatch step_batch(int64_t run, int64_t step) {
  MetricBatch b;
  b.run_id = run;
  StepMetrics m;
  m.step = step;
  m.loss = 3.0 / (1.0 + static_cast<double>(step));
  m.ref_loss = m.loss;
  m.loss_gap = 0;
  m.grad_norm = 0.5;
  m.lr = 1e-3;
  m.tokens_per_s = 1000;
  m.step_ms = 2.5;
  b.steps.push_back(m);
  TensorMetrics t;
  t.step = step;
  t.layer = "fc1";
  t.role = Role::Input;
  t.amax = 1.0f + static_cast<float>(step);
  t.scale = 448.0f / t.amax;
  t.raw.numel = 64;
  t.map_grid.rows = 4;
  t.map_grid.cols = 4;
  t.map_rel_error.assign(16, 0.25f);
  b.tensors.push_back(t);
  return b;
}

MetricBatch final_batch(int64_t run, int64_t step) {
  MetricBatch b;
  b.run_id = run;
  b.final = true;
  b.status = RunStatus::Finished;
  b.events.push_back({step, fp8wb::RunEventKind::Finished, "", {}});
  return b;
}

// Every step 0..steps-1 of the run is stored, once.
void expect_every_step(const RunStore& s, int64_t id, int64_t steps) {
  const auto loss = s.series(id, "loss");
  ASSERT_EQ(static_cast<int64_t>(loss.size()), steps) << "run " << id;
  for (int64_t i = 0; i < steps; ++i) EXPECT_EQ(loss[static_cast<size_t>(i)].step, i);
  EXPECT_EQ(static_cast<int64_t>(s.tensor_stats(id).size()), steps) << "run " << id;
}

// Six writers (each a store of its own: a connection each, as six processes have) write
// runs on one database while another connection holds it for longer than the 10 s that
// SQLite's busy timeout waits: every run ends finished with every step.
TEST_F(RunStoreLockTest, SixWritersAndALongLockLoseNoStep) {
  constexpr int kWriters = 6;
  constexpr int64_t kSteps = 400;
  RunStore::open(path_);  // the file made, so that the lock below has a database to hold
  std::atomic<int> started{0};
  std::vector<int64_t> ids(kWriters, 0);
  std::vector<std::string> errors(kWriters);
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      try {
        auto s = RunStore::open(path_);
        ids[w] = s->create_run("writer" + std::to_string(w), fp8wb::RunKind::Train, "{}", "cpu");
        ++started;
        for (int64_t step = 0; step < kSteps; ++step) {
          s->write(step_batch(ids[w], step));
          if (step % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        s->write(final_batch(ids[w], kSteps - 1));
        s->flush();
      } catch (const std::exception& e) {
        errors[w] = e.what();
      }
    });
  }
  while (started < kWriters) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  {
    const DbLock lock(path_, lock_seconds(12));
    ASSERT_TRUE(lock.held()) << lock.error();
  }
  for (auto& t : writers) t.join();
  for (const auto& e : errors) EXPECT_TRUE(e.empty()) << e;
  auto s = RunStore::open_read_only(path_);
  ASSERT_EQ(s->runs().size(), static_cast<size_t>(kWriters));
  for (const RunInfo& r : s->runs()) {
    EXPECT_EQ(r.status, RunStatus::Finished) << r.name << ": " << r.message;
    expect_every_step(*s, r.id, kSteps);
  }
  EXPECT_EQ(s->integrity_check(), "ok");
}

// A run's writes while another connection holds the database for 20 s wait for it: the
// run ends finished with every step, none lost.
TEST_F(RunStoreLockTest, ALockHeldForTwentySecondsLosesNoStep) {
  auto s = RunStore::open(path_);
  const int64_t id = s->create_run("held", fp8wb::RunKind::Train, "{}", "cpu");
  for (int64_t step = 0; step < 10; ++step) s->write(step_batch(id, step));
  s->flush();
  {
    const DbLock lock(path_, lock_seconds(20));
    ASSERT_TRUE(lock.held()) << lock.error();
    for (int64_t step = 10; step < 300; ++step) s->write(step_batch(id, step));
    s->write(final_batch(id, 299));
  }
  EXPECT_NO_THROW(s->flush());
  s.reset();
  auto ro = RunStore::open_read_only(path_);
  EXPECT_EQ(ro->run(id)->status, RunStatus::Finished) << ro->run(id)->message;
  expect_every_step(*ro, id, 300);
}

// The buffer is bounded: with the database locked, a writer that fills it waits (its
// write() returns only when the writer thread has made room), then every step is stored.
TEST_F(RunStoreLockTest, AFullBufferMakesTheWriterWaitNotGrow) {
  auto s = RunStore::open(path_);
  s->set_write_buffer_for_testing(64 << 10, std::chrono::seconds(60));
  const int64_t id = s->create_run("bounded", fp8wb::RunKind::Train, "{}", "cpu");
  std::atomic<int64_t> written{0};
  std::thread producer;
  {
    const DbLock lock(path_, lock_seconds(3));
    ASSERT_TRUE(lock.held()) << lock.error();
    producer = std::thread([&] {
      for (int64_t step = 0; step < 2000; ++step) {
        s->write(step_batch(id, step));
        ++written;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    ASSERT_FALSE(lock.released());
    // About 64 KiB of batches of some hundred bytes each: far fewer than 2000.
    EXPECT_GT(written.load(), 10);
    EXPECT_LT(written.load(), 1000) << "the writes did not wait for room";
  }
  producer.join();
  s->write(final_batch(id, 1999));
  s->flush();
  EXPECT_EQ(s->run(id)->status, RunStatus::Finished);
  expect_every_step(*s, id, 2000);
}

// A lock held longer than the store waits fails the writes, saying why; the run's final
// status, queued behind the lost steps, is not written: the run is stored failed, as the
// process says, never 'finished' without its steps.
TEST_F(RunStoreLockTest, ALockPastTheWaitFailsTheRunClearly) {
  auto s = RunStore::open(path_);
  s->set_write_buffer_for_testing(RunStore::kWriteBufferBytes, std::chrono::seconds(1));
  const int64_t id = s->create_run("outlasted", fp8wb::RunKind::Train, "{}", "cpu");
  for (int64_t step = 0; step < 10; ++step) s->write(step_batch(id, step));
  s->flush();
  std::string what;
  {
    const DbLock lock(path_, 4);
    ASSERT_TRUE(lock.held()) << lock.error();
    try {
      for (int64_t step = 10; step < 100; ++step) s->write(step_batch(id, step));
      s->write(final_batch(id, 99));
      s->flush();
    } catch (const StoreError& e) {
      what = e.what();
    }
  }
  EXPECT_NE(what.find("database is locked: another connection held it for"), std::string::npos)
      << what;
  EXPECT_NE(what.find("longer than the run store waits (1 s"), std::string::npos) << what;
  EXPECT_THROW(s->write(step_batch(id, 100)), StoreError);  // and it stays failed
  s.reset();
  auto ro = RunStore::open_read_only(path_);
  const auto r = ro->run(id);
  EXPECT_EQ(r->status, RunStatus::Failed);
  EXPECT_NE(r->message.find("another connection held it"), std::string::npos) << r->message;
  EXPECT_EQ(ro->series(id, "loss").size(), 10u);  // what was committed stays
}

}  // namespace
}  // namespace fp8wb
