// defines: StopSignals: while it lives, SIGINT (Ctrl-C), SIGTERM and SIGHUP ask the
// command to stop cleanly (the run or sweep is kept) instead of killing the process; the
// previous handlers come back when it goes.
#pragma once

#include <atomic>
#include <csignal>

namespace fp8wb::cli {

inline std::atomic<bool> g_stop_requested{false};

extern "C" inline void fp8wb_on_stop_signal(int) {
  g_stop_requested = true;
}

class StopSignals {
 public:
  StopSignals() {
    g_stop_requested = false;
    for (int i = 0; i < 3; ++i) previous_[i] = std::signal(kSignals[i], fp8wb_on_stop_signal);
  }
  ~StopSignals() {
    for (int i = 0; i < 3; ++i) std::signal(kSignals[i], previous_[i]);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  bool requested() const { return g_stop_requested; }

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  void (*previous_[3])(int) = {};
};

}  // namespace fp8wb::cli
