// fp8wb train --nproc: ranks as processes of the real binary (Gloo on the CPU): a run of
// two ranks lands in the database once with every rank's scales; a rank killed mid-run
// fails the run with a clear error and nothing hangs, and the stored run names the rank
// that died (or stopped answering) and how; a port in use and a batch that does not split
// are refused by name.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli_run.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/train/comm_bench.h"
#include "fp8wb/core/train/distributed.h"
#include "fp8wb/core/train/trainer.h"
#include "rank_launcher.h"
#include "temp_dir.h"

namespace {

using fp8wb::test::Result;
using fp8wb::test::run;

class CliRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fp8wb::distributed_backend_available("gloo")) GTEST_SKIP() << "built without Gloo";
    dir_ = std::filesystem::temp_directory_path() /
           ("fp8wb-ranks-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fp8wb::test::remove_tree(dir_.string());
    std::filesystem::create_directories(dir_);
    db_ = (dir_ / "runs.sqlite").string();
  }
  void TearDown() override {
    if (!dir_.empty()) fp8wb::test::remove_tree(dir_.string());
  }
  std::filesystem::path dir_;
  std::string db_;
};

const std::vector<std::string> kTiny = {
    "--set", "d_model=32",      "--set", "layers=1",         "--set", "heads=2",
    "--set", "context=32",      "--set", "batch=8",          "--set", "reference=false",
    "--set", "sqnr_interval=0", "--set", "stats_interval=5", "-q"};

// The variables torchrun sets for one of `world` ranks meeting at 127.0.0.1:port.
std::vector<std::pair<std::string, std::string>> rank_env(int rank, int world,
                                                          const std::string& port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", port}};
}

