// fp8wb train as a process: the real binary killed with SIGKILL, stopped with Ctrl-C
// (SIGINT), SIGTERM or SIGHUP mid-run, its progress on a file and on a terminal.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/train/distributed.h"
#include "temp_dir_test.h"

namespace {

using fp8wb::test::Result;
using fp8wb::test::run;

class CliTrainProcess : public fp8wb::test::TempDirTest {
 protected:
  CliTrainProcess() : TempDirTest("fp8wb-cli-process") {}
};

// The binary itself, as a user's shell runs it: stdout to /dev/null, stderr to
// `stderr_fd` (else /dev/null too).
pid_t spawn(const std::vector<std::string>& args, int stderr_fd = -1) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int devnull = ::open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    dup2(stderr_fd >= 0 ? stderr_fd : devnull, STDERR_FILENO);
    execv(FP8WB_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

// Waits until the run has at least `steps` committed steps.
int64_t wait_for_steps(const std::string& db, int64_t steps) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      auto s = fp8wb::RunStore::open_read_only(db);
      const auto runs = s->runs();
      if (!runs.empty() && runs[0].last_step + 1 >= steps) return runs[0].last_step + 1;
    } catch (const std::exception&) {
      // not created yet
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// Waits (at most 30 s) until the database holds at least `runs` runs.
void wait_for_run(const std::string& db, int64_t runs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (static_cast<int64_t>(fp8wb::RunStore::open_read_only(db)->runs().size()) >= runs) return;
    } catch (const std::exception&) {
      // not created yet
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Until the database holds `runs` runs and the last of them a committed step.
void wait_for_first_step(const std::string& db, int64_t runs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      const auto all = fp8wb::RunStore::open_read_only(db)->runs();
      if (static_cast<int64_t>(all.size()) >= runs &&
          all[static_cast<size_t>(runs - 1)].last_step >= 0) {
        return;
      }
    } catch (const std::exception&) {
      // not created yet
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST_F(CliTrainProcess, SigkillMidRunLeavesASoundDatabase) {
  const pid_t pid = spawn({FP8WB_BINARY, "train", "--db", path_, "--quiet", "--set", "model=mlp",
                           "--set", "steps=1000000", "--set", "reference=false"});
  ASSERT_GT(pid, 0);
  ASSERT_GE(wait_for_steps(path_, 40), 40);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  {
    auto ro = fp8wb::RunStore::open_read_only(path_);
    EXPECT_EQ(ro->integrity_check(), "ok");
    const auto loss = ro->series(1, "loss");
    ASSERT_GE(loss.size(), 40u);
    for (size_t i = 0; i < loss.size(); ++i) EXPECT_EQ(loss[i].step, static_cast<int64_t>(i));
  }
  auto s = fp8wb::RunStore::open(path_);
  EXPECT_EQ(s->run(1)->status, fp8wb::RunStatus::Interrupted);
}

// SIGKILL at random points, again and again, on one database: while it is created, while
// a run starts, between and inside commits. After every kill the file is sound, the
// killed run reads as interrupted, and every step committed so far is still there: a
// run's committed steps never go down and have no holes. The delays are seeded: a failure
// repeats.
TEST_F(CliTrainProcess, RepeatedSigkillAtRandomPointsLosesNoCommittedStep) {
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> delay_ms(50, 1500);
  std::map<int64_t, int64_t> committed;  // run id -> last committed step seen
  int kills_after_a_commit = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 15; ++i) {
    SCOPED_TRACE("kill " + std::to_string(i + 1));
    const pid_t pid = spawn({FP8WB_BINARY, "train", "--db", path_, "--quiet", "--set", "model=mlp",
                             "--set", "steps=1000000", "--set", "reference=false"});
    ASSERT_GT(pid, 0);
    // Every other kill counts its delay from when the new run exists, and every fourth
    // from its first committed step, so that kills land mid-training also where start-up
    // is slow (a sanitizer build, a loaded machine); the others from the start, so that
    // some land while the file or the run is being created.
    const int64_t next_run = static_cast<int64_t>(committed.size()) + 1;
    if (i % 4 == 3) {
      wait_for_first_step(path_, next_run);
    } else if (i % 2 == 1) {
      wait_for_run(path_, next_run);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exited on its own with " << WEXITSTATUS(status);

    if (!std::filesystem::exists(path_)) continue;  // killed before it created the file
    std::unique_ptr<fp8wb::RunStore> ro;
    try {
      ro = fp8wb::RunStore::open_read_only(path_);
    } catch (const fp8wb::StoreError& e) {
      // Only while nothing was ever committed (killed while creating the schema).
      ASSERT_TRUE(committed.empty()) << e.what();
      continue;
    }
    ASSERT_EQ(ro->integrity_check(), "ok");
    const auto runs = ro->runs();
    ASSERT_GE(runs.size(), committed.size());
    for (const auto& r : runs) {
      SCOPED_TRACE("run " + std::to_string(r.id));
      EXPECT_EQ(r.status, fp8wb::RunStatus::Interrupted);
      EXPECT_FALSE(r.live);
      const auto seen = committed.find(r.id);
      if (seen != committed.end()) {
        EXPECT_GE(r.last_step, seen->second);
      }
      const auto loss = ro->series(r.id, "loss");
      ASSERT_EQ(static_cast<int64_t>(loss.size()), r.last_step + 1);
      for (size_t k = 0; k < loss.size(); ++k) ASSERT_EQ(loss[k].step, static_cast<int64_t>(k));
      if (r.id == runs.back().id && r.last_step >= 0 && seen == committed.end()) {
        ++kills_after_a_commit;
      }
      committed[r.id] = r.last_step;
    }
  }
  // Some kills must land mid-training, or the loop tested only start-up.
  EXPECT_GT(kills_after_a_commit, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  // And the next writer opens it and marks what the killed ones left.
  auto s = fp8wb::RunStore::open(path_);
  for (const auto& r : s->runs()) EXPECT_EQ(r.status, fp8wb::RunStatus::Interrupted);
}

// The real binary's progress, its error output a file and then a terminal (a
// pseudo-terminal): into a file plain lines, no carriage return or escape sequence, a
// line for each tenth of the run at most and one for the last step; on a terminal the
// bar, redrawn in place.
TEST_F(CliTrainProcess, ProgressIsABarOnlyOnATerminal) {
  const std::vector<std::string> args = {FP8WB_BINARY, "train",          "--db",  path_,
                                         "--set",      "model=mlp",      "--set", "steps=40",
                                         "--set",      "reference=false"};
  // Runs the binary with stderr on `fd`, reading `master` (a pty's, or -1) as it runs.
  auto run_with_stderr = [&](int fd, int master) {
    const pid_t pid = spawn(args, fd);
    std::string seen;
    int status = 0;
    for (;;) {
      if (master >= 0) {
        pollfd p{master, POLLIN, 0};
        if (poll(&p, 1, 100) > 0) {
          char buf[4096];
          const ssize_t n = read(master, buf, sizeof buf);
          if (n > 0) seen.append(buf, static_cast<size_t>(n));
          continue;
        }
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (waitpid(pid, &status, WNOHANG) == pid) break;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return seen;
  };

  const std::string log = (dir_ / "err.log").string();
  {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    run_with_stderr(fd, -1);
    ::close(fd);
  }
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_EQ(text.find('\033'), std::string::npos) << text;
  std::istringstream lines(text);
  std::string line, last;
  int step_lines = 0;
  while (std::getline(lines, line)) {
    int done = 0, total = 0;  // a count of the steps done: "12/40 steps, loss ..."
    if (std::sscanf(line.c_str(), "%d/%d steps, ", &done, &total) != 2) continue;
    ++step_lines;
    last = line;
  }
  EXPECT_GE(step_lines, 2) << text;
  EXPECT_LE(step_lines, 12) << text;  // the first step, each tenth, the last (and 30 s ticks)
  EXPECT_EQ(last.rfind("40/40 steps, loss ", 0), 0u) << text;

  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  std::filesystem::remove(path_);
  const std::string tty = run_with_stderr(slave, master);
  ::close(slave);
  ::close(master);
  EXPECT_NE(tty.find("\r["), std::string::npos) << tty;
  EXPECT_NE(tty.find("] 40/40 steps, loss "), std::string::npos) << tty;
}

// The progress gives an ETA only once 3 steps are done: one step's pace (its warm-up
// in it) says little. A 5-step run writes a line at every step.
TEST_F(CliTrainProcess, ProgressShowsAnEtaFromTheThirdStep) {
  const Result r = run({"train", "--db", path_, "--set", "model=mlp", "--set", "steps=5", "--set",
                        "reference=false"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::map<int, std::string> at;  // the progress line of each step
  std::istringstream lines(r.err);
  std::string line;
  while (std::getline(lines, line)) {
    int step = 0;
    if (std::sscanf(line.c_str(), "%d/5 steps, ", &step) == 1) at[step] = line;
  }
  ASSERT_EQ(at.size(), 5u) << r.err;
  for (int step = 1; step <= 5; ++step) {
    const bool eta = at[step].find(" ETA ") != std::string::npos;
    EXPECT_EQ(eta, step >= 3) << at[step];
  }
  EXPECT_EQ(r.err.find("--:--"), std::string::npos) << r.err;
}

// Ctrl-C stops the run after a step, keeps it as stopped and ends with exit status 130
// (128 + SIGINT, as a shell reports a command a signal ended), saying so with what was
// kept: a script or a scheduler sees that the run did not finish.
// What a run of the binary did when sent `sig` once the first run in `db` had `steps`
// committed steps: its wait status (-1: it never got there, and was killed) and its
// stderr (written to `log`).
struct Stopped {
  int status = -1;
  std::string err;
};
Stopped stop_after_steps(const std::vector<std::string>& args, const std::string& db, int64_t steps,
                         int sig, const std::string& log) {
  Stopped r;
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return r;
  const pid_t pid = spawn(args, fd);
  ::close(fd);
  if (pid <= 0) return r;
  const bool reached = wait_for_steps(db, steps) >= steps;
  kill(pid, reached ? sig : SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (reached) r.status = status;
  std::ifstream in(log);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

TEST_F(CliTrainProcess, CtrlCStopsCleanlyKeepsTheRunAndExits130) {
  const std::string weights = (dir_ / "w.safetensors").string();
  const Stopped r0 =
      stop_after_steps({FP8WB_BINARY, "train", "--db", path_, "--set", "model=mlp", "--set",
                        "steps=1000000", "--set", "reference=false", "--save-weights", weights},
                       path_, 10, SIGINT, (dir_ / "err.txt").string());
  ASSERT_NE(r0.status, -1) << "never reached 10 steps: " << r0.err;
  ASSERT_TRUE(WIFEXITED(r0.status));
  EXPECT_EQ(WEXITSTATUS(r0.status), 130);
  auto s = fp8wb::RunStore::open_read_only(path_);
  const auto r = s->run(1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, fp8wb::RunStatus::Stopped);
  EXPECT_EQ(static_cast<size_t>(r->last_step + 1), s->series(1, "loss").size());
  EXPECT_EQ(s->integrity_check(), "ok");
  const std::string& err = r0.err;
  EXPECT_NE(
      err.find("fp8wb: interrupted by SIGINT (Ctrl-C): run 1 is kept as stopped after " +
               std::to_string(r->last_step + 1) + " steps, with all it recorded, in " + path_),
      std::string::npos)
      << err;
  EXPECT_NE(err.find("no weights were written to " + weights), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(weights));
}

// SIGTERM and SIGHUP (a logout, a job scheduler) stop a run as Ctrl-C does, with exit
// status 128 + the signal.
TEST_F(CliTrainProcess, SigtermAndSighupStopLikeCtrlC) {
  int n = 0;
  for (const int sig : {SIGTERM, SIGHUP}) {
    const std::string db = (dir_ / ("sig" + std::to_string(++n) + ".sqlite")).string();
    const Stopped r = stop_after_steps({FP8WB_BINARY, "train", "--db", db, "--set", "model=mlp",
                                        "--set", "steps=1000000", "--set", "reference=false"},
                                       db, 10, sig, db + ".err");
    ASSERT_NE(r.status, -1) << "never reached 10 steps: " << r.err;
    ASSERT_TRUE(WIFEXITED(r.status)) << "signal " << sig;
    EXPECT_EQ(WEXITSTATUS(r.status), 128 + sig);
    auto s = fp8wb::RunStore::open_read_only(db);
    EXPECT_EQ(s->run(1)->status, fp8wb::RunStatus::Stopped);
  }
}

// A sweep stopped by a signal keeps what it ran, says how to go on, and exits with 128 +
// the signal as train does (it exited 0, as if the sweep had finished).
TEST_F(CliTrainProcess, ASweepStoppedBySignalsSaysHowToResumeAndExits128PlusTheSignal) {
  int n = 0;
  for (const int sig : {SIGINT, SIGTERM}) {
    const std::string db = (dir_ / ("sweep" + std::to_string(++n) + ".sqlite")).string();
    const Stopped r =
        stop_after_steps({FP8WB_BINARY, "sweep", "--db", db, "--set", "model=mlp", "--set",
                          "steps=1000000", "--set", "reference=false", "--grid", "margin=0,1"},
                         db, 5, sig, db + ".err");
    ASSERT_NE(r.status, -1) << "never reached 5 steps: " << r.err;
    ASSERT_TRUE(WIFEXITED(r.status)) << "signal " << sig;
    EXPECT_EQ(WEXITSTATUS(r.status), 128 + sig);
    auto s = fp8wb::RunStore::open_read_only(db);
    ASSERT_TRUE(s->sweep(1).has_value());
    EXPECT_EQ(s->sweep(1)->status, fp8wb::SweepStatus::Stopped);
    const std::string& err = r.err;
    EXPECT_NE(err.find("fp8wb sweep: interrupted by " +
                       std::string(sig == SIGINT ? "SIGINT (Ctrl-C)" : "SIGTERM") +
                       ": sweep 1 is kept as stopped with 0 of 2 trials finished; `fp8wb sweep "
                       "--resume 1 --db " +
                       db + "` runs the rest"),
              std::string::npos)
        << err;
  }
}

// Under --nproc the launcher, which Ctrl-C reaches as it reaches the ranks, ends as one
// process would: the ranks stop after one step alike, rank 0 keeps the run, and the exit
// status is 130. The ranks run on the CPU (Gloo): on a machine with one GPU the default
// device is the GPU, where two NCCL ranks are refused.
TEST_F(CliTrainProcess, CtrlCOnSeveralRanksExits130) {
  if (!fp8wb::distributed_backend_available("gloo")) GTEST_SKIP() << "built without Gloo";
  const std::string log = (dir_ / "err.txt").string();
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  const pid_t pid = spawn(
      {FP8WB_BINARY, "train", "--db", path_, "--nproc", "2", "-q", "--set", "model=mlp", "--set",
       "steps=1000000", "--set", "reference=false", "--set", "batch=8", "--set", "device=cpu"},
      fd);
  ::close(fd);
  ASSERT_GT(pid, 0);
  ASSERT_GE(wait_for_steps(path_, 5), 5);
  ASSERT_EQ(kill(pid, SIGINT), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  auto s = fp8wb::RunStore::open_read_only(path_);
  EXPECT_EQ(s->run(1)->status, fp8wb::RunStatus::Stopped);
  std::ifstream in(log);
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("fp8wb: interrupted by SIGINT (Ctrl-C): the 2 ranks stopped, rank 0 "
                     "keeping the run in " +
                     path_),
            std::string::npos)
      << err;
}

// Processes creating one new database at once all succeed (it raced: "table runs already
// exists", "database is locked").
TEST_F(CliTrainProcess, ConcurrentTrainsOnANewDatabase) {
  std::vector<pid_t> pids;
  for (int i = 0; i < 8; ++i) {
    pids.push_back(spawn({FP8WB_BINARY, "train", "--db", path_, "-q", "--set", "model=mlp", "--set",
                          "steps=2", "--set", "reference=false", "--set", "width=8", "--set",
                          "features=8", "--set", "outlier_channels=1"}));
  }
  for (const pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  auto s = fp8wb::RunStore::open_read_only(path_);
  EXPECT_EQ(s->runs().size(), 8u);
}

// Where the final weights go is checked before the first step, not after the last.
TEST_F(CliTrainProcess, AnUnwritableWeightsPathFailsBeforeTraining) {
  const std::string missing = (dir_ / "no" / "such" / "w.safetensors").string();
  Result r =
      run({"train", "--db", path_, "--quiet", "--set", "steps=50", "--save-weights", missing});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  r = run(
      {"train", "--db", path_, "--quiet", "--set", "steps=50", "--save-weights", dir_.string()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
  auto s = fp8wb::RunStore::open_read_only(path_);
  for (const auto& run : s->runs()) EXPECT_EQ(run.last_step, -1) << "run " << run.id << " trained";
}

}  // namespace
