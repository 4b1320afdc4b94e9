// defines: Trainer::Impl (a run's config, bus, thread, controls and status), shared by
// Trainer's two files: trainer_control.cpp (no torch: construction, start, pause, resume,
// stop, the status read from other threads, the final batch) and the torch translation
// unit trainer.cpp (the step loop); and the loop's helpers that need no torch
// (check_weights_path(), RunResidentMemory, in trainer_control.cpp). No torch in this
// header. Internal to core.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fp8wb/core/train/trainer.h"

namespace torch::nn {
class Module;
}

namespace fp8wb {

struct Trainer::Impl {
  RunConfig cfg;
  std::shared_ptr<MetricBus> bus;
  int64_t run_id = 0;
  std::thread thread;
  std::atomic<bool> stop_flag{false}, pause_flag{false};
  std::mutex mutex;
  std::condition_variable cv;
  std::atomic<RunStatus> status{RunStatus::Running};
  std::string message;  // guarded by mutex
  std::atomic<int64_t> steps{0};
  int compute_threads = 0;
  RankInfo ranks;

  // Ends the run: its status and message, and the final batch (`events`, then the status's
  // own), which no consumer's failure turns into an exception.
  void finish(RunStatus s, const std::string& msg, std::vector<RunEvent> events = {});

  // Hands the batch on (the bus's last consumer takes it): `b` is left empty. In a
  // data-parallel run only rank 0 publishes.
  void publish(MetricBatch& b);

  // The learning rate at a step: linear warmup, then a cosine decay to lr x min_lr_ratio.
  double lr_at(int64_t step) const;

  // Waits while paused; returns false when the run is to stop.
  bool wait_if_paused(int64_t step);

  // The run itself, on the run's thread (trainer.cpp); throws what ends it as failed.
  void body();
  void save_weights(torch::nn::Module& model);
};

namespace train {

// Makes glibc keep memory the process frees for its next allocations (up to 128 MiB at a
// heap's top; blocks up to 32 MiB from the heaps), where by default it hands freed pages
// back to the system at once (past 128 KiB) and faults them in again on the next
// allocation. A step that samples statistics allocates and frees every tensor's error map
// (a GPT-2-small step: 144 maps, about 12 MB), so each sampled step paid some 3,000 page
// faults. Once a process; returns whether the thresholds are set as above: false where
// the process's environment sets glibc's own (MALLOC_TRIM_THRESHOLD_,
// MALLOC_MMAP_THRESHOLD_, MALLOC_TOP_PAD_: those stand), under a sanitizer's allocator,
// and without glibc.
bool keep_freed_host_memory();

// The resident memory a run adds to its process: the largest resident set seen since the
// run started, less the resident set at its start, so that what the process held before
// (a GUI that analysed a large checkpoint, an earlier run) never counts. Linux's peak
// (VmHWM) is reset at the start where the process may (/proc/self/clear_refs), so peaks
// between samples count too; elsewhere the samples alone. NaN where the resident set
// cannot be read.
class RunResidentMemory {
 public:
  RunResidentMemory();
  // The growth so far, in bytes (never below 0).
  double growth();

 private:
  double start_ = 0, max_ = 0;
  bool peak_reset_ = false;
};

// Where --save-weights will write: its folder must exist and the path be a regular file
// or nothing (the writer refuses to replace anything else).
void check_weights_path(const std::string& path);

}  // namespace train

}  // namespace fp8wb