// The binary with stdout and stderr into files and these variables set; returns its pid.
pid_t spawn(std::vector<std::string> args, const std::string& out, const std::string& err,
            const std::vector<std::pair<std::string, std::string>>& env = {}) {
  args.insert(args.begin(), FP8WB_BINARY);
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, STDOUT_FILENO);
    dup2(e, STDERR_FILENO);
    execv(FP8WB_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for the process at most `seconds`; returns its status, or kills it and fails.
int wait_for(pid_t pid, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "still running after " << seconds << " s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Whether something listens on TCP `port` of this machine within `seconds`, as
// /proc/net/tcp and tcp6 say (state 0A), without connecting to it.
bool wait_listening(int port, int seconds) {
  char hex[8];
  std::snprintf(hex, sizeof hex, ":%04X", port);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
      std::ifstream f(table);
      std::string line;
      std::getline(f, line);  // the header
      while (std::getline(f, line)) {
        std::istringstream fields(line);
        std::string slot, local, remote, state;
        fields >> slot >> local >> remote >> state;
        if (state == "0A" && local.size() > 5 && local.compare(local.size() - 5, 5, hex) == 0) {
          return true;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Whether the database's first run reaches `step` within two minutes.
bool wait_for_steps(const std::string& db, int64_t step) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    try {
      auto s = fp8wb::RunStore::open_read_only(db);
      const auto runs = s->runs();
      if (!runs.empty() && runs[0].last_step >= step) return true;
    } catch (const std::exception&) {
    }
  }
  return false;
}

// The child of `parent` whose environment says RANK=<rank>.
pid_t rank_process(pid_t parent, int rank) {
  std::ifstream children("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) +
                         "/children");
  pid_t child = 0;
  while (children >> child) {
    const std::string env = slurp("/proc/" + std::to_string(child) + "/environ");
    const std::string want = "RANK=" + std::to_string(rank);
    size_t at = 0;
    while (at < env.size()) {
      const size_t end = env.find('\0', at);
      if (env.compare(at, end - at, want) == 0) return child;
      if (end == std::string::npos) break;
      at = end + 1;
    }
  }
  return 0;
}

// A long run of two ranks (exchanges waiting at most `rank_timeout` seconds) and, three
// steps in, `sig` to rank `rank`; then the launcher's end (at most 60 s; a stopped rank is
// killed afterwards, where the launcher did not). The launcher's stderr goes to `err`.
struct Signalled {
  pid_t pid = 0;    // the rank's; 0: no third step came, or no such rank
  int status = -1;  // the launcher's
  double took = 0;  // seconds from the signal to the launcher's end
};
Signalled signal_a_rank(const std::string& db, const std::string& err, int rank, int sig,
                        int rank_timeout) {
  std::vector<std::string> args = {
      "train",         "--db",  db,
      "--nproc",       "2",     "--set",
      "steps=1000000", "--set", "rank_timeout=" + std::to_string(rank_timeout)};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const pid_t launcher = spawn(args, err + ".out", err);
  Signalled s;
  if (wait_for_steps(db, 3)) s.pid = rank_process(launcher, rank);
  if (s.pid <= 0 || kill(s.pid, sig) != 0) {
    kill(launcher, SIGTERM);
    wait_for(launcher, 60);
    s.pid = 0;
    return s;
  }
  const auto sent = std::chrono::steady_clock::now();
  s.status = wait_for(launcher, 60);
  s.took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  if (sig == SIGSTOP) kill(s.pid, SIGKILL);
  return s;
}

// A TCP socket bound to a free port of `addr` (listening when asked: connections then
// complete in the kernel though nothing answers them); its port into `port`.
int bound_socket(uint32_t addr, bool listening, int& port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(addr);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  if (listening) {
    EXPECT_EQ(listen(fd, 16), 0);
  }
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}

TEST_F(CliRanks, TwoRanksWriteOneRunWithEveryRanksScales) {
  std::vector<std::string> args = {"train", "--db", db_, "--nproc", "2", "--set", "steps=12"};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const int st = wait_for(spawn(args, out, err), 120);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << slurp(out) << slurp(err);
  EXPECT_NE(slurp(out).find("run 1 finished after 12 steps"), std::string::npos) << slurp(out);
  auto s = fp8wb::RunStore::open_read_only(db_);
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 1u);  // rank 0 alone writes
  EXPECT_EQ(runs[0].status, fp8wb::RunStatus::Finished);
  EXPECT_EQ(s->series(runs[0].id, "loss").size(), 12u);
  const auto events = s->events(runs[0].id);
  ASSERT_FALSE(events.empty());
  EXPECT_NE(events[0].message.find("2 ranks (Gloo), batch 4 each"), std::string::npos)
      << events[0].message;
  // Steps 0, 5 and 10 sampled: each FP8 layer's three roles, for both ranks.
  const auto ranks = s->rank_scales(runs[0].id);
  const auto stats = s->tensor_stats(runs[0].id);
  ASSERT_FALSE(stats.empty());
  EXPECT_EQ(ranks.size(), 2 * stats.size());
  for (const auto& r : ranks) EXPECT_TRUE(r.rank == 0 || r.rank == 1);
  // The JSON export holds them too.
  const Result x = run({"runs", "export", "1", "--db", db_, "--format", "json"});
  ASSERT_EQ(x.rc, 0) << x.err;
  const auto j = nlohmann::json::parse(x.out);
  ASSERT_EQ(j["rank_scales"].size(), ranks.size());
  EXPECT_EQ(j["rank_scales"][0]["layer"], ranks[0].layer);
  EXPECT_EQ(j["rank_scales"][0]["rank"], ranks[0].rank);
  EXPECT_FLOAT_EQ(j["rank_scales"][0]["scale"].get<float>(), ranks[0].scale);
}

TEST_F(CliRanks, AKilledRankFailsTheRunAndNothingHangs) {
  // A few steps in, rank 1 dies.
  const std::string err = (dir_ / "err").string();
  const Signalled k = signal_a_rank(db_, err, 1, SIGKILL, 30);
  ASSERT_GT(k.pid, 0) << slurp(err);
  const pid_t rank1 = k.pid;
  ASSERT_TRUE(WIFEXITED(k.status));
  EXPECT_NE(WEXITSTATUS(k.status), 0);
  EXPECT_LT(k.took, 30.0);
  const std::string e = slurp(err);
  EXPECT_NE(e.find("rank 1 (pid " + std::to_string(rank1) + ") was killed by signal 9"),
            std::string::npos)
      << e;
  auto s = fp8wb::RunStore::open_read_only(db_);
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, fp8wb::RunStatus::Failed);
  EXPECT_NE(runs[0].message.find("with the other ranks failed"), std::string::npos)
      << runs[0].message;
  // The stored message names the rank that died and how, for whoever reads the run later.
  EXPECT_NE(
      runs[0].message.find("rank 1 (pid " + std::to_string(rank1) + ") was killed by signal 9"),
      std::string::npos)
      << runs[0].message;
  const Result shown = run({"runs", "show", "1", "--db", db_});
  ASSERT_EQ(shown.rc, 0) << shown.err;
  EXPECT_NE(shown.out.find("rank 1 (pid " + std::to_string(rank1) + ") was killed by signal 9"),
            std::string::npos)
      << shown.out;
}

// Rank 0, which writes the run, killed: the run failed (not interrupted, as a writer
// killed alone reads), and its message says which rank died and how (the launcher
// records it).
TEST_F(CliRanks, AKilledRankZeroIsNamedInItsFailedRun) {
  const std::string err = (dir_ / "err").string();
  const Signalled k = signal_a_rank(db_, err, 0, SIGKILL, 30);
  ASSERT_GT(k.pid, 0) << slurp(err);
  const pid_t rank0 = k.pid;
  ASSERT_TRUE(WIFEXITED(k.status));
  EXPECT_NE(WEXITSTATUS(k.status), 0);
  auto s = fp8wb::RunStore::open_read_only(db_);
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, fp8wb::RunStatus::Failed);
  const std::string m = runs[0].message;
  EXPECT_EQ(m.find("rank 0 (pid " + std::to_string(rank0) + ") was killed by signal 9"), 0u) << m;
  EXPECT_NE(m.find("the process writing this run ended without finishing it"), std::string::npos)
      << m;
}

