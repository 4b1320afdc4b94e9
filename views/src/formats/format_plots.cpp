#include "fp8wb/views/formats/format_plots.h"

#include <cmath>

#include "fp8wb/core/formats/value_report.h"

namespace fp8wb {
namespace {

QCPItemStraightLine* make_marker(QCustomPlot* plot) {
  auto* line = new QCPItemStraightLine(plot);
  line->setPen(QPen(QColor(0, 0, 0, 160), 1.5, Qt::DashLine));
  line->setVisible(false);
  return line;
}

void place_marker(QCPItemStraightLine* line, std::optional<double> x) {
  if (!x || !std::isfinite(*x)) {
    line->setVisible(false);
    return;
  }
  line->point1->setCoords(*x, 0);
  line->point2->setCoords(*x, 1);
  line->setVisible(true);
}

// The note over a plot whose marker is not on its x axis as shown: in the axis rect's top
// corner on the side where the value lies.
QCPItemText* make_note(QCustomPlot* plot) {
  auto* note = new QCPItemText(plot);
  note->setObjectName(QStringLiteral("markerNote"));
  note->position->setType(QCPItemPosition::ptAxisRectRatio);
  note->setColor(QColor(60, 60, 60));
  note->setBrush(QBrush(QColor(255, 255, 255, 220)));
  note->setPadding(QMargins(4, 2, 4, 2));
  note->setSelectable(false);
  note->setVisible(false);
  return note;
}

// value: the typed value; x: where its marker is on the axis (none for 0, NaN, Inf).
void place_note(QCPItemText* note, const QCPAxis* axis, std::optional<double> value,
                std::optional<double> x) {
  QString text;
  bool right = true;
  if (value && std::isnan(*value)) {
    text = QObject::tr("NaN: no place on the axis");
  } else if (value && std::isinf(*value)) {
    text = QObject::tr("value beyond the plotted range →");
  } else if (value && *value == 0) {
    text = QObject::tr("0: no place on a log axis");
  } else if (x && *x > axis->range().upper) {
    text = QObject::tr("value beyond the plotted range →");
  } else if (x && *x < axis->range().lower) {
    text = QObject::tr("← value beyond the plotted range");
    right = false;
  }
  note->setText(text);
  note->position->setCoords(right ? 0.99 : 0.01, 0.03);
  note->setPositionAlignment((right ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignTop);
  note->setVisible(!text.isEmpty());
}

QString names_of(const std::vector<Format>& formats) {
  QStringList names;
  for (Format f : formats) {
    names << QString::fromLatin1(format_info(f).name.data(),
                                 static_cast<int>(format_info(f).name.size()));
  }
  return names.join(QStringLiteral(", "));
}

std::vector<double> positive_values(Format f) {
  std::vector<double> out;
  for (double v : representable_values(f)) {
    if (v > 0) out.push_back(v);
  }
  return out;
}

}  // namespace

NumberLinePlot::NumberLinePlot(QWidget* parent)
    : ExportablePlot(parent), marker_(make_marker(this)), note_(make_note(this)) {
  // Panned or zoomed: the note follows whether the value is still in view.
  connect(xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this] { setMarker(value_); });
  xAxis->setLabel(tr("log2 |value|"));
  yAxis->setLabel(QString());
  axisRect()->setRangeZoom(Qt::Horizontal);
  axisRect()->setRangeDrag(Qt::Horizontal);
}

void NumberLinePlot::setFormats(const std::vector<Format>& formats) {
  formats_ = formats;
  setExportTitle(tr("Every representable value: %1").arg(names_of(formats)));
  clearGraphs();
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  // E8M0FNU spans 2^-127..2^127 and would squeeze the element formats into a dot: the
  // initial range covers the element formats (pan or zoom out to see E8M0FNU).
  const bool only_e8m0 = formats.size() == 1 && formats[0] == Format::E8M0FNU;
  double lo = 0, hi = 0;
  for (size_t row = 0; row < formats.size(); ++row) {
    const Format f = formats[row];
    QCPGraph* g = addGraph();
    g->setName(QString::fromLatin1(format_info(f).name.data(),
                                   static_cast<int>(format_info(f).name.size())));
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(
        QCPScatterStyle(QCPScatterStyle::ssCircle, format_color(f), format_color(f), 4));
    const double y = static_cast<double>(formats.size() - row);
    for (double v : positive_values(f)) {
      const double x = std::log2(v);
      g->addData(x, y);
      if (f != Format::E8M0FNU || only_e8m0) {
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
    }
    ticker->addTick(y, g->name());
  }
  yAxis->setTicker(ticker);
  yAxis->setRange(0.3, static_cast<double>(formats.size()) + 0.7);
  xAxis->setRange(lo - 1, hi + 1);
  sizeForPresentation();
  replot(QCustomPlot::rpQueuedReplot);
}

void NumberLinePlot::presentationScaleChanged(double factor) {
  factor_ = factor;
  sizeForPresentation();
}

// Each row as tall as one and a half lines of its label (a line and a quarter with more
// than four formats), the x axis's ticks and label below.
void NumberLinePlot::sizeForPresentation() {
  // Presenting, the plot is a third of a projector's width: ticks 10 apart, not 5.
  xAxis->ticker()->setTickCount(factor_ > 1 ? 3 : 5);
  if (factor_ <= 1) {
    setMinimumHeight(0);
    return;
  }
  // All eight formats: a line and a quarter a row, the plot beside the code table within
  // a projector's 720 px (the labels still a line apart).
  const double line = QFontMetricsF(font()).height() * factor_;
  const double row = formats_.size() > 4 ? 1.25 : 1.5;
  setMinimumHeight(static_cast<int>(line * (row * static_cast<double>(formats_.size()) + 4)));
}

void NumberLinePlot::setMarker(std::optional<double> value) {
  value_ = value;
  std::optional<double> x;
  if (value && std::isfinite(*value) && *value != 0) x = std::log2(std::fabs(*value));
  place_marker(marker_, x);
  place_note(note_, xAxis, value, x);
  replot(QCustomPlot::rpQueuedReplot);
}

SpacingPlot::SpacingPlot(QWidget* parent)
    : ExportablePlot(parent), marker_(make_marker(this)), note_(make_note(this)) {
  connect(xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this] { setMarker(value_); });
  xAxis->setLabel(tr("|value|"));
  // Short enough for the plot's height at the default window size; the tab's heading
  // says what it is ("Spacing (ULP) by magnitude").
  yAxis->setLabel(tr("spacing (ULP)"));
  for (QCPAxis* a : {xAxis, yAxis}) {
    a->setScaleType(QCPAxis::stLogarithmic);
    auto ticker = QSharedPointer<QCPAxisTickerLog>::create();
    ticker->setLogBase(10);
    ticker->setSubTickCount(0);
    a->setTicker(ticker);
    a->setNumberFormat(QStringLiteral("eb"));
    a->setNumberPrecision(0);
  }
  legend->setVisible(true);
  place_legend_below(this, 4);  // eight formats in two rows, none over a curve
}

void SpacingPlot::setFormats(const std::vector<Format>& formats) {
  setExportTitle(tr("Spacing (ULP) against magnitude: %1").arg(names_of(formats)));
  clearGraphs();
  const bool only_e8m0 = formats.size() == 1 && formats[0] == Format::E8M0FNU;
  double lo = INFINITY, hi = 0, slo = INFINITY, shi = 0;
  for (Format f : formats) {
    const auto vals = positive_values(f);
    if (vals.size() < 2) continue;
    if (f != Format::E8M0FNU || only_e8m0) {  // as on the number line
      lo = std::min(lo, vals.front());
      hi = std::max(hi, vals.back());
      slo = std::min(slo, vals[1] - vals[0]);
      shi = std::max(shi, vals.back() - vals[vals.size() - 2]);
    }
    QCPGraph* g = addGraph();
    g->setName(QString::fromLatin1(format_info(f).name.data(),
                                   static_cast<int>(format_info(f).name.size())));
    g->setPen(QPen(format_color(f), 2));
    g->setLineStyle(QCPGraph::lsStepLeft);
    for (size_t i = 0; i + 1 < vals.size(); ++i) g->addData(vals[i], vals[i + 1] - vals[i]);
  }
  if (hi > 0) {
    xAxis->setRange(lo / 4, hi * 4);
    yAxis->setRange(slo / 4, shi * 4);
  }
  format_count_ = static_cast<int>(formats.size());
  legend_rows_ = std::max(1, (format_count_ + legend_columns_ - 1) / legend_columns_);
  presentationScaleChanged(factor_);
  replot(QCustomPlot::rpQueuedReplot);
}

// Room for about four tick labels a line and a half apart (a decade or more each), the
// legend's rows and the x axis below: at 1280x720 it stands beside the number line.
// Presenting two formats, the legend sits in the empty top-left corner (the curves rise
// from bottom left to top right) and the plot keeps its rows for the data.
void SpacingPlot::presentationScaleChanged(double factor) {
  factor_ = factor;
  // Presenting, a third of a projector's width: a label every few decades (the log
  // ticker rounds the decades per label to 1, 2 or 5).
  xAxis->ticker()->setTickCount(factor_ > 1 ? 2 : 5);
  const bool inset = factor_ > 1 && graphCount() <= 2;
  QCPLayoutInset* corner = axisRect()->insetLayout();
  if (inset && legend->layout() != corner) {
    plotLayout()->take(legend);
    plotLayout()->simplify();
    corner->addElement(legend, Qt::AlignTop | Qt::AlignLeft);
    legend->setWrap(0);
    legend->setFillOrder(QCPLayoutGrid::foRowsFirst);
    legend->setBrush(QBrush(QColor(255, 255, 255, 230)));
  } else if (!inset) {
    place_legend_below(this, legend_columns_);  // below, or its columns changed
  }
  if (factor_ <= 1) {
    setMinimumHeight(0);
    return;
  }
  const double line = QFontMetricsF(font()).height() * factor_;
  const double legend_lines = inset ? 0 : 1.3 * legend_rows_;
  setMinimumHeight(static_cast<int>(line * (4 * 1.5 + legend_lines + 3)));
}

void SpacingPlot::setLegendColumns(int columns) {
  columns = std::max(1, columns);
  if (columns == legend_columns_) return;
  legend_columns_ = columns;
  legend_rows_ = std::max(1, (format_count_ + legend_columns_ - 1) / legend_columns_);
  presentationScaleChanged(factor_);
  replot(QCustomPlot::rpQueuedReplot);
}

void SpacingPlot::setMarker(std::optional<double> value) {
  value_ = value;
  std::optional<double> x;
  if (value && std::isfinite(*value) && *value != 0) x = std::fabs(*value);
  place_marker(marker_, x);
  place_note(note_, xAxis, value, x);
  replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace fp8wb
