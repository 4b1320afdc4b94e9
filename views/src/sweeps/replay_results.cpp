// defines: ReplayPanel's results (replay_panel.h): the heatmap of the chosen figure, a
// cell's figures (cellAt(), figuresAt(), cellValue()), the best cell by the stated rule, a
// clicked cell's amax over the run beside the replayed and the run's own ceilings, and the
// cells selected for "Train these cells". The form, the run list and the replay itself are
// in replay_panel.cpp.
#include <qcustomplot.h>
#include <QComboBox>
#include <QLabel>
#include <QMouseEvent>
#include <QPushButton>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/watch/watch.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/sweeps/replay_panel.h"

namespace fp8wb {

const ReplayCell* ReplayPanel::cellAt(int x, int y) const {
  if (!result_ || x < 0 || y < 0 || static_cast<size_t>(x) >= grid_.windows.size() ||
      static_cast<size_t>(y) >= grid_.margins.size())
    return nullptr;
  const size_t a = static_cast<size_t>(std::max(0, algo_->currentIndex()));
  if (a >= grid_.algos.size()) return nullptr;
  return &result_->cells[(static_cast<size_t>(y) * grid_.windows.size() + static_cast<size_t>(x)) *
                             grid_.algos.size() +
                         a];
}

const ReplayFigures* ReplayPanel::figuresAt(int x, int y) const {
  const ReplayCell* c = cellAt(x, y);
  if (!c) return nullptr;
  const int t = tensor_->currentIndex();
  if (t <= 0) return &c->all;
  return static_cast<size_t>(t - 1) < c->tensors.size() ? &c->tensors[static_cast<size_t>(t - 1)]
                                                        : nullptr;
}

double ReplayPanel::cellValue(int x, int y) const {
  const ReplayFigures* f = figuresAt(x, y);
  if (!f) return NAN;
  switch (static_cast<Figure>(figure_->currentIndex())) {
    case SaturatingSteps: return static_cast<double>(f->saturating_steps);
    case MedianHeadroom: return f->median_headroom_binades;
    case EstUnderflow: return f->est_underflow_pct;
    case EstSaturated: return f->est_saturated_pct;
    case ClosestHeadroom: return f->min_headroom_binades;
  }
  return NAN;
}

void ReplayPanel::setFigure(Figure f) {
  figure_->setCurrentIndex(static_cast<int>(f));
}
void ReplayPanel::setAlgorithm(int index) {
  algo_->setCurrentIndex(index);
}
void ReplayPanel::setTensor(int index) {
  tensor_->setCurrentIndex(index);
}

QString ReplayPanel::bestText() const {
  return best_->text();
}
QString ReplayPanel::assumptionText() const {
  return assumption_->text();
}
QString ReplayPanel::checkText() const {
  return check_->text();
}
QString ReplayPanel::trajectoryTitle() const {
  return trajectory_title_;
}

void ReplayPanel::redraw() {
  for (QCPAbstractItem* i : marks_) heat_->removeItem(i);
  marks_.clear();
  map_->data()->clear();
  if (!result_) {
    best_->clear();
    heat_->replot();
    return;
  }
  const int nx = static_cast<int>(grid_.windows.size()),
            ny = static_cast<int>(grid_.margins.size());
  map_->data()->setSize(nx, ny);
  auto cells = [](int n) {
    return n > 1 ? QCPRange(0, static_cast<double>(n - 1)) : QCPRange(-0.5, 0.5);
  };
  map_->data()->setRange(cells(nx), cells(ny));
  double lo = INFINITY, hi = -INFINITY;
  const bool texts = nx * ny <= 144;
  const Figure fig = static_cast<Figure>(figure_->currentIndex());
  for (int x = 0; x < nx; ++x) {
    for (int y = 0; y < ny; ++y) {
      const double v = cellValue(x, y);
      map_->data()->setCell(x, y, std::isfinite(v) ? v : NAN);
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      const ReplayCell* c = cellAt(x, y);
      const bool chosen = selected_cells_.count({x, y}) > 0;
      if (texts || (c && c->rank == 1) || chosen) {
        auto* t = new QCPItemText(heat_);
        t->position->setCoords(x, y);
        QString s = std::isfinite(v) ? (fig == SaturatingSteps ? QString::number(v, 'f', 0)
                                                               : QString::number(v, 'g', 3))
                                     : QStringLiteral("-");
        if (c && c->rank == 1) s += tr("\nbest");
        if (c && c->is_run_setting) s += tr("\nthe run's");
        if (chosen) s = QStringLiteral("[") + s + QStringLiteral("]");
        t->setText(s);
        t->setColor(Qt::white);
        t->setSelectable(false);
        t->setObjectName(c && c->rank == 1 ? QStringLiteral("bestCell")
                                           : QStringLiteral("cellText"));
        marks_.push_back(t);
      }
    }
  }
  if (lo <= hi) map_->setDataRange(QCPRange(lo, hi > lo ? hi : lo + 1));
  scale_->axis()->setLabel(figure_->currentText());
  QSharedPointer<QCPAxisTickerText> tx(new QCPAxisTickerText), ty(new QCPAxisTickerText);
  for (int i = 0; i < nx; ++i)
    tx->addTick(i, QString::number(grid_.windows[static_cast<size_t>(i)]));
  for (int i = 0; i < ny; ++i)
    ty->addTick(i, QString::number(grid_.margins[static_cast<size_t>(i)]));
  heat_->xAxis->setTicker(tx);
  heat_->yAxis->setTicker(ty);
  heat_->xAxis->setLabel(tr("window"));
  heat_->yAxis->setLabel(tr("margin"));
  heat_->xAxis->setRange(-0.5, nx - 0.5);
  heat_->yAxis->setRange(-0.5, ny - 0.5);
  const ReplayCell& b = result_->cells[result_->ranking.front()];
  const QString setting = tr("margin %1, window %2, %3")
                              .arg(b.setting.margin)
                              .arg(b.setting.window)
                              .arg(QString::fromUtf8(amax_algo_name(b.setting.algo).data()));
  QString verdict;
  if (b.all.saturating_steps > 0) {
    verdict = tr("Every cell saturates; the least: %1 (%2 saturating steps)")
                  .arg(setting)
                  .arg(b.all.saturating_steps);
  } else if (b.all.min_headroom_binades >= ReplayResult::kSafeHeadroomBinades) {
    verdict = tr("Best: %1 (no saturating step, %2 binades of headroom at the closest "
                 "approach, median headroom %3 binades)")
                  .arg(setting)
                  .arg(b.all.min_headroom_binades, 0, 'f', 2)
                  .arg(b.all.median_headroom_binades, 0, 'f', 2);
  } else {
    verdict = tr("No cell keeps %1 binade of headroom at its closest approach; the most: %2 "
                 "(%3 binades: an amax a little above the run's would saturate)")
                  .arg(ReplayResult::kSafeHeadroomBinades)
                  .arg(setting)
                  .arg(b.all.min_headroom_binades, 0, 'f', 2);
  }
  // A best at the grid's edge: what lies beyond it is unseen.
  if (const ReplayGridEdge edge = replay_grid_edge(grid_, b.setting, b.all); edge.any())
    verdict += QStringLiteral("; ") + QString::fromStdString(edge.text(b.setting));
  best_->setText(verdict + tr(". Rule: %1.").arg(QString::fromUtf8(ReplayResult::kRule)));
  heat_->setExportTitle(tr("Replay of run %1: %2").arg(run_->run_id).arg(figure_->currentText()));
  // A watched script's run: the engine cannot train the script's model.
  const bool watched = watched_run_config(base_config_).has_value();
  selected_->setText(
      watched ? tr("A watched script's run: to confirm a cell, run the script "
                   "with its margin and window")
      : selected_cells_.empty()
          ? tr("Ctrl-click cells to select them for a real sweep")
          : tr("Selected: %1 (a sweep's grid is a product of axes: %n "
               "trial(s))",
               "", trainedCellCount())
                .arg(QString(selectedGridText()).replace(QLatin1Char('\n'), QStringLiteral("; "))));
  train_->setEnabled(!watched && !selected_cells_.empty());
  heat_->replot();
}

void ReplayPanel::cellClicked(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton || !result_ ||
      !heat_->axisRect()->rect().contains(e->position().toPoint()))
    return;
  double kx = 0, ky = 0;
  map_->pixelsToCoords(e->position(), kx, ky);
  const int x = static_cast<int>(std::lround(kx)), y = static_cast<int>(std::lround(ky));
  if (e->modifiers() & Qt::ControlModifier) {
    toggleSelected(x, y);
    return;
  }
  showCell(x, y);
}