// A rank that stops answering (stopped, not dead): rank 0 gives up after rank_timeout,
// the launcher ends the stopped rank after its grace, and the run's message says so.
TEST_F(CliRanks, ARankThatStopsAnsweringIsNamedInTheRun) {
  const std::string err = (dir_ / "err").string();
  const Signalled k = signal_a_rank(db_, err, 1, SIGSTOP, 2);
  ASSERT_GT(k.pid, 0) << slurp(err);
  const pid_t rank1 = k.pid;
  ASSERT_TRUE(WIFEXITED(k.status));
  EXPECT_NE(WEXITSTATUS(k.status), 0);
  const std::string said = "rank 1 (pid " + std::to_string(rank1) + ") stopped answering";
  EXPECT_NE(slurp(err).find(said), std::string::npos) << slurp(err);
  auto s = fp8wb::RunStore::open_read_only(db_);
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, fp8wb::RunStatus::Failed);
  const std::string m = runs[0].message;
  EXPECT_EQ(m.find(said), 0u) << m;
  EXPECT_NE(m.find("; rank 0: exchanging "), std::string::npos) << m;
}

// The launcher killed outright (no chance to stop its ranks): the ranks notice that their
// parent is gone, stop after their step, and the run ends instead of training on unwatched.
TEST_F(CliRanks, ALauncherKilledOutrightStopsItsRanks) {
  std::vector<std::string> args = {"train", "--db", db_, "--nproc", "2", "--set", "steps=1000000"};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const pid_t launcher = spawn(args, out, err);
  ASSERT_TRUE(wait_for_steps(db_, 3)) << slurp(err);
  const pid_t rank0 = rank_process(launcher, 0), rank1 = rank_process(launcher, 1);
  ASSERT_GT(rank0, 0);
  ASSERT_GT(rank1, 0);
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  int st = 0;
  waitpid(launcher, &st, 0);
  // Both ranks end (they were reparented, so they are polled by their /proc entry).
  const auto gone = [](pid_t pid) {
    const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    return stat.empty() || stat.find(") Z ") != std::string::npos;
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((!gone(rank0) || !gone(rank1)) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const bool ended = gone(rank0) && gone(rank1);
  if (!ended) {
    kill(rank0, SIGKILL);
    kill(rank1, SIGKILL);
  }
  ASSERT_TRUE(ended) << "ranks still training 30 s after their launcher was killed";
  auto s = fp8wb::RunStore::open_read_only(db_);
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_NE(runs[0].status, fp8wb::RunStatus::Running);
  EXPECT_LT(runs[0].last_step, 999999);
}

TEST_F(CliRanks, APortInUseIsNamed) {
  int port = 0;
  const int fd = bound_socket(INADDR_ANY, true, port);
  std::vector<std::string> args = {
      "train", "--db",    db_,     "--nproc",        "2", "--master-port", std::to_string(port),
      "--set", "steps=5", "--set", "rank_timeout=20"};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const int st = wait_for(spawn(args, out, err), 60);
  close(fd);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_NE(WEXITSTATUS(st), 0);
  const std::string e = slurp(err);
  EXPECT_NE(e.find(":" + std::to_string(port) + ": the port is in use"), std::string::npos) << e;
  EXPECT_NE(e.find("MASTER_PORT"), std::string::npos) << e;
  auto s = fp8wb::RunStore::open_read_only(db_);
  const auto runs = s->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, fp8wb::RunStatus::Failed);
}

// A port where something other than rank 0 listens (here: a socket that takes the
// connection and never answers): a rank launched by hand gives up within about twice its
// rank_timeout, naming the port, instead of waiting in the handshake for ever.
TEST_F(CliRanks, ARankAtAPortThatNeverAnswersGivesUp) {
  int p = 0;
  const int fd = bound_socket(INADDR_LOOPBACK, true, p);
  const std::string port = std::to_string(p);
  std::vector<std::string> args = {"train", "--db",          db_, "--set", "steps=5",
                                   "--set", "rank_timeout=2"};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const auto t0 = std::chrono::steady_clock::now();
  const int st = wait_for(spawn(args, out, err, rank_env(1, 2, port)), 60);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  close(fd);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_NE(WEXITSTATUS(st), 0);
  EXPECT_LT(s, 40.0);
  const std::string e = slurp(err);
  EXPECT_NE(e.find("127.0.0.1:" + port + " but got no answer from rank 0"), std::string::npos) << e;
  EXPECT_NE(e.find("MASTER_PORT"), std::string::npos) << e;
}

// Ctrl-C while rank 0 waits for ranks that never come ends it at once, not after the
// rank_timeout.
TEST_F(CliRanks, AnInterruptEndsTheWaitForTheOtherRanks) {
  int p = 0;
  close(bound_socket(INADDR_LOOPBACK, false, p));  // a free port, released for rank 0
  const std::string port = std::to_string(p);
  std::vector<std::string> args = {"train",           "--db", db_, "--set", "steps=5", "--set",
                                   "rank_timeout=120"};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const pid_t pid = spawn(args, out, err, rank_env(0, 2, port));
  // Rank 0 listens once it waits (its signal handlers are set by then); a slow start, as
  // under a sanitizer on a busy machine, must not take the interrupt before that.
  const bool listening = wait_listening(p, 60);
  EXPECT_TRUE(listening) << "rank 0 never listened on port " << port;
  const auto t0 = std::chrono::steady_clock::now();
  kill(pid, SIGINT);
  const int st = wait_for(pid, 60);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_NE(WEXITSTATUS(st), 0);
  EXPECT_LT(s, 10.0);
  const std::string e = slurp(err);
  EXPECT_NE(e.find("stopped while waiting for the other ranks at 127.0.0.1:" + port),
            std::string::npos)
      << e;
}

// Ranks that torchrun or srun started, each sent a signal as those launchers pass them on,
// stop after the same step and exit with 128 + their signal, as a plain train does (they
// exited 0, which told the launcher that they had finished); rank 0 keeps the run as
// stopped.
TEST_F(CliRanks, RanksOfAnotherLauncherStoppedBySignalsExitWith128PlusTheSignal) {
  int p = 0;
  close(bound_socket(INADDR_LOOPBACK, false, p));  // a free port, released for rank 0
  const std::string port = std::to_string(p);
  std::vector<std::string> args = {"train", "--db",           db_, "--set", "steps=1000000",
                                   "--set", "rank_timeout=60"};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const int sig[2] = {SIGTERM, SIGHUP};
  pid_t pid[2];
  std::string err[2];
  for (int r = 0; r < 2; ++r) {
    err[r] = (dir_ / ("err" + std::to_string(r))).string();
    pid[r] = spawn(args, (dir_ / "out").string() + std::to_string(r), err[r], rank_env(r, 2, port));
  }
  const bool stepped = wait_for_steps(db_, 3);
  for (int r = 0; r < 2; ++r) kill(pid[r], stepped ? sig[r] : SIGKILL);
  ASSERT_TRUE(stepped) << slurp(err[0]) << slurp(err[1]);
  for (int r = 0; r < 2; ++r) {
    const int st = wait_for(pid[r], 60);
    ASSERT_TRUE(WIFEXITED(st)) << "rank " << r;
    EXPECT_EQ(WEXITSTATUS(st), 128 + sig[r]) << "rank " << r << ": " << slurp(err[r]);
    EXPECT_NE(slurp(err[r]).find("interrupted by " + std::string(r == 0 ? "SIGTERM" : "SIGHUP")),
              std::string::npos)
        << slurp(err[r]);
  }
  auto store = fp8wb::RunStore::open_read_only(db_);
  ASSERT_EQ(store->runs().size(), 1u);
  EXPECT_EQ(store->runs()[0].status, fp8wb::RunStatus::Stopped);
}

// Ranks started by hand that disagree on WORLD_SIZE (rank 1 with 3, rank 0 with 2): both
// say so in those words, soon, instead of failing inside Gloo.
TEST_F(CliRanks, RanksThatDisagreeOnTheWorldSizeSaySo) {
  int p = 0;
  close(bound_socket(INADDR_LOOPBACK, false, p));  // a free port, released for rank 0
  const std::string port = std::to_string(p);
  std::vector<std::string> args = {"train", "--db",           db_, "--set", "steps=5",
                                   "--set", "rank_timeout=20"};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  for (std::string& a : args) {
    if (a == "batch=8") a = "batch=12";  // splits across 2 ranks and 3 (a field is set once)
  }
  auto rank = [&](int r, int world) {
    const std::string name = "rank" + std::to_string(r);
    return spawn(args, (dir_ / (name + ".out")).string(), (dir_ / (name + ".err")).string(),
                 rank_env(r, world, port));
  };
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t rank0 = rank(0, 2);
  const pid_t rank1 = rank(1, 3);
  const int st1 = wait_for(rank1, 60);
  const int st0 = wait_for(rank0, 60);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(st0) && WIFEXITED(st1));
  EXPECT_NE(WEXITSTATUS(st0), 0);
  EXPECT_NE(WEXITSTATUS(st1), 0);
  EXPECT_LT(s, 20.0);  // neither waits out its rank_timeout
  const std::string e1 = slurp((dir_ / "rank1.err").string());
  EXPECT_NE(e1.find("rank 1: this rank was started with WORLD_SIZE=3 but rank 0 with 2"),
            std::string::npos)
      << e1;
  const std::string e0 = slurp((dir_ / "rank0.err").string());
  EXPECT_NE(e0.find("rank 0: rank 1 was started with WORLD_SIZE=3 but this rank with 2"),
            std::string::npos)
      << e0;
  for (const std::string& e : {e0, e1}) {
    EXPECT_NE(e.find("start every rank with the same WORLD_SIZE"), std::string::npos) << e;
    EXPECT_EQ(e.find("sizeof(impl_)"), std::string::npos) << e;
  }
}

