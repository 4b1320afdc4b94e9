#include "fp8wb/core/metrics.h"

namespace fp8wb {

const char* run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::Running: return "running";
    case RunStatus::Paused: return "paused";
    case RunStatus::Finished: return "finished";
    case RunStatus::Stopped: return "stopped";
    case RunStatus::Diverged: return "diverged";
    case RunStatus::Failed: return "failed";
    case RunStatus::Interrupted: return "interrupted";
  }
  return "unknown";
}

bool parse_run_status(const std::string& name, RunStatus& out) {
  for (RunStatus s :
       {RunStatus::Running, RunStatus::Paused, RunStatus::Finished, RunStatus::Stopped,
        RunStatus::Diverged, RunStatus::Failed, RunStatus::Interrupted}) {
    if (name == run_status_name(s)) {
      out = s;
      return true;
    }
  }
  return false;
}

}  // namespace fp8wb
