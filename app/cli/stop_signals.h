// defines: StopSignals, stop_signal_name(): while it lives, SIGINT (Ctrl-C), SIGTERM and SIGHUP ask
// the command to stop cleanly (the run or sweep is kept) instead of killing the process; the
// previous handlers come back when it goes. signal() says which came first (0: none), for
// an exit status of 128 + its number.
#pragma once

#include <atomic>
#include <csignal>
#include <string>

namespace fp8wb::cli {

inline std::atomic<bool> g_stop_requested{false};
inline std::atomic<int> g_stop_signal{0};

extern "C" inline void fp8wb_on_stop_signal(int sig) {
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, sig);
  g_stop_requested = true;
}

// The signals StopSignals takes, by name: "SIGINT (Ctrl-C)".
inline std::string stop_signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT (Ctrl-C)";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(sig);
  }
}

class StopSignals {
 public:
  StopSignals() {
    g_stop_requested = false;
    g_stop_signal = 0;
    for (int i = 0; i < 3; ++i) previous_[i] = std::signal(kSignals[i], fp8wb_on_stop_signal);
  }
  ~StopSignals() {
    for (int i = 0; i < 3; ++i) std::signal(kSignals[i], previous_[i]);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  bool requested() const { return g_stop_requested; }
  int signal() const { return g_stop_signal; }

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  void (*previous_[3])(int) = {};
};

}  // namespace fp8wb::cli