// Hand-started ranks whose configs differ (steps, the model's width, the batch) are
// refused at the first meeting by both, naming the fields, before any exchange: not a
// SIGABRT inside Gloo, nor two "finished" runs that trained apart.
TEST_F(CliRanks, RanksWhoseConfigsDifferSaySo) {
  for (const std::vector<std::string>& rank1_sets :
       {std::vector<std::string>{"--set", "steps=6", "--set", "d_model=64"},
        std::vector<std::string>{"--set", "batch=12"}}) {
    int p = 0;
    close(bound_socket(INADDR_LOOPBACK, false, p));  // a free port, released for rank 0
    const std::string port = std::to_string(p);
    std::vector<std::string> args = {"train", "--db",           db_, "--set", "steps=5",
                                     "--set", "rank_timeout=20"};
    args.insert(args.end(), kTiny.begin(), kTiny.end());
    // Rank 1's values in place of rank 0's (fp8wb refuses a field given twice).
    std::vector<std::string> args1 = args;
    for (const std::string& set : rank1_sets) {
      const std::string key = set.substr(0, set.find('=') + 1);
      for (std::string& a : args1) {
        if (set != "--set" && a.rfind(key, 0) == 0) a = set;
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t rank0 = spawn(args, (dir_ / "rank0.out").string(), (dir_ / "rank0.err").string(),
                              rank_env(0, 2, port));
    const pid_t rank1 = spawn(args1, (dir_ / "rank1.out").string(), (dir_ / "rank1.err").string(),
                              rank_env(1, 2, port));
    const int st1 = wait_for(rank1, 60);
    const int st0 = wait_for(rank0, 60);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(WIFEXITED(st0) && WIFEXITED(st1)) << "a rank was ended by a signal";
    EXPECT_EQ(WEXITSTATUS(st0), 1);
    EXPECT_EQ(WEXITSTATUS(st1), 1);
    EXPECT_LT(s, 20.0);  // neither waits out its rank_timeout
    const std::string e0 = slurp((dir_ / "rank0.err").string());
    const std::string e1 = slurp((dir_ / "rank1.err").string());
    if (rank1_sets[1] == "steps=6") {
      EXPECT_NE(e1.find("rank 1: this rank's config differs from rank 0's: d_model 64 here, 32 "
                        "at rank 0; steps 6 here, 5 at rank 0: start every rank with the same "
                        "config"),
                std::string::npos)
          << e1;
      EXPECT_NE(e0.find("rank 0: rank 1's config differs from this rank's: d_model 64 at rank 1, "
                        "32 here; steps 6 at rank 1, 5 here"),
                std::string::npos)
          << e0;
    } else {
      EXPECT_NE(e1.find("batch 12 here, 8 at rank 0"), std::string::npos) << e1;
      EXPECT_NE(e0.find("batch 12 at rank 1, 8 here"), std::string::npos) << e0;
    }
    // Rank 0's run says why it failed.
    auto store = fp8wb::RunStore::open_read_only(db_);
    const auto runs = store->runs();
    ASSERT_FALSE(runs.empty());
    EXPECT_EQ(runs.back().status, fp8wb::RunStatus::Failed);
    EXPECT_NE(runs.back().message.find("config differs"), std::string::npos) << runs.back().message;
  }
}

// Rank 0 alone at the first meeting waits for the others twice its rank_timeout (the
// store's wait, then the group's): the message states that bound, not rank_timeout.
TEST_F(CliRanks, TheFirstMeetingStatesItsRealBound) {
  int p = 0;
  close(bound_socket(INADDR_LOOPBACK, false, p));  // a free port, released for rank 0
  std::vector<std::string> args = {"train", "--db",          db_, "--set", "steps=5",
                                   "--set", "rank_timeout=2"};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const auto t0 = std::chrono::steady_clock::now();
  const int st = wait_for(spawn(args, out, err, rank_env(0, 2, std::to_string(p))), 60);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_NE(WEXITSTATUS(st), 0);
  const std::string e = slurp(err);
  const std::string said = "could not be formed within ";
  const size_t at = e.find(said);
  ASSERT_NE(at, std::string::npos) << e;
  const int bound = std::atoi(e.c_str() + at + said.size());
  EXPECT_EQ(bound, 4) << e;
  EXPECT_NE(e.find("the ranks' timeout of 2 s twice"), std::string::npos) << e;
  EXPECT_GE(s, 3.9);           // it did wait that long
  EXPECT_LT(s, bound + 15.0);  // and not much longer (the process's start, the model's making)
}

TEST_F(CliRanks, BadRequestsAreRefusedBeforeAnyRankStarts) {
  Result r = run({"train", "--db", db_, "--nproc", "3", "--set", "batch=8"});
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("'batch': 8 does not split evenly across 3 ranks"), std::string::npos)
      << r.err;
  r = run({"train", "--db", db_, "--nproc", "0"});
  EXPECT_NE(r.rc, 0);
  r = run({"train", "--db", db_, "--nproc", "2", "--set", "rank_timeout=0"});
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("rank_timeout"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(db_));
  // A MASTER_PORT that is not a port is quoted as given.
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  for (const std::string bad : {"abc", "0", "70000"}) {
    const int st = wait_for(
        spawn({"train", "--db", db_, "--nproc", "2"}, out, err, {{"MASTER_PORT", bad}}), 60);
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_NE(WEXITSTATUS(st), 0);
    const std::string e = slurp(err);
    EXPECT_NE(e.find("MASTER_PORT is \"" + bad + "\""), std::string::npos) << e;
  }
  EXPECT_FALSE(std::filesystem::exists(db_));
  // Ranks on GPUs where there are fewer than two (or no CUDA, or no NCCL, in the build).
  if (fp8wb::Trainer::cuda_device_count() < 2 || !fp8wb::distributed_backend_available("nccl")) {
    r = run({"train", "--db", db_, "--nproc", "2", "--device", "cuda"});
    EXPECT_NE(r.rc, 0);
    EXPECT_TRUE(r.err.find("cuda") != std::string::npos || r.err.find("GPU") != std::string::npos)
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(db_));
  }
}

