// SweepsTab's heatmap (sweeps_tab.h): two chosen axes with the others as slicers on a line
// of their own (one row of cells for a one-axis sweep or the same axis across and up, said
// on the y axis; the heatmap's margin pinned, so that choosing axes does not move it;
// cells still to run grey with "…", cells with a diverged run hatched), and the best
// setting among the finished. The sweep shown is read in sweeps_store_reads.cpp, what a
// cell holds is sweeps_cells.cpp's, the overlaid loss curves sweeps_overlay.cpp's; the
// form, start, stop and collection are in sweeps_tab.cpp.
#include "fp8wb/views/sweeps/sweeps_tab.h"

#include <QComboBox>
#include <QFontMetrics>
#include <QHBoxLayout>
#include <QLabel>
#include <QLayout>
#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "fp8wb/core/sweep/final_loss.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/name_choices.h"
#include "sweeps/sweeps_tab_internal.h"

namespace fp8wb {

namespace sweeps_detail {

QCPColorGradient heat_gradient() {
  static const char* const stops[] = {"#440154", "#482475", "#414487", "#355f8d", "#2a788e",
                                      "#21918c", "#22a884", "#44bf70", "#7ad151", "#bddf26"};
  QCPColorGradient g;
  g.clearColorStops();
  constexpr int n = static_cast<int>(std::size(stops));
  for (int i = 0; i < n; ++i) g.setColorStopAt(i / double(n - 1), QColor(QLatin1String(stops[i])));
  g.setColorInterpolation(QCPColorGradient::ciRGB);
  // Cells without a figure of the scale are left empty in the map; their own items
  // (markCell()) show what they are.
  g.setNanHandling(QCPColorGradient::nhTransparent);
  return g;
}

}  // namespace sweeps_detail

namespace {

// The values of a heatmap's side as tick labels: every one where they fit along the axis,
// else every k-th (1, 2 or 5 times a power of ten) from the first, none overlapping.
class CellTicker : public QCPAxisTickerText {
 public:
  explicit CellTicker(QCPAxis* axis) : axis_(axis) {}
  // The axis's length in pixels now, and the one the ticks were last made for: a replot
  // makes them before it lays the plot out, so they are of the size before a resize (a
  // plot drawn hidden, at a widget's first small size, then shown large) until the next.
  double length() const {
    if (!axis_->axisRect()) return 0;
    return axis_->orientation() == Qt::Horizontal ? axis_->axisRect()->width()
                                                  : axis_->axisRect()->height();
  }
  double lengthUsed() const { return length_used_; }

 protected:
  QVector<double> createTickVector(double step, const QCPRange& range) override {
    QVector<double> all = QCPAxisTickerText::createTickVector(step, range);
    length_used_ = length();
    if (all.size() < 2 || !axis_->axisRect()) return all;
    const QFontMetrics fm(axis_->tickLabelFont());
    const bool across = axis_->orientation() == Qt::Horizontal;
    int room = fm.height() + 4;  // a label's extent along the axis, with a gap
    if (across) {
      int widest = 0;
      for (const QString& t : std::as_const(mTicks))
        widest = std::max(widest, fm.horizontalAdvance(t));
      room = widest + 12;
    }
    const double length = length_used_;
    const double cell = length / std::max(1.0, range.size());  // pixels a cell
    if (cell <= 0 || cell >= room) return all;
    const double need = room / cell;
    long long k = 1;  // the first of 1, 2, 5, 10, 20, 50, ... cells apart with room
    for (long long decade = 1; k == 1 && decade < (1LL << 40); decade *= 10) {
      for (long long m : {decade, 2 * decade, 5 * decade}) {
        if (static_cast<double>(m) >= need) {
          k = m;
          break;
        }
      }
    }
    QVector<double> some;
    for (double t : all)
      if (std::llround(t) % k == 0) some << t;
    return some;
  }

