// defines: RunStartOptions, StartedRun, start_run(), distinct_run_name(): the one way a
// training run starts, for the CLI's `train`, the GUI's Start and each trial of a sweep:
// its config resolved (hf=DIR: the checkpoint's shape) and validated, its device resolved,
// its row created in the store with the config as stored, a metric bus that writes to the
// store (and to the caller's consumers), and its Trainer, not yet started.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/metrics.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/train/trainer.h"

namespace fp8wb {

struct RunStartOptions {
  RunKind kind = RunKind::Train;  // the run's kind in the store: Train or SweepTrial
  int64_t sweep_id = 0;           // a sweep's trial: its sweep
  std::string uuid;               // the run's identity where the caller gave it one (ranks)
  // A name the store already holds gets " #2", " #3", ...: runs started from one preset
  // stay apart in the list, the overlays and the exports.
  bool distinct_name = false;
  // Besides the store, in this order, before it (the console, the GUI's buffer): each
  // reads a batch, and the store, last, takes it into its writer's queue without a copy.
  std::vector<std::shared_ptr<MetricConsumer>> consumers;
};

struct StartedRun {
  int64_t id = 0;
  RunConfig config;    // as resolved, validated and stored
  std::string device;  // "cpu", "cuda:0"
  std::shared_ptr<MetricBus> bus;
  std::unique_ptr<Trainer> trainer;  // start() or run() it
};

// Throws std::invalid_argument naming the field of a config that cannot run, or the
// device that is not there; nothing is stored then. StoreError where the store cannot
// take the run.
StartedRun start_run(RunStore& store, RunConfig config, const RunStartOptions& options = {});

// `name`, or where a run of the store already has it, "name #2", "name #3", ... (within
// the config's bound on a name's length).
std::string distinct_run_name(const RunStore& store, const std::string& name);

}  // namespace fp8wb