// More ranks than this machine holds (each a process with LibTorch and a copy of the
// model) are refused before any starts, naming the limit and how many fit; nothing is
// made. (Spawned, not in-process: a launcher started from the test would run the test
// program as its ranks.)
TEST_F(CliRanks, RanksThatCannotFitAreRefusedBeforeAnyStarts) {
  const double memory = static_cast<double>(fp8wb::run_memory_limit());
  if (memory > 1025.0 * static_cast<double>(fp8wb::cli::kRankProcessBytes) &&
      fp8wb::cli::process_limit() == 0)
    GTEST_SKIP() << "this machine might hold 1024 ranks";
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const auto t0 = std::chrono::steady_clock::now();
  const int st = wait_for(
      spawn({"train", "--db", db_, "--nproc", "1024", "--set", "batch=1024", "--set", "steps=1"},
            out, err),
      60);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1);
  const std::string e = slurp(err);
  EXPECT_NE(e.find("--nproc 1024: 1024 ranks "), std::string::npos) << e;
  EXPECT_TRUE(e.find("of memory") != std::string::npos || e.find("threads") != std::string::npos)
      << e;
  EXPECT_NE(e.find(" fit"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(db_));
  EXPECT_LT(took, 30.0);  // no rank started, none waited for
}

// The limits in words: memory (the process's LibTorch counted for every rank and the
// launcher), then the threads this user may still start.
TEST(CliRanksLimits, RefusalsNameTheLimitAndWhatFits) {
  using fp8wb::cli::ranks_refusal;
  const uint64_t gib = uint64_t{1} << 30;
  EXPECT_EQ(ranks_refusal("--nproc", 4, 1 << 20, 16 * gib, 0), "");
  const std::string m = ranks_refusal("--nproc", 1024, 1 << 20, 16 * gib, 0);
  EXPECT_NE(m.find("--nproc 1024: 1024 ranks need about 65.1 GiB of memory (each rank is a "
                   "process of its own: LibTorch's about 64 MiB, its model and batch about 1 "
                   "MiB), more than this machine's 16.0 GiB; at most 251 fit"),
            std::string::npos)
      << m;
  const std::string t = ranks_refusal("--nproc", 64, 1 << 20, 0, 100);
  EXPECT_NE(t.find("--nproc 64: 64 ranks run about 520 threads"), std::string::npos) << t;
  EXPECT_NE(t.find("(100 more); at most 11 ranks fit"), std::string::npos) << t;
  EXPECT_EQ(ranks_refusal("--nproc", 8, 1 << 20, 0, 1000), "");
}