void ReplayPanel::showCell(int x, int y) {
  const ReplayCell* c = cellAt(x, y);
  if (!c || !run_) return;
  // The chosen tensor, or (every tensor) the one that saturates most in this cell.
  size_t t = 0;
  if (tensor_->currentIndex() > 0) {
    t = static_cast<size_t>(tensor_->currentIndex() - 1);
  } else {
    for (size_t k = 1; k < c->tensors.size(); ++k)
      if (c->tensors[k].saturating_steps > c->tensors[t].saturating_steps) t = k;
  }
  const ReplayInput& in = run_->input;
  const double fmax = format_info(in.tensors[t].format).max_finite;
  const std::vector<float> replayed = replay_scales(in, t, c->setting, run_->run.config.initial);
  const std::vector<float> own = run_scales(in, t, run_->run);
  QVector<double> xs, amax, ceil_r, ceil_own, sx, sy;
  const float thr = saturation_threshold(in.tensors[t].format);
  for (size_t i = 0; i < in.step_count(); ++i) {
    const float a = in.at(i, t);
    if (std::isnan(a)) continue;
    const double step = static_cast<double>(in.steps[i]);
    xs << step;
    amax << (a > 0 ? a : NAN);
    ceil_r << fmax / replayed[i];
    ceil_own << fmax / own[i];
    if (a > 0 && a * replayed[i] >= thr) {
      sx << step;
      sy << a;
    }
  }
  if (!curves_->legend->visible()) {
    // Placed once there is something in it: an empty legend row squeezes the axis rect.
    curves_->legend->setVisible(true);
    place_legend_below(curves_, 3);
  }
  curves_->clearGraphs();
  auto* g = curves_->addGraph();
  g->setName(tr("amax"));
  g->setData(xs, amax, true);
  g->setPen(QPen(QColor(40, 40, 40)));
  g = curves_->addGraph();
  g->setName(tr("amax the replayed scale maps to max"));
  g->setData(xs, ceil_r, true);
  g->setPen(QPen(QColor(31, 119, 180), 2));
  g = curves_->addGraph();
  g->setName(tr("the run's own"));
  g->setData(xs, ceil_own, true);
  g->setPen(QPen(QColor(150, 150, 150), 1, Qt::DashLine));
  g = curves_->addGraph();
  g->setName(tr("saturating steps (%1)").arg(sx.size()));
  g->setData(sx, sy, true);
  g->setLineStyle(QCPGraph::lsNone);
  g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QColor(214, 39, 40), 6));
  trajectory_title_ = tr("%1 under margin %2, window %3, %4")
                          .arg(QString::fromStdString(amax_tensor_label(in.tensors[t])))
                          .arg(c->setting.margin)
                          .arg(c->setting.window)
                          .arg(QString::fromUtf8(amax_algo_name(c->setting.algo).data()));
  curves_->setExportTitle(trajectory_title_);
  curves_->xAxis->setLabel(tr("step (%1)").arg(trajectory_title_));
  curves_->rescaleAxes();
  curves_->replot();
  Q_EMIT cellShown();
}

