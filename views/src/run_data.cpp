#include "fp8wb/views/run_data.h"

#include <cmath>

namespace fp8wb {

namespace {

TensorPoint point_of(const TensorMetrics& t) {
  TensorPoint p;
  p.step = t.step;
  p.amax = t.amax;
  p.scale = t.scale;
  const StatsBuffer& r = t.raw;
  const double finite = static_cast<double>(r.numel - r.nonfinite);
  const double nonzero = finite - static_cast<double>(r.zeros);
  p.underflow_pct = nonzero > 0 ? 100.0 * static_cast<double>(r.underflow) / nonzero : 0;
  p.saturated_pct = finite > 0 ? 100.0 * static_cast<double>(r.saturated) / finite : 0;
  p.sqnr_db = r.sq_err > 0 ? 10.0 * std::log10(r.sq_sum / r.sq_err) : INFINITY;
  p.numel = static_cast<int64_t>(r.numel);
  p.histogram.assign(r.hist, r.hist + kHistBins);
  p.map_rows = t.map_grid.rows;
  p.map_cols = t.map_grid.cols;
  p.error_map = t.map_rel_error;
  p.amax_history = t.amax_history;
  return p;
}

}  // namespace

void RunData::clear() {
  *this = RunData();
}

void RunData::setRun(int64_t id, const std::string& name, const std::string& config_json) {
  clear();
  run_id_ = id;
  name_ = name;
  status_ = "running";
  try {
    config_ = parse_run_config(config_json);
    has_config_ = true;
  } catch (const std::exception&) {
    has_config_ = false;  // a run from elsewhere: plot what there is
  }
  ++revision_;
}

TensorSeries& RunData::series(const std::string& layer, Role role) {
  const auto key = std::make_pair(layer, role);
  const auto it = index_.find(key);
  if (it != index_.end()) return tensors_[it->second];
  index_[key] = tensors_.size();
  tensors_.push_back({layer, role, {}});
  return tensors_.back();
}

const TensorSeries* RunData::tensor(const std::string& layer, Role role) const {
  const auto it = index_.find({layer, role});
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<std::string> RunData::layers() const {
  std::vector<std::string> out;
  for (const auto& t : tensors_) {
    if (out.empty() || out.back() != t.layer) {
      bool seen = false;
      for (const auto& l : out) seen |= l == t.layer;
      if (!seen) out.push_back(t.layer);
    }
  }
  return out;
}

void RunData::append(const MetricBatch& b) {
  steps_.insert(steps_.end(), b.steps.begin(), b.steps.end());
  for (const TensorMetrics& t : b.tensors) series(t.layer, t.role).points.push_back(point_of(t));
  sqnr_.insert(sqnr_.end(), b.sqnr.begin(), b.sqnr.end());
  events_.insert(events_.end(), b.events.begin(), b.events.end());
  if (b.final) {
    status_ = run_status_name(b.status);
    message_ = b.message;
  }
  ++revision_;
}

void RunData::load(const RunStore& store, int64_t run_id, RunCursor* cursor) {
  const auto info = store.run(run_id);
  if (!info) throw StoreError("no run " + std::to_string(run_id) + " in " + store.path());
  setRun(run_id, info->name, info->config_json);
  RunCursor fresh;
  RunCursor& c = cursor ? *cursor : fresh;
  c = RunCursor();
  append(store.read_new(run_id, c));
  status_ = info->status;
  message_ = info->message;
}

void RunData::setStatus(const std::string& status, const std::string& message) {
  status_ = status;
  message_ = message;
  ++revision_;
}

}  // namespace fp8wb
