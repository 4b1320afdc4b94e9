// defines: what the run tabs (run_tabs.h) share among their translation units (run_tabs.cpp,
// run_tab_overview.cpp, run_tab_scaling.cpp, run_tab_quantization.cpp): plots and graphs
// made alike, log axes with readable ticks, fit_axes(), the "Include step 0" box, a role's
// format and name, a figure's label; and StepCurve::draw().
#pragma once

#include <qcustomplot.h>

#include <QString>
#include <QVector>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/metrics.h"
#include "fp8wb/core/role.h"
#include "fp8wb/views/run_tabs/run_tabs.h"

class QCheckBox;
class QColor;
class QWidget;

namespace fp8wb {

class ExportablePlot;
class RunData;

namespace detail {

inline QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

ExportablePlot* make_plot(QWidget* parent, const QString& x, const QString& y);
QCPGraph* add_graph(ExportablePlot* p, const QString& name, const QColor& c, bool scatter = false);
// A log axis whose ticks read at a glance (run_tabs.cpp: ReadableLogTicker).
void use_log_axis(QCPAxis* a);
// A histogram's count axis on a log scale, ticks at powers of ten: a bin of a few elements
// among millions shows (on a linear axis it is under a pixel high). Each bar's top is its
// count; the bars rise from below the axis, which fit_log_counts() starts at half an
// element.
void use_log_count_axis(QCPAxis* a, QCPBars* bars);
// The count axis from half an element to twice the largest count, at least to 50.
void fit_log_counts(QCPAxis* a, const QVector<double>& counts);
// Fits the plot's axes to its data; without `include_step0`, the value axis to the points
// after step 0 (where there are any): a delayed-scaling run starts from a scale of 1, whose
// figures at step 0 would otherwise stretch the axis over values no later step comes near.
// A curve of one point (a line alone draws none) gets a dot.
void fit_axes(QCustomPlot* p, bool include_step0);
// "Include step 0", unticked.
QCheckBox* make_step0_box(QWidget* parent);
QString role_text(Role r);
QString label_of(const TensorStatFigure& f);

}  // namespace detail

// Finite points of steps[from..] appended to `g` (from 0: the graph is set anew);
// non-finite values go to `markers`, crosses at the top of the finite values so far.
template <class Get>
void StepCurve::draw(const std::vector<StepMetrics>& steps, size_t from, Get get) {
  if (from == 0) {
    top_ = -INFINITY;
    marker_x_.clear();
  }
  QVector<double> x, y;
  x.reserve(static_cast<int>(steps.size() - from));
  y.reserve(static_cast<int>(steps.size() - from));
  for (size_t i = from; i < steps.size(); ++i) {
    const double v = get(steps[i]);
    if (std::isfinite(v)) {
      x << static_cast<double>(steps[i].step);
      y << v;
      top_ = std::max(top_, v);
    } else if (markers) {
      marker_x_ << static_cast<double>(steps[i].step);
    }
  }
  if (from == 0) {
    graph->setData(x, y, true);
  } else {
    graph->addData(x, y, true);
  }
  if (markers) {
    // NaN and Inf are shown, not dropped: crosses at the top of the visible range (few
    // points: set anew each time, as the top may have moved).
    const QVector<double> my(marker_x_.size(), std::isfinite(top_) ? top_ : 1.0);
    markers->setData(marker_x_, my, true);
  }
}

}  // namespace fp8wb