 private:
  QCPAxis* axis_;
  double length_used_ = -1;
};

// Whether a cell mark of this kind stands for a diverged run (drawn in red).
bool diverged_kind(const QString& kind) {
  return kind == QLatin1String("divergedCell") || kind == QLatin1String("markedCell") ||
         kind == QLatin1String("spikedCell");
}

// A cell mark's fill. Waiting or running: plain light grey. Diverged or without a figure:
// hatched. A run deleted: cross-hatched.
QBrush cell_brush(const QString& kind) {
  if (kind == QLatin1String("unfinishedCell")) return QBrush(QColor(215, 215, 215));
  if (kind == QLatin1String("deletedCell"))
    return QBrush(QColor(120, 120, 120), Qt::DiagCrossPattern);
  return QBrush(diverged_kind(kind) ? QColor(170, 40, 40) : QColor(140, 140, 140),
                Qt::BDiagPattern);
}

// What a metric can be: a constant one's colour scale stays within it (no negative
// percentage, count of runs or loss).
QCPRange metric_domain(SweepMetric m) {
  switch (m) {
    case SweepMetric::SaturatedPct:
    case SweepMetric::UnderflowPct: return kPercentDomain;
    case SweepMetric::FinalLoss:
    case SweepMetric::Diverged: return kNonNegativeDomain;
    case SweepMetric::LossGap:
    case SweepMetric::Spike: return kAnyValue;
  }
  return kAnyValue;
}

// The fixed colour range of a metric's figures from `lo` to `hi`: a percentage's whole
// 0-100 %, a count of diverged runs 0 to the seeds, a loss or spike from 0, a gap
// symmetric about 0 (so that 0 is the middle colour).
QCPRange fixed_metric_range(SweepMetric m, double lo, double hi, int seeds) {
  switch (m) {
    case SweepMetric::SaturatedPct:
    case SweepMetric::UnderflowPct: return kPercentRange;
    case SweepMetric::Diverged: return QCPRange(0, std::max(1, seeds));
    case SweepMetric::LossGap: {
      const double most = std::max({std::abs(lo), std::abs(hi), 1e-12});
      return QCPRange(-most, most);
    }
    case SweepMetric::FinalLoss:
    case SweepMetric::Spike: {
      const QCPRange r(std::min(0.0, lo), std::max(0.0, hi));
      return r.size() > 0 ? r : QCPRange(0, 1);
    }
  }
  return QCPRange(lo, hi);
}

// The colour scale's label: the metric, and for the losses how they are taken.
QString scale_label(SweepMetric m, const QString& label) {
  switch (m) {
    case SweepMetric::FinalLoss: return label + QObject::tr(" (mean of the last 10% of steps)");
    case SweepMetric::LossGap: return label + QObject::tr(" (FP8 - reference, last 10% of steps)");
    case SweepMetric::Spike: return label + QObject::tr(" (largest excess over the reference)");
    case SweepMetric::SaturatedPct:
    case SweepMetric::UnderflowPct:
    case SweepMetric::Diverged: return label;
  }
  return label;
}

}  // namespace

void SweepsTab::ticksFollowTheLayout() {
  // Ticks made for another length than the one laid out: made again, once, for this one.
  connect(heat_, &QCustomPlot::afterLayout, this, [this] {
    for (QCPAxis* a : {heat_->xAxis, heat_->yAxis}) {
      const auto* t = dynamic_cast<const CellTicker*>(a->ticker().data());
      if (t && std::abs(t->lengthUsed() - t->length()) >= 1) {
        heat_->replot(QCustomPlot::rpQueuedReplot);
        return;
      }
    }
  });
}

void SweepsTab::rebuildSlicers() {
  const QSignalBlocker bx(x_axis_), by(y_axis_);
  x_axis_->clear();
  y_axis_->clear();
  for (QComboBox* c : slicers_) c->deleteLater();
  slicers_.clear();
  for (const SweepAxis& a : spec_.axes) {
    x_axis_->addItem(QString::fromStdString(a.key));
    y_axis_->addItem(QString::fromStdString(a.key));
    auto* s = new QComboBox(this);
    s->setToolTip(QString::fromStdString(a.key));
    for (const auto& v : a.values) s->addItem(QString::fromStdString(a.key + "=" + v));
    connect(s, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
    slicer_row_->addWidget(s);
    slicers_.push_back(s);
  }
  x_axis_->setCurrentIndex(spec_.axes.size() > 1 ? 1 : 0);  // e.g. window across,
  y_axis_->setCurrentIndex(0);                              // margin up
  // A sweep of one axis is one row of cells: no axis to put up, no column to overlay.
  const bool two = spec_.axes.size() > 1;
  y_axis_->setEnabled(two);
  overlay_->setEnabled(two);
  const QString one_axis = two ? QString() : tr("A sweep of one axis: one row of cells along it");
  y_axis_->setToolTip(one_axis);
  overlay_->setToolTip(one_axis);
  describeShownSweep();
  pinHeatmapMargin();
}

// The one row's label up, where the same axis is across and up.
static QString one_row_label(const SweepSpec& spec, int x_axis) {
  if (spec.axes.size() < 2 || x_axis < 0) return QObject::tr("one row");
  return QObject::tr("one row: y = x (%1)")
      .arg(QString::fromStdString(spec.axes[static_cast<size_t>(x_axis)].key));
}

void SweepsTab::pinHeatmapMargin() {
  QCPAxisRect* rect = heat_->axisRect();
  if (spec_.axes.empty()) {
    rect->setMinimumMargins(QMargins());
    return;
  }
  // What the y axis needs beside the map at its widest: QCustomPlot's own margin is the
  // tick labels' width and the label's height with their paddings; a few pixels to spare.
  const QCPAxis* y = heat_->yAxis;
  const QFontMetrics ticks(y->tickLabelFont()), label(y->labelFont());
  int widest = 0;
  for (const SweepAxis& a : spec_.axes)
    for (const std::string& v : a.values)
      widest = std::max(widest, ticks.horizontalAdvance(QString::fromStdString(v)));
  const int left = y->padding() + y->offset() + std::max(0, y->tickLengthOut()) +
                   y->tickLabelPadding() + widest + y->labelPadding() + label.height() + 6;
  QMargins m = rect->minimumMargins();
  m.setLeft(left);
  rect->setMinimumMargins(m);
}

void SweepsTab::setAxes(int x_axis, int y_axis) {
  x_axis_->setCurrentIndex(x_axis);
  y_axis_->setCurrentIndex(y_axis);
  redraw();
}

void SweepsTab::setMetric(SweepMetric metric) {
  choose(metric_, kSweepMetrics, metric);
  redraw();
}
QString SweepsTab::bestText() const {
  return best_->text();
}

void SweepsTab::markCell(int x, int y, const QString& kind, const QString& text) {
  const bool diverged = diverged_kind(kind);
  // A mark alone over a cell that keeps its colour.
  if (kind != QLatin1String("markedCell") && kind != QLatin1String("spikedCell")) {
    auto* r = new QCPItemRect(heat_);
    r->setObjectName(kind);
    r->setProperty("cell", QPoint(x, y));
    r->topLeft->setCoords(x - 0.5, y + 0.5);
    r->bottomRight->setCoords(x + 0.5, y - 0.5);
    r->setPen(QPen(QColor(150, 150, 150)));
    r->setBrush(cell_brush(kind));
    r->setSelectable(false);
    marks_.push_back(r);
  }
  auto* t = new QCPItemText(heat_);
  t->setObjectName(QStringLiteral("cellMark"));
  t->setProperty("cell", QPoint(x, y));
  t->position->setCoords(x, y);
  t->setText(text);
  t->setColor(diverged ? QColor(140, 20, 20) : QColor(60, 60, 60));
  t->setBrush(QBrush(QColor(255, 255, 255, 200)));
  t->setPadding(QMargins(3, 1, 3, 1));
  t->setSelectable(false);
  marks_.push_back(t);
}

void SweepsTab::markCells(int x0, int x1, int y, const QString& kind) {
  auto* r = new QCPItemRect(heat_);
  r->setObjectName(kind);
  r->setProperty("cell", QPoint(x0, y));
  r->setProperty("lastCell", QPoint(x1, y));
  r->topLeft->setCoords(x0 - 0.5, y + 0.5);
  r->bottomRight->setCoords(x1 + 0.5, y - 0.5);
  r->setPen(Qt::NoPen);
  r->setBrush(cell_brush(kind));
  r->setSelectable(false);
  marks_.push_back(r);
}
void SweepsTab::redraw() {
  for (QCPAbstractItem* item : marks_) heat_->removeItem(item);
  marks_.clear();
  const int xa = x_axis_->currentIndex(), ya = y_axis_->currentIndex();
  map_->data()->clear();
  if (xa < 0 || ya < 0 || spec_.axes.empty()) {
    showNoSweep();
    return;
  }
  no_sweep_->setVisible(false);
  scale_->setVisible(true);
  for (QCPAxis* a : {heat_->xAxis, heat_->yAxis}) {
    a->setTickLabels(true);
    a->setTicks(true);
  }
  showHeldAxes(xa, ya);
  const SweepMetric metric = chosen(metric_, kSweepMetrics);
  const auto& xv = spec_.axes[static_cast<size_t>(xa)].values;
  // The CSV's map column names the figure and which axis its rows and columns are.
  const QString x_key = QString::fromStdString(spec_.axes[static_cast<size_t>(xa)].key);
  map_->setName(xa == ya ? tr("%1 by %2").arg(metric_->currentText(), x_key)
                         : tr("%1: rows %2, columns %3")
                               .arg(metric_->currentText(),
                                    QString::fromStdString(spec_.axes[static_cast<size_t>(ya)].key),
                                    x_key));
  // The same axis across and up (a one-axis sweep, or one axis chosen for both): one row
  // of cells, no values up.
  const bool one_row = xa == ya;
  const std::vector<std::string> yv =
      one_row ? std::vector<std::string>{""} : spec_.axes[static_cast<size_t>(ya)].values;
  map_->data()->setSize(static_cast<int>(xv.size()), static_cast<int>(yv.size()));
  // Cell i is centred on i, one unit wide. The map's range runs from the centre of its
  // first cell to the centre of its last, and it draws half a cell beyond each end, except
  // along a side of one cell, which it draws over exactly its range: there the range is
  // the cell's own span.
  auto cells = [](size_t n) {
    return n > 1 ? QCPRange(0, static_cast<double>(n - 1)) : QCPRange(-0.5, 0.5);
  };
  map_->data()->setRange(cells(xv.size()), cells(yv.size()));
  const auto [lo, hi] =
      colourCells(metric, static_cast<int>(xv.size()), static_cast<int>(yv.size()));
  apply_colour_range(map_, scale_label(metric, metric_->currentText()), lo, hi,
                     metric_domain(metric), fixed_metric_range(metric, lo, hi, spec_.seeds),
                     fixed_colour_range(range_));
  QSharedPointer<QCPAxisTickerText> tx(new CellTicker(heat_->xAxis)),
      ty(new CellTicker(heat_->yAxis));
  for (size_t i = 0; i < xv.size(); ++i)
    tx->addTick(static_cast<double>(i), QString::fromStdString(xv[i]));
  for (size_t i = 0; i < yv.size(); ++i)
    ty->addTick(static_cast<double>(i), QString::fromStdString(yv[i]));
  heat_->xAxis->setTicker(tx);
  heat_->yAxis->setTicker(ty);
  heat_->xAxis->setLabel(QString::fromStdString(spec_.axes[static_cast<size_t>(xa)].key));
  // The same axis across and up: the y axis says that the one row is x alone (the other
  // axes held by their slicers).
  heat_->yAxis->setLabel(one_row ? one_row_label(spec_, xa)
                                 : QString::fromStdString(spec_.axes[static_cast<size_t>(ya)].key));
  heat_->rescaleAxes();
  heat_->xAxis->setRange(-0.5, static_cast<double>(xv.size()) - 0.5);
  heat_->yAxis->setRange(-0.5, static_cast<double>(yv.size()) - 0.5);
  describeBest();
  heat_->replot(QCustomPlot::rpQueuedReplot);
}

void SweepsTab::showHeldAxes(int xa, int ya) {
  bool held = false;
  for (size_t k = 0; k < slicers_.size(); ++k) {
    slicers_[k]->setVisible(static_cast<int>(k) != xa && static_cast<int>(k) != ya);
    held = held || slicers_[k]->isVisibleTo(this);
  }
  held_none_->setText(held ? QString() : tr("none: every axis is across or up"));
  held_none_->setVisible(!held);
}

std::pair<double, double> SweepsTab::colourCells(SweepMetric metric, int nx, int ny) {
  // Only cells whose trials have all ended take a colour of the scale, and the scale
  // spans only them.
  double lo = INFINITY, hi = -INFINITY;
  // Each cell's mark (kind and text), made once every cell is known: on a large grid the
  // cells of a row alike are one item (tens of thousands of items would hold the window
  // for seconds, and their texts could not be read in cells a few pixels wide).
  std::vector<std::pair<QString, QString>> cell_marks(static_cast<size_t>(nx) * ny);
  auto mark = [&](int x, int y, const QString& kind, const QString& text) {
    cell_marks[static_cast<size_t>(y) * nx + x] = {kind, text};
  };
  for (int x = 0; x < nx; ++x) {
    for (int y = 0; y < ny; ++y) {
      const SweepPoint* p = pointAt(x, y);
      const double v = p ? sweep_metric(*p, metric) : NAN;
      double shown = NAN;
      if (const int gone = deletedAt(x, y); gone > 0) {
        // Not "still to run": its run was there, and was deleted.
        mark(x, y, QStringLiteral("deletedCell"),
             tr("deleted %1/%2").arg(gone).arg(p ? p->trials : std::max(1, spec_.seeds)));
      } else if (!p || !p->complete()) {
        mark(x, y, QStringLiteral("unfinishedCell"),
             p ? tr("… %1/%2").arg(p->runs).arg(p->trials) : tr("…"));
      } else if (p->diverged > 0 && metric != SweepMetric::Diverged) {
        mark(x, y, QStringLiteral("divergedCell"), tr("diverged"));
      } else if (!std::isfinite(v)) {
        mark(x, y, QStringLiteral("emptyCell"), tr("no figure"));
      } else {
        shown = v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        // Coloured by how many diverged: still named.
        if (p->diverged > 0)
          mark(x, y, QStringLiteral("markedCell"), tr("diverged"));
        else if (p->spiked > 0)  // coloured, and flagged: never the best while others aren't
          mark(x, y, QStringLiteral("spikedCell"),
               std::isfinite(p->spike_fraction)
                   ? tr("spiked +%1 %").arg(100 * p->spike_fraction, 0, 'f', 0)
                   : tr("spiked"));
      }
      map_->data()->setCell(x, y, shown);
    }
  }
  placeMarks(cell_marks, nx, ny);
  return {lo, hi};
}

void SweepsTab::placeMarks(const std::vector<std::pair<QString, QString>>& cell_marks, int nx,
                           int ny) {
  constexpr int kManyCells = 2500;
  for (int y = 0; y < ny; ++y) {
    for (int x = 0; x < nx;) {
      const auto& [kind, text] = cell_marks[static_cast<size_t>(y) * nx + x];
      int end = x + 1;
      if (nx * ny > kManyCells) {
        while (end < nx && cell_marks[static_cast<size_t>(y) * nx + end].first == kind) ++end;
        if (!kind.isEmpty()) markCells(x, end - 1, y, kind);
      } else if (!kind.isEmpty()) {
        markCell(x, y, kind, text);
      }
      x = end;
    }
  }
}

void SweepsTab::describeBest() {
  const SweepCounts counts = sweep_counts(spec_, points_);
  QString progress =
      (counts.trials == 1 ? tr("%1 of %2 trial finished") : tr("%1 of %2 trials finished"))
          .arg(counts.finished)
          .arg(counts.trials);
  if (counts.diverged > 0) progress += tr(", %1 diverged").arg(counts.diverged);
  if (counts.spiked > 0) progress += tr(", %1 spiked").arg(counts.spiked);
  // A trial whose run was deleted is not one still to run.
  if (const int gone = deletedTrials(); gone > 0) progress += tr(", %1 deleted").arg(gone);
  // The verdict (kSweepVerdictRule): the lowest final loss among the finished, passing over
  // points with a flagged trial, and no best where the lowest are within the noise.
  auto label = [this](const SweepPoint& p) {
    std::string s;
    for (size_t k = 0; k < spec_.axes.size() && k < p.values.size(); ++k)
      s += (k ? " " : "") + spec_.axes[k].key + "=" + p.values[k];
    return s;
  };
  const SweepVerdict verdict = sweep_verdict(points_);
  QString text =
      QStringLiteral("<b>%1</b> (%2).")
          .arg(QString::fromStdString(sweep_verdict_text(verdict, label)).toHtmlEscaped(),
               progress);
  if (verdict.kind == SweepVerdict::Kind::Best) {
    const SweepPoint* best = verdict.lowest;
    // No gap: its reference blew up or diverged (a gap against it is no comparison), or it
    // had none.
    QString gap = std::isfinite(best->loss_gap) ? QString::number(best->loss_gap, 'g', 3)
                  : best->gap_ref_broken > 0    ? tr("none (the reference blew up)")
                                                : tr("none (no reference)");
    if (best->loss_gap_spread_known() && std::isfinite(best->loss_gap_spread()))
      gap += tr(" (mean of %1 seeds, %2 to %3)")
                 .arg(best->runs - best->gap_ref_broken)
                 .arg(best->loss_gap_min, 0, 'g', 3)
                 .arg(best->loss_gap_max, 0, 'g', 3);
    text += tr(" Its loss gap %1, saturated %2 %, underflow %3 %.")
                .arg(gap)
                .arg(best->saturated_pct, 0, 'g', 3)
                .arg(best->underflow_pct, 0, 'g', 3);
  }
  auto text_of = [](std::string_view s) {
    return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
  };
  text += tr("<br>Best: %1. Final loss: the mean over the last 10% of a run's steps. Grey "
             "(…): trials still to run; hatched: a run diverged; cross-hatched: a trial's run "
             "was deleted; \"spiked +N %\": a run's loss spiked N % over the reference's. Click a "
             "cell for its row's (or "
             "column's) loss curves; double-click to open its run.")
              .arg(text_of(kSweepVerdictRuleShort));
  // The rule and the definitions whole.
  best_->setToolTip(QStringLiteral("<p style='white-space:pre-wrap'>%1</p>")
                        .arg(QStringLiteral("%1\n\n%2\n\n%3")
                                 .arg(text_of(kSweepVerdictRule), text_of(kFinalLossDefinition),
                                      text_of(kSpikeDefinition))
                                 .toHtmlEscaped()));
  best_->setText(text);
  // The height its text needs at its width (laid out: else on its first resize).
  // Laid out at once: the heatmap below is where it is drawn when the sweep is said shown.
  if (const int h = best_->heightForWidth(best_->width()); best_->isVisible() && h > 0) {
    best_->setMinimumHeight(h);
    if (QLayout* l = best_->parentWidget()->layout()) l->activate();
  }
}

void SweepsTab::showNoSweep(const QString& why) {
  no_sweep_->setText(why.isEmpty() ? tr("no sweep shown") : why);
  for (QCPAbstractItem* item : marks_) heat_->removeItem(item);
  marks_.clear();
  map_->data()->clear();
  map_->setDataRange(QCPRange(0, 1));
  // The colour scale keeps its place in the plot's layout: the axis rect does not move.
  scale_->setVisible(false);
  scale_->axis()->setLabel(QString());
  for (QCPAxis* a : {heat_->xAxis, heat_->yAxis}) {
    a->setTicker(QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText));
    a->setTicks(false);
    a->setTickLabels(false);
    a->setLabel(QString());
    a->setRange(0, 1);
  }
  no_sweep_->setVisible(true);
  held_none_->setText(QStringLiteral("—"));
  held_none_->setVisible(true);
  heat_->replot(QCustomPlot::rpQueuedReplot);
  clearOverlay();
}
}  // namespace fp8wb
