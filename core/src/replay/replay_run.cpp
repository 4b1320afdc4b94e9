// A stored run made ready for a replay (replay_run.h).
#include "fp8wb/core/replay/replay_run.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/counted.h"
#include "fp8wb/core/watch/watch.h"

namespace fp8wb {

std::string amax_tensor_label(const AmaxTensor& t) {
  return t.layer + "/" + std::string(role_name(t.role));
}

namespace {

bool selected(const AmaxTensor& t, const std::string& want) {
  return want.empty() || want == t.layer || want == amax_tensor_label(t);
}

std::string some_labels(const std::vector<AmaxTensor>& ts) {
  std::string s;
  size_t shown = 0;
  for (const AmaxTensor& t : ts) {
    if (shown == 6) {
      s += ", ...";
      break;
    }
    s += (s.empty() ? "" : ", ") + amax_tensor_label(t);
    ++shown;
  }
  return s;
}

}  // namespace

ReplayRun load_replay_run(const RunStore& store, int64_t run_id, const std::string& tensor,
                          bool sampled) {
  const std::optional<RunInfo> info = store.run(run_id);
  if (!info) throw ReplayError("no run " + std::to_string(run_id) + " in " + store.path());
  ReplayRun r;
  r.run_id = run_id;
  r.name = info->name;
  RunConfig cfg;
  try {
    // A watched run's stored config holds its FP8 settings beside the script's own.
    const std::optional<RunConfig> watched = watched_run_config(info->config_json);
    cfg = watched ? *watched : parse_run_config(info->config_json);
  } catch (const std::exception& e) {
    throw ReplayError("run " + std::to_string(run_id) + "'s config cannot be read: " + e.what());
  }
  if (!cfg.fp8) {
    throw ReplayError("run " + std::to_string(run_id) +
                      " ran without FP8 (fp8=false): it has no scales to replay");
  }
  if (cfg.recipe != Float8Recipe::Tensorwise) {
    throw ReplayError("run " + std::to_string(run_id) + " used the " +
                      std::string(float8_recipe_name(cfg.recipe)) +
                      " recipe: delayed scaling replays tensorwise scales only");
  }
  const Float8LinearConfig fc = float8_config_of(cfg);
  r.run.delayed = fc.delayed;
  r.run.scale_stored_as_is = info->kind == RunKind::Python;
  r.run.config = fc.delayed_scaling;
  r.run.config.margin = cfg.margin;
  r.notes.push_back(kReplayAssumption);
  if (!r.run.delayed) {
    r.notes.push_back(
        "run " + std::to_string(run_id) +
        " used current scaling (each step's scale from its own amax): the cells replay its "
        "amaxes as delayed scaling, which it did not use; its own current scales are what "
        "the stored-scale check reproduces");
  }

  StepAmaxTable table = store.step_amax(run_id);
  const std::vector<TensorMetrics> stats = store.tensor_stats(run_id);
  if (table.steps.empty()) {
    std::set<int64_t> steps;
    for (const TensorMetrics& t : stats) steps.insert(t.step);
    std::string which;
    if (!steps.empty()) {
      which = "its statistics hold the amax of " +
              counted(static_cast<int64_t>(steps.size()), "sampled step") + " (steps " +
              std::to_string(*steps.begin()) + " to " + std::to_string(*steps.rbegin()) +
              ", stats_interval " + std::to_string(cfg.stats_interval) + ")";
    }
    if (!sampled || steps.empty()) {
      throw ReplayError(
          "run " + std::to_string(run_id) +
          " has no per-step amax (runs record it from this version on)" +
          (steps.empty() ? std::string(", and no sampled statistics either: nothing to replay")
                         : "; " + which +
                               ": --sampled replays those as consecutive steps, an approximation"));
    }
    // The sampled steps' amax, taken as consecutive steps.
    r.from_sampled_steps = true;
    table.tensors.clear();  // the order recorded, if any, has no rows to go with
    std::map<std::pair<std::string, Role>, size_t> index;
    for (const TensorMetrics& t : stats) {
      if (index.count({t.layer, t.role})) continue;
      index[{t.layer, t.role}] = table.tensors.size();
      table.tensors.push_back({t.layer, t.role, fc.recipe(t.role).format});
    }
    table.steps.assign(steps.begin(), steps.end());
    table.amax.assign(table.steps.size() * table.tensors.size(), std::nanf(""));
    for (const TensorMetrics& t : stats) {
      const size_t i = static_cast<size_t>(
          std::lower_bound(table.steps.begin(), table.steps.end(), t.step) - table.steps.begin());
      table.amax[i * table.tensors.size() + index[{t.layer, t.role}]] = t.amax;
    }
    r.notes.push_back(which +
                      ", replayed as consecutive steps: a window counts sampled steps, "
                      "and the figures approximate what every step would give");
  }
  // The selected tensors.
  std::vector<size_t> keep;
  for (size_t j = 0; j < table.tensors.size(); ++j)
    if (selected(table.tensors[j], tensor)) keep.push_back(j);
  if (keep.empty()) {
    throw ReplayError("run " + std::to_string(run_id) + " has no FP8 tensor '" + tensor +
                      "' (LAYER or LAYER/ROLE; its tensors: " + some_labels(table.tensors) + ")");
  }
  ReplayInput& in = r.input;
  for (size_t j : keep) in.tensors.push_back(table.tensors[j]);
  in.steps = table.steps;
  in.amax.resize(in.steps.size() * keep.size());
  const size_t T0 = table.tensors.size();
  for (size_t i = 0; i < in.steps.size(); ++i)
    for (size_t k = 0; k < keep.size(); ++k)
      in.amax[i * keep.size() + k] = table.amax[i * T0 + keep[k]];
  // The sampled steps' stored scales and histograms (the exact check needs every step's
  // amax: not from the sampled steps alone).
  if (!r.from_sampled_steps) {
    std::map<std::pair<std::string, Role>, size_t> where;
    for (size_t k = 0; k < in.tensors.size(); ++k)
      where[{in.tensors[k].layer, in.tensors[k].role}] = k;
    std::set<int64_t> all_steps;
    for (const TensorMetrics& t : stats) all_steps.insert(t.step);
    // Every k-th sampled step's histograms (at most kMaxReplaySampledSteps steps).
    const size_t every = (all_steps.size() + kMaxReplaySampledSteps - 1) / kMaxReplaySampledSteps;
    std::set<int64_t> hist_steps;
    size_t n = 0;
    for (int64_t st : all_steps)
      if (n++ % std::max<size_t>(every, 1) == 0) hist_steps.insert(st);
    for (const TensorMetrics& t : stats) {
      const auto it = where.find({t.layer, t.role});
      if (it == where.end()) continue;
      r.stored.push_back({t.step, it->second, t.scale});
      if (!hist_steps.count(t.step)) continue;
      ReplaySample s;
      s.step = t.step;
      s.tensor = it->second;
      s.scale = t.scale;
      std::copy(std::begin(t.raw.hist), std::end(t.raw.hist), s.hist);
      r.samples.push_back(s);
    }
    if (every > 1) {
      r.notes.push_back("the estimates use every " + std::to_string(every) + "th sampled step (" +
                        std::to_string(hist_steps.size()) + " of " +
                        std::to_string(all_steps.size()) + ")");
    }
  }
  r.notes.push_back(kReplayEstimateBasis);
  return r;
}

}  // namespace fp8wb
