// SweepsTab's reads of the run store (sweeps_tab.h): the sweep chosen in the "Sweep" list
// (sweeps_list.cpp) read off the GUI thread, on a connection of its own (read_sweep(): its
// grid, points, status and its trials' runs as they stand), and shown as it arrives:
// showPoints() hands it to the heatmap (sweeps_heatmap.cpp).
#include "fp8wb/views/sweeps/sweeps_tab.h"

#include <QLabel>
#include <QProgressBar>
#include <string>
#include <utility>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/common/store_reader.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "sweeps/sweeps_tab_internal.h"

namespace fp8wb {

namespace sweeps_detail {

SweepRead read_sweep(const std::string& path, int64_t sweep_id) {
  const auto store = open_store_reader(path);
  const auto info = store->sweep(sweep_id);
  if (!info) throw StoreError("no sweep " + std::to_string(sweep_id) + " in " + path);
  SweepRead r;
  r.spec = sweep_from_json(info->grid_json);
  r.points = sweep_points(*store, sweep_id);
  r.status = info->status;
  r.status_text = sweep_status_text(*info);
  r.runs_state = sweep_runs_state(*store, sweep_id);
  return r;
}

std::string sweep_runs_state(const RunStore& store, int64_t sweep_id) {
  const auto info = store.sweep(sweep_id);
  if (!info) return {};
  std::string state = sweep_status_text(*info);
  for (const RunInfo& r : store.runs()) {
    if (r.parent_sweep != sweep_id) continue;
    state += ' ' + std::to_string(r.id) + ':' + std::string(run_status_name(r.status)) +
             (r.live ? "+" : "");
  }
  return state;
}

}  // namespace sweeps_detail

using namespace sweeps_detail;  // SweepRead, read_sweep() (sweeps_tab_internal.h)

void SweepsTab::showSweep(int64_t sweep_id) {
  const std::string path = engine_->databasePath().toStdString();
  if (sweep_id != sweep_id_ && !busy()) {
    // Another sweep: the one shown comes down at once, not left under the new one's name
    // while it is read.
    sweep_id_ = 0;
    spec_ = SweepSpec{};
    points_.clear();
    seen_runs_.clear();
    rebuildSlicers();
    showNoSweep(tr("reading sweep %1…").arg(sweep_id));
    best_->clear();
  }
  setReading(true);
  points_job_.run([path, sweep_id] { return read_sweep(path, sweep_id); },
                  [this, sweep_id](SweepRead r) {
                    setReading(false);
                    showPoints(sweep_id, std::move(r.spec), std::move(r.points), r.status);
                    shown_runs_state_ = std::move(r.runs_state);
                    Q_EMIT sweepShown(sweep_id);
                  },
                  [this](const QString& message) {
                    setReading(false);
                    fail(message);
                  });
}

void SweepsTab::setReading(bool reading) {
  reading_->setVisible(reading);
}

void SweepsTab::showPoints(int64_t sweep_id, SweepSpec spec, std::vector<SweepPoint> points,
                           SweepStatus status) {
  points_job_.drop();  // what it would bring is older
  setReading(false);
  collect_failure_->setVisible(false);  // what is shown now is this sweep
  collect_failure_->clear();
  const bool axes_changed = spec.axes.size() != spec_.axes.size() || sweep_id != sweep_id_;
  if (sweep_id != sweep_id_) {
    clearOverlay();  // the curves of the sweep shown before
    seen_runs_.clear();
  }
  spec_ = std::move(spec);
  sweep_id_ = sweep_id;
  points_ = std::move(points);
  status_of_shown_ = status;
  shown_runs_state_.clear();  // set by showSweep() after this, where it read the sweep
  for (const SweepPoint& p : points_)
    seen_runs_[p.values].insert(p.run_ids.begin(), p.run_ids.end());
  if (axes_changed || static_cast<int>(slicers_.size()) != static_cast<int>(spec_.axes.size()))
    rebuildSlicers();
  redraw();
  selectShownSweep();
}

}  // namespace fp8wb
