#include "rank_launcher.h"

#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/train/distributed.h"
#include "stop_signals.h"

extern char** environ;

namespace fp8wb::cli {
namespace {

// This program's own arguments, as the kernel has them.
std::vector<std::string> own_arguments() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t i = 0;
  while (i < all.size()) {
    const size_t j = all.find('\0', i);
    args.push_back(all.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  if (args.empty()) throw std::runtime_error("cannot read this program's arguments");
  return args;
}

// A port no one listens on now (the kernel's choice); rank 0 binds it moments later.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("cannot open a socket: ") + strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = strerror(errno);
    ::close(fd);
    throw std::runtime_error("cannot find a free port: " + why);
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// How a rank ended. `killed_here`: this launcher sent it SIGKILL, `grace` seconds after
// rank `first` failed.
std::string ended(int status, bool killed_here, int grace, int first) {
  if (WIFEXITED(status)) return fmt::format("ended with exit code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status) && killed_here && WTERMSIG(status) == SIGKILL) {
    return fmt::format(
        "stopped answering (still running {} s after rank {} failed, so the launcher "
        "killed it with signal 9)",
        grace, first);
  }
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
  return "ended";
}

bool failed(int status) {
  return !WIFEXITED(status) || (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 2);
}

// Puts how the ranks ended in front of the stored message of the run that rank 0 (pid
// pids[0]) kept, once every rank has ended (so nothing else of this run writes the file):
// the ranks that failed, those that died first (killed by a signal, then those that
// stopped answering) before those that ended with an error, and rank 0 only where it did
// not end on its own (else the message is its own account). A run that rank 0 did not
// leave failed or interrupted is left as it is; a database that cannot be written is said
// on `err`, the run then keeping rank 0's message. The exit status stays what it was.
void record_how_ranks_ended(const LaunchOptions& opt, const std::vector<pid_t>& pids,
                            const std::vector<int>& status, const std::vector<bool>& killed_here,
                            int first, std::ostream& err) {
  std::error_code ec;
  // No file: rank 0 ended before it made the run (its error is on `err`).
  if (opt.db.empty() || opt.run_uuid.empty() || !std::filesystem::exists(opt.db, ec)) return;
  std::vector<std::string> parts[3];
  for (size_t r = 0; r < pids.size(); ++r) {
    if (!failed(status[r]) || (r == 0 && WIFEXITED(status[r]))) continue;
    const int kind = WIFEXITED(status[r]) ? 2 : killed_here[r] ? 1 : 0;
    parts[kind].push_back(fmt::format("rank {} (pid {}) {}", r, pids[r],
                                      ended(status[r], killed_here[r], opt.grace_seconds, first)));
  }
  std::string note;
  for (const auto& p : parts)
    for (const std::string& s : p) note += (note.empty() ? "" : ", ") + s;
  if (note.empty()) return;
  try {
    // Opening marks a run whose writer is gone (rank 0 killed) interrupted, as any open does.
    auto store = RunStore::open(opt.db);
    store->note_how_run_ended(opt.run_uuid, pids[0], note);
  } catch (const std::exception& e) {
    err << fmt::format(
        "fp8wb: the run's stored message could not be given how the ranks ended (said above): "
        "{}\n",
        e.what());
  }
}

std::string size_text(double bytes) {
  if (bytes >= double(uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", bytes / (1 << 30));
  return fmt::format("{:.0f} MiB", std::ceil(bytes / (1 << 20)));
}

}  // namespace

std::string ranks_refusal(const std::string& option, int nproc, double per_rank_bytes,
                          uint64_t memory_bytes, uint64_t process_limit) {
  // The ranks and their launcher.
  const double each = static_cast<double>(kRankProcessBytes) + per_rank_bytes;
  const double need = each * (nproc + 1);
  if (memory_bytes > 0 && need > static_cast<double>(memory_bytes)) {
    const auto fit = static_cast<int64_t>(static_cast<double>(memory_bytes) / each) - 1;
    return fmt::format(
        "{} {}: {} ranks need about {} of memory (each rank is a process of its own: "
        "LibTorch's about {}, its model and batch about {}), more than this machine's {}; {}",
        option, nproc, nproc, size_text(need), size_text(double(kRankProcessBytes)),
        size_text(per_rank_bytes), size_text(double(memory_bytes)),
        fit >= 2 ? fmt::format("at most {} fit", fit) : std::string("not even 2 fit"));
  }
  const uint64_t tasks = static_cast<uint64_t>(nproc + 1) * kRankThreads;
  if (process_limit > 0 && tasks > process_limit) {
    const uint64_t fit = process_limit / kRankThreads;
    return fmt::format(
        "{} {}: {} ranks run about {} threads (some {} each, their launcher too), more than "
        "this system lets this user start now ({} more); {}",
        option, nproc, nproc, tasks, kRankThreads, process_limit,
        fit >= 3 ? fmt::format("at most {} ranks fit", fit - 1) : std::string("not even 2 fit"));
  }
  return {};
}

uint64_t process_limit() {
  uint64_t limit = 0;
  auto lower = [&limit](uint64_t v) {
    if (limit == 0 || v < limit) limit = std::max<uint64_t>(v, 1);
  };
  struct rlimit r {};
  // The kernel does not hold root (CAP_SYS_RESOURCE, CAP_SYS_ADMIN) to RLIMIT_NPROC, and
  // counts against it every thread of the user's (not known here: the limit as it is).
  if (::geteuid() != 0 && ::getrlimit(RLIMIT_NPROC, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    lower(static_cast<uint64_t>(r.rlim_cur));
  // The pids controller's limit, less the tasks its group runs already.
  for (const char* dir : {"/sys/fs/cgroup/", "/sys/fs/cgroup/pids/"}) {
    std::ifstream max(std::string(dir) + "pids.max"), current(std::string(dir) + "pids.current");
    std::string m;
    uint64_t now = 0;
    if (max >> m && m != "max") {
      const uint64_t most = std::strtoull(m.c_str(), nullptr, 10);
      current >> now;
      lower(most > now ? most - now : 0);
    }
  }
  return limit;
}

void check_master_addr(const RankInfo& ranks) {
  if (!ranks.distributed() || ranks.master_addr.empty()) return;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(ranks.master_addr.c_str(), nullptr, &hints, &found);
  if (found) ::freeaddrinfo(found);
  // A name that is known not to exist; a failure that may pass (EAI_AGAIN: no answer from
  // the name server yet) is left to the ranks' attempts.
  bool unknown = rc == EAI_NONAME || rc == EAI_FAIL;
#ifdef EAI_NODATA
  unknown |= rc == EAI_NODATA;
#endif
#ifdef EAI_ADDRFAMILY
  unknown |= rc == EAI_ADDRFAMILY;
#endif
  if (unknown) {
    const std::string shown = ranks.master_addr.size() > 200
                                  ? ranks.master_addr.substr(0, 200) + "..."
                                  : ranks.master_addr;
    throw std::invalid_argument(fmt::format(
        "rank {}: MASTER_ADDR \"{}\" does not resolve to an address ({}): give the host name "
        "or IP address of the machine where rank 0 runs",
        ranks.rank, shown, ::gai_strerror(rc)));
  }
}

int launch_ranks(const LaunchOptions& opt, std::ostream& err) {
  int port = opt.master_port;
  if (port == 0) {
    const char* env = std::getenv("MASTER_PORT");
    if (env && *env) {
      const char* end = env + std::strlen(env);
      const auto [at, ec] = std::from_chars(env, end, port);
      if (ec != std::errc() || at != end || port < 1 || port > 65535) {
        throw std::invalid_argument(
            fmt::format("MASTER_PORT is \"{}\": not a port from 1 to 65535", env));
      }
    } else {
      port = free_port();
    }
  }
  if (port < 1 || port > 65535)
    throw std::invalid_argument(fmt::format("the port {} is not one from 1 to 65535", port));
  const std::vector<std::string> args = own_arguments();
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  // The environment less any rank variables, then this rank's.
  std::vector<std::string> base;
  for (char** e = environ; *e; ++e) {
    const std::string v = *e;
    const std::string name = v.substr(0, v.find('='));
    if (name == "RANK" || name == "WORLD_SIZE" || name == "LOCAL_RANK" ||
        name == "LOCAL_WORLD_SIZE" || name == "MASTER_ADDR" || name == "MASTER_PORT" ||
        name == kLauncherPidVariable || name == kLauncherRunUuidVariable)
      continue;
    base.push_back(v);
  }

  std::vector<pid_t> pids(static_cast<size_t>(opt.nproc), -1);
  std::vector<int> status(pids.size(), 0);
  std::vector<bool> done(pids.size(), false);
  std::vector<bool> killed_here(pids.size(), false);  // SIGKILL from here, the grace over
  auto kill_all = [&](int sig) {
    for (size_t r = 0; r < pids.size(); ++r)
      if (pids[r] > 0 && !done[r]) ::kill(pids[r], sig);
  };
  for (int rank = 0; rank < opt.nproc; ++rank) {
    std::vector<std::string> env = base;
    env.push_back(fmt::format("RANK={}", rank));
    env.push_back(fmt::format("WORLD_SIZE={}", opt.nproc));
    env.push_back(fmt::format("LOCAL_RANK={}", rank));
    env.push_back(fmt::format("LOCAL_WORLD_SIZE={}", opt.nproc));
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back(fmt::format("MASTER_PORT={}", port));
    env.push_back(fmt::format("{}={}", kLauncherPidVariable, ::getpid()));
    if (!opt.run_uuid.empty())
      env.push_back(fmt::format("{}={}", kLauncherRunUuidVariable, opt.run_uuid));
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = -1;
    const int rc =
        ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data());
    if (rc != 0) {
      kill_all(SIGKILL);
      for (size_t r = 0; r < pids.size(); ++r)
        if (pids[r] > 0) ::waitpid(pids[r], nullptr, 0);
      throw std::runtime_error(fmt::format("cannot start rank {}: {}", rank, strerror(rc)));
    }
    pids[static_cast<size_t>(rank)] = pid;
  }

  // Signals reach the ranks from the terminal (Ctrl-C); others sent to this process (a
  // scheduler's SIGTERM) are passed on. Each rank stops after the same step.
  const StopSignals signals;
  bool passed_on = false;
  int first_failed = -1;
  std::chrono::steady_clock::time_point deadline;
  size_t left = pids.size();
  while (left > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (done[r]) continue;
      int st = 0;
      const pid_t w = ::waitpid(pids[r], &st, WNOHANG);
      if (w == 0 || (w < 0 && errno == EINTR)) continue;
      done[r] = true;
      status[r] = w < 0 ? (1 << 8) : st;
      --left;
      if (failed(status[r]) && first_failed < 0) {
        first_failed = static_cast<int>(r);
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opt.grace_seconds);
      }
    }
    if (signals.requested() && !passed_on) {
      kill_all(SIGTERM);
      passed_on = true;
    }
    if (first_failed >= 0 && left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (size_t r = 0; r < pids.size(); ++r) killed_here[r] = !done[r];
      kill_all(SIGKILL);
      deadline = std::chrono::steady_clock::time_point::max();
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (first_failed < 0) {
    // Stopped by a signal (the ranks stopped after one step alike): 128 + the signal, as
    // a single process gives it.
    if (signals.signal() != 0 && WEXITSTATUS(status[0]) == 0) {
      err << fmt::format("fp8wb: interrupted by {}: the {} ranks stopped{}\n",
                         stop_signal_name(signals.signal()), pids.size(),
                         opt.db.empty() ? "" : ", rank 0 keeping the run in " + opt.db);
      return 128 + signals.signal();
    }
    return WEXITSTATUS(status[0]);
  }
  std::string report;
  for (size_t r = 0; r < pids.size(); ++r) {
    if (!failed(status[r])) continue;
    report += fmt::format("{}rank {} (pid {}) {}", report.empty() ? "" : "; ", r, pids[r],
                          ended(status[r], killed_here[r], opt.grace_seconds, first_failed));
  }
  err << fmt::format(
      "fp8wb: {} of {} ranks failed, rank {} first: {}\n",
      [&] {
        int n = 0;
        for (int s : status) n += failed(s) ? 1 : 0;
        return n;
      }(),
      pids.size(), first_failed, report);
  record_how_ranks_ended(opt, pids, status, killed_here, first_failed, err);
  return WIFEXITED(status[0]) && WEXITSTATUS(status[0]) != 0 ? WEXITSTATUS(status[0]) : 1;
}

std::string launcher_run_uuid() {
  const char* v = std::getenv(kLauncherRunUuidVariable);
  if (!std::getenv(kLauncherPidVariable) || !v || !is_uuid(v)) return {};
  return v;
}

bool started_by_launch_ranks() {
  return std::getenv(kLauncherPidVariable) != nullptr;
}

void stop_with_launcher() {
  const char* v = std::getenv(kLauncherPidVariable);
  if (!v) return;
  char* end = nullptr;
  const long launcher = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || launcher <= 1) return;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  // The launcher may have died before the line above: then this rank was reparented.
  if (::getppid() != static_cast<pid_t>(launcher)) ::raise(SIGTERM);
}

}  // namespace fp8wb::cli
