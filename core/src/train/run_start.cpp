// start_run(): the one way a training run starts (run_start.h).
#include "fp8wb/core/train/run_start.h"

#include <algorithm>
#include <set>
#include <utility>

namespace fp8wb {

std::string distinct_run_name(const RunStore& store, const std::string& name) {
  if (name.empty()) return name;
  std::set<std::string> taken;
  for (const RunInfo& r : store.runs()) taken.insert(r.name);
  if (!taken.count(name)) return name;
  for (int k = 2;; ++k) {
    const std::string suffix = " #" + std::to_string(k);
    const std::string candidate =
        name.substr(0, std::min(name.size(), kMaxRunNameLength - suffix.size())) + suffix;
    if (!taken.count(candidate)) return candidate;
  }
}

StartedRun start_run(RunStore& store, RunConfig config, const RunStartOptions& options) {
  resolve_hf_config(config);  // hf=DIR: the checkpoint's shape, stored with the run
  validate_run_config(config);
  StartedRun r;
  r.device = Trainer::resolve_device(config.device);
  if (options.distinct_name) config.name = distinct_run_name(store, config.name);
  r.id = store.create_run(config.name, options.kind, run_config_json(config), r.device,
                          options.sweep_id, options.uuid);
  r.bus = std::make_shared<MetricBus>();
  // The store last: the bus's last consumer takes the batch (a step sampling statistics
  // carries every tensor's error map: 2.4 MB for a 12-layer GPT), the others read it.
  for (const auto& c : options.consumers) r.bus->add(c);
  r.bus->add(store.consumer());
  r.trainer = std::make_unique<Trainer>(config, r.bus, r.id);
  r.config = std::move(config);
  return r;
}

}  // namespace fp8wb
