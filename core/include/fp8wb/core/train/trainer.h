// defines: Trainer: trains a run's model with FP8 linear layers (and, optionally, a
// high-precision reference in lockstep on the same batches), publishing a MetricBatch
// per step on a MetricBus. Runs on its own thread; pause, resume and stop take effect
// between steps; every error is caught at the thread boundary and ends the run as
// failed with its message. Plain interface (pimpl): no torch in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/metrics.h"
#include "fp8wb/core/train/distributed.h"

namespace fp8wb {

class Trainer {
 public:
  // Checks the config (throws std::invalid_argument naming the field); the model is
  // built when the run starts.
  Trainer(RunConfig config, std::shared_ptr<MetricBus> bus, int64_t run_id = 0);
  ~Trainer();  // stops the run and waits for its thread
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void start();  // on a thread of its own
  void run();    // on the calling thread; returns when the run has ended
  void pause();
  void resume();
  void stop();  // ends the run (status 'stopped') after the step in progress
  void join();
  // CPU threads this run computes with (0: the process's setting); for runs side by side.
  void setComputeThreads(int threads);
  // A data-parallel run (before start()): this process is one of `ranks.world` ranks,
  // each training the same model on its share of every batch (the config's batch is the
  // global one and must divide evenly), gradients averaged over all ranks. Rank 0's bus
  // gets the run; on a GPU each rank takes the GPU of its local rank.
  void setRanks(const RankInfo& ranks);

  RunStatus status() const;
  std::string message() const;  // why the run failed or diverged
  int64_t steps_done() const;
  const RunConfig& config() const;

  // "cpu", "cuda:0": where a config's device points (throws std::invalid_argument with
  // a clear message when CUDA is asked for and absent).
  static std::string resolve_device(const std::string& device);
  // The CUDA devices visible (0 without CUDA).
  static int cuda_device_count();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp8wb