// `train --nproc 2` where the environment already makes the process a rank (RANK and
// WORLD_SIZE left by a launcher): refused by name at once, not run as that other rank.
TEST_F(CliRanks, NprocWithRankVariablesInTheEnvironmentIsRefused) {
  int p = 0;
  close(bound_socket(INADDR_LOOPBACK, false, p));
  std::vector<std::string> args = {"train", "--db",    db_,     "--nproc",       "2",
                                   "--set", "steps=2", "--set", "rank_timeout=3"};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const int st = wait_for(spawn(args, out, err,
                                {{"RANK", "7"},
                                 {"WORLD_SIZE", "9"},
                                 {"MASTER_ADDR", "127.0.0.1"},
                                 {"MASTER_PORT", std::to_string(p)}}),
                          60);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1);
  const std::string e = slurp(err);
  EXPECT_NE(e.find("--nproc 2 starts ranks of its own, but the environment makes this process "
                   "rank 7 of 9 already (RANK=7, WORLD_SIZE=9): unset RANK and WORLD_SIZE"),
            std::string::npos)
      << e;
  EXPECT_FALSE(std::filesystem::exists(db_));
}

// A rendezvous host name that does not resolve fails at once, naming MASTER_ADDR, rather
// than after the ranks' timeout of attempts to reach it.
TEST_F(CliRanks, AMasterAddrThatDoesNotResolveFailsAtOnce) {
  std::vector<std::string> args = {"train", "--db",           db_, "--set", "steps=2",
                                   "--set", "rank_timeout=20"};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  for (const int rank : {0, 1}) {
    const auto t0 = std::chrono::steady_clock::now();
    const int st = wait_for(spawn(args, out, err,
                                  {{"RANK", std::to_string(rank)},
                                   {"WORLD_SIZE", "2"},
                                   {"MASTER_ADDR", "nonexistent.invalid"},
                                   {"MASTER_PORT", "29533"}}),
                            90);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 1);
    const std::string e = slurp(err);
    EXPECT_NE(e.find("rank " + std::to_string(rank) +
                     ": MASTER_ADDR \"nonexistent.invalid\" does not resolve to an address"),
              std::string::npos)
        << e;
    EXPECT_LT(took, 20.0) << e;  // well before the ranks' timeout
    EXPECT_FALSE(std::filesystem::exists(db_));
  }
}

