// defines: launch_ranks(): `fp8wb train --nproc N` starts N ranks of a data-parallel run
// on this machine, each this same program with the same arguments and RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT in its environment (as torchrun
// sets them), waits for them all, ends the others when one fails, and reports;
// stop_with_launcher(): a rank ends when its launcher does.
#pragma once

#include <ostream>

namespace fp8wb::cli {

struct LaunchOptions {
  int nproc = 2;
  int master_port = 0;     // 0: MASTER_PORT from the environment, else a free port
  int grace_seconds = 10;  // after a rank fails, how long the others have to end on their own
};

// Returns the exit status for the command: 0 when every rank succeeded, else rank 0's
// status where it failed, else 1 (the failed ranks named on `err`).
int launch_ranks(const LaunchOptions& opt, std::ostream& err);

// The variable that tells a rank its launcher's pid (set by launch_ranks()).
inline constexpr const char* kLauncherPidVariable = "FP8WB_LAUNCHER_PID";

// In a rank that launch_ranks() started: SIGTERM arrives when the launcher dies, however it
// died (then the rank stops after its step, as on Ctrl-C), and a launcher already gone
// stops the rank now. Nothing for ranks started otherwise.
void stop_with_launcher();

}  // namespace fp8wb::cli
