// defines: RunFollower: follows a run that any process is writing into a run database
// (the CLI, a sweep's trials, another GUI), the way a GUI follows its own trainer: what
// was committed since the last look goes out as MetricBatches on a MetricBus, and a
// final batch says how the run ended, or that its writer died. Polls its own read-only
// connection on a thread of its own; WAL keeps it from blocking the writer.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "fp8wb/core/metrics.h"
#include "fp8wb/core/store/run_store.h"

namespace fp8wb {

class RunFollower {
 public:
  // Starts following `run_id` of the database at `path` from `cursor` (what the caller
  // has read already). Throws StoreError when the database cannot be opened.
  RunFollower(const std::string& path, int64_t run_id, RunCursor cursor,
              std::shared_ptr<MetricBus> bus,
              std::chrono::milliseconds interval = std::chrono::milliseconds(250));
  ~RunFollower();  // stops and waits for the thread
  RunFollower(const RunFollower&) = delete;
  RunFollower& operator=(const RunFollower&) = delete;

  int64_t run_id() const;
  bool ended() const;  // the final batch has gone out
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp8wb