// bench --comm through Gloo with two ranks: every exchange reports its bytes as the
// shapes give them (one rank's tensor: rows x cols of its dtype; gathered: twice that),
// every gathered slot comes back byte for byte as its rank sent it (checked by rank 0
// against each rank's payload rebuilt from its rank alone), and the all-reduce's sum of
// two ranks is bit-identical to the two added locally.
TEST_F(CliRanks, BenchCommGathersFp8CodesUnchanged) {
  const int64_t rows = 96, cols = 200;
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const int st = wait_for(spawn({"bench", "--comm", "--nproc", "2", "--rows", std::to_string(rows),
                                 "--cols", std::to_string(cols), "--steps", "3", "--json"},
                                out, err),
                          120);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 0) << slurp(out) << slurp(err);
  const nlohmann::json j = nlohmann::json::parse(slurp(out));  // rank 0 alone prints
  EXPECT_EQ(j["backend"], "gloo");
  EXPECT_EQ(j["ranks"], 2);
  ASSERT_EQ(j["exchanges"].size(), 4u);
  struct Want {
    const char* op;
    const char* payload;
    std::vector<int64_t> shape;
    int64_t element_bytes;
  };
  // bf16 goes as bfloat16, or as its bytes (uint8, twice the columns) where the backend
  // has no bfloat16: two bytes an element either way.
  const bool bf16_native = j["exchanges"][3]["dtype"] == "bfloat16";
  const Want want[] = {
      {"all_reduce", "fp32", {rows, cols}, 4},
      {"all_gather", "fp8 codes", {rows, cols}, 1},
      {"all_gather", "fp8 scales", {rows}, 4},
      {"all_gather", "bf16", {rows, bf16_native ? cols : 2 * cols}, bf16_native ? 2 : 1}};
  for (size_t i = 0; i < 4; ++i) {
    const nlohmann::json& e = j["exchanges"][i];
    SCOPED_TRACE(e.dump());
    EXPECT_EQ(e["op"], want[i].op);
    EXPECT_EQ(e["payload"], want[i].payload);
    EXPECT_EQ(e["shape"].get<std::vector<int64_t>>(), want[i].shape);
    int64_t elements = 1;
    for (int64_t d : want[i].shape) elements *= d;
    EXPECT_EQ(e["bytes_per_rank"].get<int64_t>(), elements * want[i].element_bytes);
    EXPECT_EQ(e["bytes_result"].get<int64_t>(),
              (i == 0 ? 1 : 2) * elements * want[i].element_bytes);
    EXPECT_TRUE(e["identical"].get<bool>());
    EXPECT_GT(e["ms"].get<double>(), 0.0);
  }
  EXPECT_EQ(j["exchanges"][1]["dtype"], "uint8");  // FP8 codes as bytes: nothing upcast
  EXPECT_EQ(j["exchanges"][0]["max_abs_error"].get<double>(), 0.0);
  // FP8 weights: one byte an element and a scale a row, against bf16's two bytes.
  EXPECT_DOUBLE_EQ(
      j["fp8_vs_bf16"]["bytes"].get<double>(),
      static_cast<double>(rows * cols + rows * 4) / static_cast<double>(rows * cols * 2));
}

// How often `needle` occurs in `text`.
size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The binary with stdout and stderr into files and these variables set; waits for it at
// most `seconds` and returns its status and the largest resident set of it and the
// processes it waited for (wait4's rusage: the ranks), in KiB.
std::pair<int, long> run_measured(std::vector<std::string> args, const std::string& out,
                                  const std::string& err,
                                  const std::vector<std::pair<std::string, std::string>>& env,
                                  int seconds) {
  const pid_t pid = spawn(std::move(args), out, err, env);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  rusage ru{};
  while (wait4(pid, &status, WNOHANG, &ru) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &ru);
      ADD_FAILURE() << "still running after " << seconds << " s";
      return {-1, 0};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return {status, ru.ru_maxrss};
}

// A matrix over 2^30 elements: refused by the launcher before any rank starts, so the
// reason is said once (not once a rank, nor followed by "ranks failed"); ranks started by
// another launcher (torchrun's variables) say it once too: rank 0 alone.
TEST_F(CliRanks, BenchCommRefusalIsSaidOnceBeforeRanksStart) {
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  const std::string reason = "the weight matrix must have at least one element and at most 2^30";
  auto [st, rss] =
      run_measured({"bench", "--comm", "--nproc", "2", "--rows", "1048576", "--cols", "1048576"},
                   out, err, {}, 60);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1);
  std::string said = slurp(err);
  EXPECT_EQ(count(said, reason), 1u) << said;
  EXPECT_NE(said.find("--rows 1048576 x --cols 1048576"), std::string::npos) << said;
  EXPECT_EQ(said.find("ranks failed"), std::string::npos) << said;
  // Two ranks as torchrun starts them: rank 1 says nothing, rank 0 the reason once.
  std::string both;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string e = err + std::to_string(rank);
    auto [rst, rrss] =
        run_measured({"bench", "--comm", "--rows", "1048576", "--cols", "1048576"}, out, e,
                     {{"RANK", std::to_string(rank)},
                      {"WORLD_SIZE", "2"},
                      {"LOCAL_RANK", std::to_string(rank)},
                      {"LOCAL_WORLD_SIZE", "2"},
                      {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", "1"}},
                     60);
    ASSERT_TRUE(WIFEXITED(rst));
    EXPECT_EQ(WEXITSTATUS(rst), 1);
    both += slurp(e);
    if (rank == 1) {
      EXPECT_EQ(slurp(e), "");
    }
  }
  EXPECT_EQ(count(both, reason), 1u) << both;
}

