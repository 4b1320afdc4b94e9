// defines: launch_ranks(): `fp8wb train --nproc N` starts N ranks of a data-parallel run
// on this machine, each this same program with the same arguments and RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT in its environment (as torchrun
// sets them), waits for them all, ends the others when one fails, and reports;
// stop_with_launcher(): a rank ends when its launcher does; launcher_run_uuid(): the
// identity that rank 0 gives the run.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace fp8wb {
struct RankInfo;
}

namespace fp8wb::cli {

struct LaunchOptions {
  int nproc = 2;
  int master_port = 0;     // 0: MASTER_PORT from the environment, else a free port
  int grace_seconds = 10;  // after a rank fails, how long the others have to end on their own
  // Where rank 0 keeps a run (train): the run database and the run's identity, which the
  // ranks are given (kLauncherRunUuidVariable). When a rank failed, once every rank has
  // ended, the run's stored message is given how the ranks ended (a rank killed by a
  // signal, one that ended with an error, one that stopped answering), where rank 0 left
  // the run failed or interrupted. Empty: nothing is recorded (bench --comm).
  std::string db;
  std::string run_uuid;
};

// What one rank that launch_ranks() starts takes in memory before its work: LibTorch's own
// and the program's, private to each process (some 68-71 MiB measured for a tiny model on
// the CPU; the lower figure, so that a request that fits is not refused).
inline constexpr uint64_t kRankProcessBytes = uint64_t{64} << 20;

// The threads of one rank (some 7 to 9 measured: LibTorch's, Gloo's, the run store's).
inline constexpr uint64_t kRankThreads = 8;

// Why `nproc` ranks of `per_rank_bytes` each (its work, beyond kRankProcessBytes) cannot
// run side by side on this machine, said before any starts: more than its memory
// (`memory_bytes`), or more threads than the system lets this user start now
// (`process_limit`, process_limit(); 0 for none). Empty where they fit.
std::string ranks_refusal(const std::string& option, int nproc, double per_rank_bytes,
                          uint64_t memory_bytes, uint64_t process_limit);
// The processes and threads this user may start now (RLIMIT_NPROC where it applies, the
// pids controller's pids.max less its pids.current), 0 where nothing limits them.
uint64_t process_limit();

// Throws std::invalid_argument where this process is one rank of a data-parallel run
// (`ranks`) and its rendezvous host, MASTER_ADDR, is a name that does not resolve: said at
// once, rather than after the ranks' timeout of attempts to reach it.
void check_master_addr(const RankInfo& ranks);

// Returns the exit status for the command: 0 when every rank succeeded, 128 + the signal
// where SIGINT, SIGTERM or SIGHUP reached this process and the ranks stopped (said on
// `err`), else rank 0's status where it failed, else 1 (the failed ranks named on `err`).
int launch_ranks(const LaunchOptions& opt, std::ostream& err);

// The variable that tells a rank its launcher's pid (set by launch_ranks()).
inline constexpr const char* kLauncherPidVariable = "FP8WB_LAUNCHER_PID";
// The variable that tells rank 0 the identity of its run (LaunchOptions::run_uuid).
inline constexpr const char* kLauncherRunUuidVariable = "FP8WB_LAUNCHER_RUN_UUID";

// In a rank that launch_ranks() started: the identity its launcher chose for the run
// (empty where there is none).
std::string launcher_run_uuid();

// Whether this process is a rank that launch_ranks() started (not one of torchrun's or
// srun's).
bool started_by_launch_ranks();

// In a rank that launch_ranks() started: SIGTERM arrives when the launcher dies, however it
// died (then the rank stops after its step, as on Ctrl-C), and a launcher already gone
// stops the rank now. Nothing for ranks started otherwise.
void stop_with_launcher();

}  // namespace fp8wb::cli