void ReplayPanel::toggleSelected(int x, int y) {
  if (!cellAt(x, y)) return;
  const std::pair<int, int> k{x, y};
  if (!selected_cells_.erase(k)) selected_cells_.insert(k);
  redraw();
}

namespace {
// A sweep's grid is a product of axes: the selected cells' margins by their windows.
struct SelectedAxes {
  std::set<int> margins, windows;
};
SelectedAxes selected_axes(const std::set<std::pair<int, int>>& cells, const ReplayGrid& grid) {
  SelectedAxes a;
  for (const auto& [x, y] : cells) {
    a.windows.insert(grid.windows[static_cast<size_t>(x)]);
    a.margins.insert(grid.margins[static_cast<size_t>(y)]);
  }
  return a;
}
}  // namespace

int ReplayPanel::trainedCellCount() const {
  const SelectedAxes a = selected_axes(selected_cells_, grid_);
  return static_cast<int>(a.margins.size() * a.windows.size());
}

QString ReplayPanel::selectedGridText() const {
  const auto [margins, windows] = selected_axes(selected_cells_, grid_);
  const auto join = [](const std::set<int>& s) {
    QStringList l;
    for (int v : s) l << QString::number(v);
    return l.join(QLatin1Char(','));
  };
  const size_t a = static_cast<size_t>(std::max(0, algo_->currentIndex()));
  QString text = QStringLiteral("margin=%1\nwindow=%2").arg(join(margins), join(windows));
  if (a < grid_.algos.size())
    text += QStringLiteral("\namax_algo=%1")
                .arg(QString::fromUtf8(amax_algo_name(grid_.algos[a]).data()));
  return text;
}

void ReplayPanel::trainSelected() {
  if (selected_cells_.empty() || base_config_.empty()) return;
  // The replayed run's config as key=value lines, scaling delayed; the grid's keys apart.
  QStringList base;
  try {
    const nlohmann::json j = nlohmann::json::parse(base_config_);
    for (const auto& [key, value] : j.items()) {
      if (key == "margin" || key == "window" || key == "amax_algo" || key == "scaling") continue;
      base << QString::fromStdString(key + "=" + value.dump());
    }
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("run %1's config cannot be read: %2").arg(run_->run_id).arg(e.what()));
    return;
  }
  base << QStringLiteral("scaling=delayed");
  Q_EMIT trainRequested(base.join(QLatin1Char('\n')), selectedGridText());
}

}  // namespace fp8wb
