// What a cell of SweepsTab's heatmap holds (sweeps_tab.h): its grid point (the cell's
// values across and up, the slicers' for the other axes), its runs and figure, the trials
// whose runs were deleted (here and over the whole sweep), and its tooltip.
#include "fp8wb/views/sweeps/sweeps_tab.h"

#include <QComboBox>
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "fp8wb/views/common/name_choices.h"

namespace fp8wb {

std::vector<std::string> SweepsTab::valuesAt(int x, int y) const {
  const int xa = x_axis_->currentIndex(), ya = y_axis_->currentIndex();
  if (xa < 0 || ya < 0 || spec_.axes.empty()) return {};
  // The same axis across and up (a one-axis sweep): one row of cells.
  const bool one_row = xa == ya;
  const auto& xv = spec_.axes[static_cast<size_t>(xa)].values;
  const auto& yv = spec_.axes[static_cast<size_t>(ya)].values;
  const int rows = one_row ? 1 : static_cast<int>(yv.size());
  if (x < 0 || y < 0 || x >= static_cast<int>(xv.size()) || y >= rows) return {};
  std::vector<std::string> values;
  for (size_t k = 0; k < spec_.axes.size(); ++k) {
    const auto& v = spec_.axes[k].values;
    size_t at = static_cast<int>(k) == xa ? static_cast<size_t>(x)
                : static_cast<int>(k) == ya
                    ? static_cast<size_t>(y)
                    : static_cast<size_t>(
                          std::max(0, k < slicers_.size() ? slicers_[k]->currentIndex() : 0));
    if (at >= v.size()) at = 0;
    values.push_back(v[at]);
  }
  return values;
}

const SweepPoint* SweepsTab::pointAt(int x, int y) const {
  const std::vector<std::string> values = valuesAt(x, y);
  if (values.empty()) return nullptr;
  if (indexed_ != points_.data() || indexed_size_ != points_.size()) {
    point_index_.clear();
    for (size_t i = 0; i < points_.size(); ++i) point_index_.emplace(points_[i].values, i);
    indexed_ = points_.data();
    indexed_size_ = points_.size();
  }
  const auto at = point_index_.find(values);
  return at == point_index_.end() ? nullptr : &points_[at->second];
}

int SweepsTab::deletedAt(int x, int y) const {
  const std::vector<std::string> values = valuesAt(x, y);
  if (values.empty()) return 0;
  return deletedOf(values, pointAt(x, y));
}

int SweepsTab::deletedTrials() const {
  size_t points = 1;
  for (const SweepAxis& a : spec_.axes) points *= a.values.size();
  if (spec_.axes.empty()) return 0;
  int gone = 0;
  std::set<std::vector<std::string>> counted;
  for (const SweepPoint& p : points_) {
    if (counted.insert(p.values).second) gone += deletedOf(p.values, &p);
  }
  for (const auto& [values, runs] : seen_runs_) {
    if (counted.insert(values).second) gone += deletedOf(values, nullptr);
  }
  // A finished sweep's points without a run at all had every trial deleted.
  if (status_of_shown_ == SweepStatus::Finished && points > counted.size())
    gone += static_cast<int>(points - counted.size()) * std::max(1, spec_.seeds);
  return gone;
}

int SweepsTab::deletedOf(const std::vector<std::string>& values, const SweepPoint* p) const {
  const int runs = p ? p->runs : 0;
  const int trials = p ? p->trials : std::max(1, spec_.seeds);
  int gone = 0;
  if (const auto seen = seen_runs_.find(values); seen != seen_runs_.end()) {
    for (int64_t id : seen->second) {
      if (!p || std::find(p->run_ids.begin(), p->run_ids.end(), id) == p->run_ids.end()) ++gone;
    }
  }
  // Every trial of a finished sweep ran: one without its run had it deleted.
  if (status_of_shown_ == SweepStatus::Finished) gone = std::max(gone, trials - runs);
  return std::clamp(gone, 0, std::max(0, trials - runs));
}

QString SweepsTab::cellTip(int x, int y) const {
  const int xa = x_axis_->currentIndex(), ya = y_axis_->currentIndex();
  if (xa < 0 || ya < 0 || spec_.axes.empty()) return {};
  const bool one_row = xa == ya;
  const auto& xv = spec_.axes[static_cast<size_t>(xa)].values;
  const auto& yv = spec_.axes[static_cast<size_t>(ya)].values;
  if (x < 0 || y < 0 || x >= static_cast<int>(xv.size()) ||
      y >= (one_row ? 1 : static_cast<int>(yv.size())))
    return {};
  // Every axis's value, in the grid's order: the cell's own, the slicers' for the rest.
  QStringList where;
  for (size_t k = 0; k < spec_.axes.size(); ++k) {
    const auto& values = spec_.axes[k].values;
    int at = static_cast<int>(k) == xa   ? x
             : static_cast<int>(k) == ya ? y
             : k < slicers_.size()       ? std::max(0, slicers_[k]->currentIndex())
                                         : 0;
    if (at >= static_cast<int>(values.size())) at = 0;
    where << QString::fromStdString(spec_.axes[k].key + " " + values[static_cast<size_t>(at)]);
  }
  const SweepPoint* p = pointAt(x, y);
  const SweepMetric metric = chosen(metric_, kSweepMetrics);
  const double v = p ? sweep_metric(*p, metric) : NAN;
  QString what;
  if (const int gone = deletedAt(x, y); gone > 0) {
    what = tr("%1 of %2 trials' runs deleted (no figure; run the sweep again for them)")
               .arg(gone)
               .arg(p ? p->trials : std::max(1, spec_.seeds));
  } else if (!p || !p->complete()) {
    what = tr("trials still to run (%1 of %2 ended)")
               .arg(p ? p->runs : 0)
               .arg(p ? p->trials : std::max(1, spec_.seeds));
  } else if (p->diverged > 0 && metric != SweepMetric::Diverged) {
    what = tr("diverged (%1 of %2 runs)").arg(p->diverged).arg(p->runs);
  } else if (!std::isfinite(v)) {
    what = tr("%1: no figure").arg(metric_->currentText());
  } else {
    what = metric_->currentText() + QLatin1Char(' ') + QString::number(v, 'g', 6);
    if (p->runs > 1) what += tr(" (mean of %1 seeds)").arg(p->runs);
    if (p->final_loss_spread_known() && std::isfinite(p->final_loss_spread()))
      what += tr("; seeds' final losses %1 to %2")
                  .arg(p->final_loss_min, 0, 'f', 4)
                  .arg(p->final_loss_max, 0, 'f', 4);
    if (p->loss_gap_spread_known() && std::isfinite(p->loss_gap_spread()))
      what += tr("; seeds' loss gaps %1 to %2")
                  .arg(p->loss_gap_min, 0, 'g', 4)
                  .arg(p->loss_gap_max, 0, 'g', 4);
    if (p->spiked > 0)
      what += tr("; the loss of %1 of %2 runs spiked (up to %3 over the reference, +%4 %)")
                  .arg(p->spiked)
                  .arg(p->runs)
                  .arg(p->spike, 0, 'g', 3)
                  .arg(100 * p->spike_fraction, 0, 'f', 0);
  }
  if (p && p->reference_troubled > 0)
    what += tr("; the high-precision reference itself blew up or diverged in %1 of %2 runs: "
               "their loss gaps are left out of the mean gap")
                .arg(p->reference_troubled)
                .arg(p->runs);
  return where.join(QStringLiteral(", ")) + QStringLiteral(": ") + what;
}

std::vector<int64_t> SweepsTab::runsAt(int x, int y) const {
  const SweepPoint* p = pointAt(x, y);
  return p ? p->run_ids : std::vector<int64_t>{};
}

double SweepsTab::cellValue(int x, int y) const {
  const SweepPoint* p = pointAt(x, y);
  return p ? sweep_metric(*p, chosen(metric_, kSweepMetrics)) : NAN;
}

}  // namespace fp8wb
