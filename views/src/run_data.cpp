#include "fp8wb/views/run_data.h"

#include <cmath>
#include <cstring>

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

TensorSeries& RunData::series(const std::string& layer, const std::string& role) {
  const auto key = std::make_pair(layer, role);
  const auto it = index_.find(key);
  if (it != index_.end()) return tensors_[it->second];
  index_[key] = tensors_.size();
  tensors_.push_back({layer, role, {}});
  return tensors_.back();
}

const TensorSeries* RunData::tensor(const std::string& layer, const std::string& role) const {
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

void RunData::load(const RunStore& store, int64_t run_id) {
  const auto info = store.run(run_id);
  if (!info) throw StoreError("no run " + std::to_string(run_id) + " in " + store.path());
  setRun(run_id, info->name, info->config_json);
  status_ = info->status;
  message_ = info->message;
  // Scalars: the series by step.
  const char* names[] = {"loss", "ref_loss", "loss_gap", "grad_norm", "lr", "tokens_per_s", "step_ms"};
  std::map<int64_t, StepMetrics> by_step;
  for (int k = 0; k < 7; ++k) {
    for (const SeriesPoint& p : store.series(run_id, names[k])) {
      StepMetrics& m = by_step[p.step];
      m.step = p.step;
      double* field[] = {&m.loss, &m.ref_loss, &m.loss_gap, &m.grad_norm,
                         &m.lr,   &m.tokens_per_s, &m.step_ms};
      *field[k] = p.value;
    }
  }
  for (auto& [s, m] : by_step) steps_.push_back(m);
  // Tensor statistics with their maps and amax windows.
  std::map<std::tuple<std::string, std::string, int64_t>, const BlobRow*> maps, windows;
  const auto map_rows = store.blobs(run_id, "error_map");
  const auto window_rows = store.blobs(run_id, "amax_history");
  for (const auto& b : map_rows) maps[{b.layer, b.role, b.step}] = &b;
  for (const auto& b : window_rows) windows[{b.layer, b.role, b.step}] = &b;
  for (const TensorStatRow& r : store.tensor_stats(run_id)) {
    TensorMetrics t;
    t.step = r.step;
    t.layer = r.layer;
    t.role = r.role;
    t.amax = static_cast<float>(r.amax);
    t.scale = static_cast<float>(r.scale);
    t.raw.numel = static_cast<uint64_t>(r.numel);
    t.raw.zeros = static_cast<uint64_t>(r.zeros);
    t.raw.underflow = static_cast<uint64_t>(r.underflow);
    t.raw.saturated = static_cast<uint64_t>(r.saturated);
    t.raw.nonfinite = static_cast<uint64_t>(r.nonfinite);
    t.raw.subnormal = static_cast<uint64_t>(r.subnormal);
    t.raw.sq_err = r.sq_err;
    t.raw.sq_sum = r.sq_sum;
    for (size_t i = 0; i < r.histogram.size() && i < static_cast<size_t>(kHistBins); ++i)
      t.raw.hist[i] = r.histogram[i];
    if (const auto it = maps.find({r.layer, r.role, r.step}); it != maps.end()) {
      const BlobRow& b = *it->second;
      if (b.shape.size() == 2) {
        t.map_grid.rows = b.shape[0];
        t.map_grid.cols = b.shape[1];
        t.map_rel_error.resize(b.data.size() / sizeof(float));
        std::memcpy(t.map_rel_error.data(), b.data.data(), t.map_rel_error.size() * sizeof(float));
      }
    }
    if (const auto it = windows.find({r.layer, r.role, r.step}); it != windows.end()) {
      t.amax_history.resize(it->second->data.size() / sizeof(float));
      std::memcpy(t.amax_history.data(), it->second->data.data(),
                  t.amax_history.size() * sizeof(float));
    }
    series(t.layer, t.role).points.push_back(point_of(t));
  }
  events_ = store.events(run_id);
  ++revision_;
}

}  // namespace fp8wb
