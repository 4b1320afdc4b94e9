// fp8wb train while another connection holds the run database: a lock held for longer
// than SQLite's busy timeout (10 s) delays the run's writes and loses none (exit status 0,
// stored finished with every step); a lock held past the store's wait fails the run, and
// the exit status and the stored status agree. (Six writers on one database:
// run_store_lock_test.cpp, each a store with a connection of its own.)
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli_run.h"
#include "db_lock.h"
#include "fp8wb/core/store/run_store.h"
#include "temp_dir_test.h"

namespace {

using fp8wb::test::DbLock;
using fp8wb::test::lock_seconds;
using fp8wb::test::Result;
using fp8wb::test::run;

class CliStoreLock : public fp8wb::test::TempDirTest {
 protected:
  CliStoreLock() : TempDirTest("fp8wb-cli-lock") {}
  void TearDown() override {
    unsetenv("FP8WB_STORE_LOCK_WAIT_S");
    TempDirTest::TearDown();
  }
  // A tiny run's config (`steps` steps).
  std::string config(int steps) {
    const std::string cfg = (dir_ / "mlp.json").string();
    std::ofstream(cfg) << R"({"model": "mlp", "steps": )" << steps << R"(, "stats_interval": 5})";
    return cfg;
  }
};

// Takes the lock once the run has a committed step, holds it `seconds`; `last_step`: the
// run's last committed step when the lock was taken.
std::thread lock_mid_run(const std::string& db, double seconds, int64_t& last_step,
                         std::string& error) {
  return std::thread([db, seconds, &last_step, &error] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        const auto runs = fp8wb::RunStore::open_read_only(db)->runs();
        if (!runs.empty() && runs[0].last_step >= 0) {
          const DbLock lock(db, seconds);
          if (!lock.held()) error = lock.error();
          last_step = fp8wb::RunStore::open_read_only(db)->runs()[0].last_step;
          return;
        }
      } catch (const std::exception&) {
        // not created yet
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    error = "the run never stored a step";
  });
}

TEST_F(CliStoreLock, ALockHeldForTwentySecondsDelaysTheRunAndLosesNoStep) {
  constexpr int kSteps = 100;
  int64_t locked_at = -1;
  std::string error;
  std::thread locker = lock_mid_run(path_, lock_seconds(20), locked_at, error);
  const Result r = run({"train", config(kSteps), "--db", path_, "--quiet", "--json"});
  locker.join();
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_LT(locked_at, kSteps - 1) << "the run ended before the lock was taken";
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["status"], "finished");
  auto s = fp8wb::RunStore::open_read_only(path_);
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, fp8wb::RunStatus::Finished) << runs[0].message;
  const auto loss = s->series(runs[0].id, "loss");
  ASSERT_EQ(loss.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) EXPECT_EQ(loss[static_cast<size_t>(i)].step, i);
}

TEST_F(CliStoreLock, ALockPastTheWaitFailsTheRunAndTheExitStatusSaysSo) {
  setenv("FP8WB_STORE_LOCK_WAIT_S", "1", 1);
  int64_t locked_at = -1;
  std::string error;
  std::thread locker = lock_mid_run(path_, 4, locked_at, error);
  const Result r = run({"train", config(100), "--db", path_, "--quiet", "--json"});
  locker.join();
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["status"], "failed");
  EXPECT_NE(r.err.find("another connection held it for"), std::string::npos) << r.err;
  auto s = fp8wb::RunStore::open_read_only(path_);
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, fp8wb::RunStatus::Failed);
  EXPECT_NE(runs[0].message.find("another connection held it for"), std::string::npos)
      << runs[0].message;
}

}  // namespace
