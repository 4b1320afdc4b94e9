#include "fp8wb/views/run_tabs/run_data.h"

#include "fp8wb/core/watch/watch.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <type_traits>
#include <utility>

namespace fp8wb {

void RunData::clear() {
  const int64_t generation = generation_;
  const int64_t revision = revision_;
  *this = RunData();
  generation_ = generation + 1;
  revision_ = revision + 1;  // counts on: every tab redraws
}

void RunData::setRun(int64_t id, const std::string& name, const std::string& config_json) {
  clear();
  run_id_ = id;
  name_ = name;
  status_ = RunStatus::Running;
  try {
    config_ = parse_run_config(config_json);
    has_config_ = true;
  } catch (const std::exception&) {
    // A watched script's run: its FP8 settings (scaling, window, margin, formats) as a
    // config; a run from elsewhere: plot what there is.
    const std::optional<RunConfig> watched = watched_run_config(config_json);
    has_config_ = watched_ = watched.has_value();
    if (watched) {
      config_ = *watched;
      config_.name = name;
    }
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

namespace {

// Names in the order people count: runs of digits compared as numbers ("blocks.2" before
// "blocks.10"), the rest character by character.
bool natural_less(const std::string& a, const std::string& b) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      size_t is = i, js = j;  // leading zeros aside
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      if (ie - is != je - js) return ie - is < je - js;
      if (const int c = a.compare(is, ie - is, b, js, je - js); c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  if (i < a.size() || j < b.size()) return j < b.size();
  return a < b;  // equal as counted ("01" and "1"): a fixed order still
}

}  // namespace

std::vector<std::string> RunData::layers() const {
  std::vector<std::string> out;
  for (const auto& t : tensors_) {
    if (out.empty() || out.back() != t.layer) {
      bool seen = false;
      for (const auto& l : out) seen |= l == t.layer;
      if (!seen) out.push_back(t.layer);
    }
  }
  // The same order for a run followed live (its tensors as the passes report them) and one
  // read from the store (by name): the model's, where the run said it (its "layers"
  // event), the others after them by name, numbers as numbers.
  std::map<std::string, size_t> model_order;
  for (const RunEvent& e : events_) {
    if (e.kind != RunEventKind::Layers) continue;
    for (size_t from = 0; from <= e.message.size();) {
      const size_t comma = std::min(e.message.find(", ", from), e.message.size());
      model_order.emplace(e.message.substr(from, comma - from), model_order.size());
      from = comma + 2;
    }
    break;
  }
  std::sort(out.begin(), out.end(), [&](const std::string& a, const std::string& b) {
    const auto ia = model_order.find(a), ib = model_order.find(b);
    if (ia != model_order.end() || ib != model_order.end()) {
      if (ia == model_order.end()) return false;
      if (ib == model_order.end()) return true;
      return ia->second < ib->second;
    }
    return natural_less(a, b);
  });
  return out;
}

// Copies from a batch the caller keeps, moves from one it hands over.
template <class Batch>
void RunData::append_batch(Batch&& b) {
  constexpr bool owned = !std::is_lvalue_reference_v<Batch>;
  auto add = [](auto& to, auto& from) {
    if constexpr (owned) {
      to.insert(to.end(), std::make_move_iterator(from.begin()),
                std::make_move_iterator(from.end()));
    } else {
      to.insert(to.end(), from.begin(), from.end());
    }
  };
  add(steps_, b.steps);
  for (auto& t : b.tensors) {
    if constexpr (owned) {
      series(t.layer, t.role).points.push_back(std::move(t));
    } else {
      series(t.layer, t.role).points.push_back(t);
    }
  }
  add(sqnr_, b.sqnr);
  add(events_, b.events);
  add(ranks_, b.ranks);
  if (!b.amax_tensors.empty() && step_amax_.tensors.empty()) step_amax_.tensors = b.amax_tensors;
  for (const StepAmax& a : b.step_amax) {
    // A row of another shape (none is written) or a step not after the last: left out.
    if (a.amax.size() != step_amax_.tensors.size() ||
        (!step_amax_.steps.empty() && a.step <= step_amax_.steps.back()))
      continue;
    step_amax_.steps.push_back(a.step);
    step_amax_.amax.insert(step_amax_.amax.end(), a.amax.begin(), a.amax.end());
  }
  if (b.final) {
    status_ = b.status;
    message_ = b.message;
  }
  ++revision_;
}

void RunData::append(const MetricBatch& b) {
  append_batch(b);
}

void RunData::append(MetricBatch&& b) {
  append_batch(std::move(b));
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

void RunData::replace(RunData other) {
  const int64_t revision = std::max(revision_, other.revision_) + 1;
  // Another run (or a reload): the tabs draw it anew, nothing appended to what they drew.
  const int64_t generation = std::max(generation_, other.generation_) + 1;
  *this = std::move(other);
  revision_ = revision;
  generation_ = generation;
}

void RunData::setStatus(RunStatus status, const std::string& message) {
  status_ = status;
  message_ = message;
  ++revision_;
}

}  // namespace fp8wb