// Before the ranks start, the memory each will hold is said (and the estimate holds what
// they take: the ranks' largest resident set, less a tiny run's, measured here, is within
// it and more than a third of it); on a large matrix rank 0 reports each step of the work
// as it goes, once (the other rank says nothing).
TEST_F(CliRanks, BenchCommSaysItsMemoryAndProgress) {
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  auto run_size = [&](int64_t side) {
    return run_measured({"bench", "--comm", "--nproc", "2", "--rows", std::to_string(side),
                         "--cols", std::to_string(side), "--steps", "2", "--json"},
                        out, err, {}, 300);
  };
  const auto [tiny_st, tiny_rss] = run_size(8);
  ASSERT_TRUE(WIFEXITED(tiny_st) && WEXITSTATUS(tiny_st) == 0) << slurp(err);
  EXPECT_EQ(slurp(err).find("bench --comm: all_reduce"), std::string::npos);  // too quick
  const int64_t side = 4096;  // 2^24 elements: 64 MiB of fp32 a rank
  const auto [st, rss] = run_size(side);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << slurp(err);
  const std::string said = slurp(err);
  fp8wb::CommBenchOptions o;
  o.rows = o.cols = side;
  o.iters = 2;
  const fp8wb::CommBenchMemory m = fp8wb::estimate_comm_bench_memory(o, 2);
  const std::string memory_line =
      "bench --comm: 2 ranks, each sending a 4096 x 4096 matrix; memory: rank 0 about ";
  EXPECT_EQ(said.find(memory_line), 0u) << said;  // before anything else
  const double grew = (static_cast<double>(rss) - static_cast<double>(tiny_rss)) * 1024.0;
#if !defined(__SANITIZE_ADDRESS__)
  // (AddressSanitizer's allocator keeps freed blocks in quarantine and adds its own: under
  // it the ranks hold more than any program's own figures could say.)
  EXPECT_LE(grew, m.rank0_host) << said;
#endif
  EXPECT_GE(grew, m.rank0_host / 3) << said;
  for (const char* step :
       {"bench --comm: building every rank's payload to check against: 2 of 2\n",
        "bench --comm: all_reduce fp32: 5 of 5\n", "bench --comm: all_gather fp8 codes: 5 of 5\n",
        "bench --comm: all_gather bf16: 5 of 5\n"})
    EXPECT_EQ(count(said, step), 1u) << step << said;
  const nlohmann::json j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["exchanges"].size(), 4u);
}

// The memory said for bench --comm counts every process's LibTorch besides the matrices
// (64 ranks of a tiny matrix were "3 MiB" and took 3.9 GB), and more ranks than that
// memory holds are refused before any starts.
TEST_F(CliRanks, BenchCommCountsEveryProcess) {
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
  auto [st, rss] = run_measured(
      {"bench", "--comm", "--nproc", "2", "--rows", "8", "--cols", "8", "--steps", "1"}, out, err,
      {}, 120);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << slurp(err);
  const std::string said = slurp(err);
  const std::string each = "each process about 64 MiB of LibTorch's own (";
  const size_t at = said.find(each);
  ASSERT_NE(at, std::string::npos) << said;
  EXPECT_GE(std::atof(said.c_str() + at + each.size()), 192.0) << said;  // 3 processes
  if (static_cast<double>(fp8wb::run_memory_limit()) >
      1025.0 * static_cast<double>(fp8wb::cli::kRankProcessBytes))
    return;  // this machine might hold 1024 ranks
  auto [big, big_rss] = run_measured(
      {"bench", "--comm", "--nproc", "1024", "--rows", "8", "--cols", "8", "--steps", "1"}, out,
      err, {}, 60);
  ASSERT_TRUE(WIFEXITED(big));
  EXPECT_EQ(WEXITSTATUS(big), 1);
  const std::string refused = slurp(err);
  EXPECT_NE(refused.find("--rows 8 x --cols 8 with --nproc 1024 needs about "), std::string::npos)
      << refused;
  EXPECT_EQ(refused.find("ranks failed"), std::string::npos) << refused;
}

// The options of --comm alone are refused without it, by name, before anything is measured
// (they were ignored: a user asking for a larger matrix got the training figures instead).
TEST(CliBench, CommOptionsNeedComm) {
  const std::vector<std::string> tiny = {
      "bench",    "--train-only", "--steps", "1",     "--set",      "d_model=32", "--set",
      "layers=1", "--set",        "heads=2", "--set", "context=32", "--set",      "batch=8"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = tiny;
    a.insert(a.end(), more.begin(), more.end());
    return run(a);
  };
  Result r = with({"--rows", "4096"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--rows applies only with --comm"), std::string::npos) << r.err;
  r = with({"--rows", "4096", "--cols", "512"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--rows and --cols apply only with --comm"), std::string::npos) << r.err;
  r = with({"--cols", "512", "--nproc", "2", "--master-port", "29555"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--nproc, --master-port and --cols apply only with --comm"),
            std::string::npos)
      << r.err;
}

TEST_F(CliRanks, BenchCommNeedsRanks) {
  Result r = run({"bench", "--comm"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("give --nproc 2 or more"), std::string::npos) << r.err;
  r = run({"bench", "--comm", "--nproc", "2", "--device", "tpu"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("--device \"tpu\""), std::string::npos) << r.err;
}

}  // namespace
