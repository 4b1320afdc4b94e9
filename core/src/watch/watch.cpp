#include "fp8wb/core/watch/watch.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "config/config_json.h"

namespace fp8wb {

using nlohmann::json;

namespace {

// The keys of RunConfig that a watched run takes.
constexpr const char* kWatchKeys[] = {"recipe",  "window",  "margin",   "stats_interval",
                                      "formats", "scaling", "amax_algo"};

json object_of(const std::string& text, const char* what) {
  check_json_nesting(text, what);
  json j;
  try {
    j = parse_config_json(text);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string(what) + ": " + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument(std::string(what) + " is not a JSON object");
  return j;
}

RunConfig config_of_keys(const json& given, const std::string& name) {
  json c = json::object();
  for (const auto& [key, value] : given.items()) {
    bool known = false;
    for (const char* k : kWatchKeys) known |= key == k;
    if (!known) {
      std::string keys;
      for (const char* k : kWatchKeys) keys += (keys.empty() ? "" : ", ") + std::string(k);
      throw std::invalid_argument(key + ": not a setting of a watched run (its settings: " + keys +
                                  ")");
    }
    c[key] = value;
  }
  c["name"] = name;
  c["reference"] = false;  // the script trains one model
  c["sqnr_interval"] = 0;  // no GEMMs of its own to compare
  return parse_run_config(c.dump());
}

}  // namespace

RunConfig watch_run_config(const WatchSettings& s) {
  return config_of_keys(object_of(s.settings_json, "the watch settings"), s.name);
}

std::string watch_config_json(const WatchSettings& s, const RunConfig& c) {
  const json full = json::parse(run_config_json(c));
  json out = json::object();
  out["source"] = kWatchRunKind;
  out["model"] = s.model;
  out["device"] = s.device;
  for (const char* k : kWatchKeys) out[k] = full.at(k);
  out["config"] = object_of(s.config_json, "config");
  return out.dump(2);
}

std::optional<RunConfig> watched_run_config(const std::string& config_json) {
  try {
    check_json_nesting(config_json, "the stored config");
    const json j = json::parse(config_json);
    if (!j.is_object() || j.value("source", std::string()) != kWatchRunKind) return std::nullopt;
    json keys = json::object();
    for (const char* k : kWatchKeys) {
      if (j.contains(k)) keys[k] = j[k];
    }
    return config_of_keys(keys, "run");
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Float8LinearConfig watch_float8_config(const RunConfig& c) {
  Float8LinearConfig f = float8_config_of(c);
  for (QuantRecipe* r : {&f.input, &f.weight, &f.grad_output}) {
    // A user's tensors have whatever shape their model gives them: a last, smaller block
    // where the blocks do not divide it.
    r->partial_blocks = r->kind != ScalingKind::Tensorwise && r->kind != ScalingKind::Rowwise;
  }
  return f;
}

Float8LinearConfig stored_float8_config(const std::string& config_json) {
  try {
    return float8_config_of(parse_run_config(config_json));
  } catch (const std::exception&) {
  }
  if (const std::optional<RunConfig> w = watched_run_config(config_json))
    return watch_float8_config(*w);
  RunConfig defaults;
  defaults.scaling = ScalingMode::Current;
  return float8_config_of(defaults);
}

Watch::Watch(const std::string& db_path, const WatchSettings& settings)
    : config_(watch_run_config(settings)), fp8_(watch_float8_config(config_)) {
  const std::string stored = watch_config_json(settings, config_);
  store_ = RunStore::open(db_path);
  run_id_ = store_->create_run(settings.name, RunKind::Python, stored, settings.device);
  pending_.run_id = run_id_;
}

Watch::~Watch() {
  if (ended_) return;
  try {
    end(RunStatus::Interrupted, "the watch was closed without ending its run");
  } catch (...) {
    // The store's own message stays: the next open marks the run interrupted.
  }
}

bool Watch::sampling() const {
  return config_.stats_interval > 0 && step_ % config_.stats_interval == 0;
}

const QuantRecipe& Watch::recipe(Role role) const {
  return fp8_.recipe(role);
}

Watch::RoleState& Watch::state(const std::string& layer, Role role) {
  RoleState& s = roles_[{layer, role}];
  if (fp8_.delayed && !s.scaler) s.scaler.emplace(recipe(role).format, fp8_.delayed_scaling);
  return s;
}

bool Watch::records_amax(Role role) const {
  return fp8_.delayed || recipe(role).kind == ScalingKind::Tensorwise;
}

bool Watch::records_amax() const {
  return records_amax(Role::Input) || records_amax(Role::Weight) || records_amax(Role::GradOutput);
}

bool Watch::takes_stats(const std::string& layer, Role role) {
  return sampling() && state(layer, role).stats_step != step_;
}

float Watch::delayed_scale(const std::string& layer, Role role) {
  RoleState& s = state(layer, role);
  return s.scaler ? s.scaler->scale_for_step(0) : 0.0f;
}

void Watch::observe(const std::string& layer, Role role, const TensorRef& x) {
  if (ended_) throw std::logic_error("the watched run has ended");
  if (x.rows < 0 || x.cols < 0) throw std::invalid_argument("a tensor of negative shape");
  if (x.numel() > 0 && !x.f32 && !x.bf16) throw std::invalid_argument("a null tensor");
  const bool stats = takes_stats(layer, role);
  if (!stats) {
    // Between samples: the amax alone (the recipe's groups do not change a tensor's amax).
    if (records_amax(role))
      observe_amax(layer, role, step_,
                   compute_amax(x, make_layout(QuantRecipe{}, x.rows, x.cols)).tensor_amax);
    return;
  }
  const QuantRecipe& r = recipe(role);
  StatsOptions so;
  so.enabled = so.histogram = so.error_map = true;
  const float scale = delayed_scale(layer, role);
  if (scale > 0) {
    // Delayed scaling (tensorwise): the scale of earlier steps' amaxes.
    ScaleSet scales;
    scales.layout = make_layout(r, x.rows, x.cols);
    scales.scale = {scale};
    scales.scale_inv = {1.0f / scale};
    observe_stats(layer, role, quantize(x, r, scales, {}, so).stats, scale);
  } else {
    const CurrentQuantization cq = quantize_current(x, r, {}, so);
    observe_stats(layer, role, cq.result.stats,
                  cq.scales.scale.empty() ? 0.0f : cq.scales.scale[0]);
  }
}

void Watch::observe_amax(const std::string& layer, Role role, int64_t step, float amax) {
  if (ended_) throw std::logic_error("the watched run has ended");
  if (step < 0 || step > step_) {
    throw std::invalid_argument("an amax of step " + std::to_string(step) +
                                ": the run is at step " + std::to_string(step_));
  }
  if (!records_amax(role)) return;
  take_amax(layer, role, state(layer, role), step, amax);
}

void Watch::take_amax(const std::string& layer, Role role, RoleState& s, int64_t step, float amax) {
  if (step < s.amax_step) {
    throw std::invalid_argument("layer " + layer + ", " + std::string(role_name(role)) +
                                ": an amax of step " + std::to_string(step) +
                                " after one of step " + std::to_string(s.amax_step) +
                                " (amaxes come in step order)");
  }
  s.amax_step = step;
  if (s.scaler) s.scaler->update(amax);
  record_amax(layer, role, step, amax);
}

void Watch::observe_stats(const std::string& layer, Role role, const TensorStats& taken,
                          float scale) {
  if (ended_) throw std::logic_error("the watched run has ended");
  RoleState& s = state(layer, role);
  s.stats_step = step_;
  if (records_amax(role)) take_amax(layer, role, s, step_, taken.amax());
  TensorMetrics t;
  t.step = step_;
  t.layer = layer;
  t.role = role;
  set_recipe(t, fp8_);
  t.amax = taken.amax();
  t.scale = scale;
  t.raw = taken.raw;
  t.map_grid = taken.map_grid;
  t.map_rel_error = taken.map_rel_error();
  if (s.scaler) t.amax_history = s.scaler->history();
  pending_.tensors.push_back(std::move(t));
}

void Watch::record_amax(const std::string& layer, Role role, int64_t step, float amax) {
  auto it = amax_index_.find({layer, role});
  if (it == amax_index_.end()) {
    if (amax_columns_fixed_) {
      ++unrecorded_;
      return;
    }
    it = amax_index_.emplace(std::make_pair(layer, role), amax_tensors_.size()).first;
    amax_tensors_.push_back({layer, role, recipe(role).format});
  }
  if (step != row_step_) {
    if (step < row_step_) {  // a role that comes later than the others of its step
      ++unrecorded_;
      return;
    }
    flush_amax_row();
    row_step_ = step;
  }
  row_.resize(amax_tensors_.size(), std::nanf(""));
  row_[it->second] = amax;
}

void Watch::flush_amax_row() {
  if (row_step_ < 0) return;
  if (!amax_columns_fixed_) {
    pending_.amax_tensors = amax_tensors_;
    amax_columns_fixed_ = true;
  }
  row_.resize(amax_tensors_.size(), std::nanf(""));
  pending_.step_amax.push_back({row_step_, std::move(row_)});
  row_.assign(amax_tensors_.size(), std::nanf(""));
  row_step_ = -1;
}

void Watch::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& named) {
  if (ended_) throw std::logic_error("the watched run has ended");
  if (step < 0 || step > step_) {
    throw std::invalid_argument("scalars of step " + std::to_string(step) +
                                ": the run is at step " + std::to_string(step_));
  }
  StepMetrics m;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  m.step = step;
  m.loss = m.ref_loss = m.loss_gap = m.grad_norm = m.lr = m.tokens_per_s = m.step_ms = nan;
  double tokens = nan;
  MetricBatch b;
  b.run_id = run_id_;
  for (const auto& [name, value] : named) {
    bool field = false;
    for (const StepSeries& k : kStepSeries) {
      if (name == k.name) {
        m.*k.field = value;
        field = true;
      }
    }
    if (name == "tokens") {
      tokens = value;
    } else if (!field) {
      b.scalars.push_back({step, "scalar/" + name, value});
    }
  }
  if (std::isfinite(tokens) && m.step_ms > 0 && std::isnan(m.tokens_per_s))
    m.tokens_per_s = tokens / (m.step_ms / 1000.0);
  b.steps.push_back(m);
  store_->write(std::move(b));
}

void Watch::next_step() {
  if (ended_) throw std::logic_error("the watched run has ended");
  MetricBatch b;
  std::swap(b, pending_);
  b.run_id = run_id_;
  pending_.run_id = run_id_;
  if (!b.tensors.empty() || !b.events.empty() || !b.step_amax.empty()) store_->write(std::move(b));
  ++step_;
}

void Watch::event(const std::string& kind, const std::string& message) {
  if (ended_) throw std::logic_error("the watched run has ended");
  // A kind this fp8wb does not know is stored as given (stored_run_event()).
  pending_.events.push_back(stored_run_event(step_, kind, message));
}

void Watch::end(RunStatus status, const std::string& message) {
  if (ended_) return;
  ended_ = true;
  flush_amax_row();
  MetricBatch b;
  std::swap(b, pending_);  // statistics of a step that did not end are kept too
  b.run_id = run_id_;
  b.steps.clear();
  b.events.push_back({step_, run_event_kind_of(status), message, {}});
  b.final = true;
  b.status = status;
  b.message = message;
  store_->write(std::move(b));
  store_->flush();
}

}  // namespace fp8wb
