// defines: the plots' look, shared by every view: format_color(), the heatmaps' colour
// scales (colour_scale_range(), the "auto" / "fixed" range box, apply_colour_range(),
// apply_block_map_range()), thermal_on_white(), set_whole_number_ticks(), fill_block_map()
// and place_legend_below(). Declared in exportable_plot.h.
#include <QComboBox>
#include <algorithm>
#include <cmath>

#include "common/exportable_plot_internal.h"
#include "fp8wb/views/common/exportable_plot.h"

namespace fp8wb {

QColor format_color(Format f) {
  switch (f) {
    case Format::E4M3FN: return QColor(0x1f, 0x77, 0xb4);
    case Format::E5M2: return QColor(0xd6, 0x27, 0x28);
    case Format::E4M3FNUZ: return QColor(0x17, 0xbe, 0xcf);
    case Format::E5M2FNUZ: return QColor(0xff, 0x7f, 0x0e);
    case Format::E8M0FNU: return QColor(0x7f, 0x7f, 0x7f);
    case Format::E2M1FN: return QColor(0x2c, 0xa0, 0x2c);
    case Format::E3M2FN: return QColor(0x94, 0x67, 0xbd);
    case Format::E2M3FN: return QColor(0x8c, 0x56, 0x4b);
  }
  return Qt::black;
}

QCPRange colour_scale_range(double lo, double hi, const QCPRange& domain) {
  if (lo < hi) return QCPRange(lo, hi);
  const double pad = std::max(0.5, std::abs(lo) * 0.05);
  double lower = lo - pad, upper = hi + pad;
  // Shifted, not cut, at the domain's ends: the band keeps its width where it can.
  if (lower < domain.lower) {
    upper = std::min(domain.upper, upper + (domain.lower - lower));
    lower = domain.lower;
  }
  if (upper > domain.upper) {
    lower = std::max(domain.lower, lower - (upper - domain.upper));
    upper = domain.upper;
  }
  return QCPRange(lower, upper);
}

QComboBox* make_colour_range_box(QWidget* parent) {
  auto* box = new QComboBox(parent);
  box->setObjectName(QStringLiteral("colourRange"));
  // Short: the box sits in rows of choices that must fit a 1280-pixel screen; the colour
  // bar and the tooltip say the rest.
  box->addItem(QObject::tr("auto"));
  box->addItem(QObject::tr("fixed"));
  box->setToolTip(
      QObject::tr("The colours' range: auto, from the lowest figure shown to the highest (small "
                  "differences fill the whole scale), or fixed, one that means the same whatever "
                  "the figures (0-100 % for a percentage, 0-60 dB for an SQNR); the colour bar "
                  "says which"));
  return box;
}

bool fixed_colour_range(const QComboBox* box) {
  return box && box->currentIndex() == 1;
}

void apply_colour_range(QCPColorMap* map, const QString& label, double lo, double hi,
                        const QCPRange& domain, const std::optional<QCPRange>& fixed,
                        bool use_fixed) {
  QCPColorScale* scale = map->colorScale();
  if (!(lo <= hi)) {
    if (scale) scale->axis()->setLabel(label);
    return;
  }
  const bool is_fixed = use_fixed && fixed.has_value();
  const QCPRange r = is_fixed ? *fixed : colour_scale_range(lo, hi, domain);
  map->setDataRange(r);
  if (scale) {
    // The colour bar's title is the plot's rightmost text: a gap past it, so that its two
    // lines are never drawn against (or, rounded, past) the plot's right edge.
    if (QCPLayoutGrid* layout = map->parentPlot()->plotLayout())
      layout->setMargins(QMargins(0, 0, kColourBarGap, 0));
    scale->axis()->setLabel(
        QStringLiteral("%1\n(%2: %3 to %4)")
            .arg(label, is_fixed ? QObject::tr("fixed range") : QObject::tr("auto range"),
                 QString::number(r.lower, 'g', 3), QString::number(r.upper, 'g', 3)));
  }
}

void apply_block_map_range(QCPColorMap* map, const QString& label, bool use_fixed) {
  const bool blocks = map->property(detail::kBlockGrid).isValid();
  const QCPRange own = map->dataRange();
  apply_colour_range(map, label, blocks ? own.lower : 1, blocks ? own.upper : 0, kNonNegativeDomain,
                     kRelativeErrorRange, use_fixed);
}

QCPColorGradient thermal_on_white() {
  QCPColorGradient thermal(QCPColorGradient::gpThermal);  // color() is not const
  QCPColorGradient g;
  g.clearColorStops();
  for (int i = 0; i <= 8; ++i)
    g.setColorStopAt(i / 8.0, thermal.color(0.85 * i / 8.0, QCPRange(0, 1)));
  g.setNanHandling(QCPColorGradient::nhTransparent);
  return g;
}

void set_whole_number_ticks(QCPAxis* axis) {
  auto ticker = QSharedPointer<QCPAxisTickerFixed>::create();
  ticker->setTickStep(1.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  axis->setTicker(ticker);
}

void fill_block_map(QCPColorMap* map, int64_t rows, int64_t cols, const std::vector<float>& cells) {
  map->data()->clear();
  map->setProperty(detail::kBlockGrid, QVariant());
  if (rows <= 0 || cols <= 0 || cells.size() != static_cast<size_t>(rows * cols)) return;
  // The blocks as they are, for the CSV (the map may draw one row or column twice).
  map->setProperty(detail::kBlockGrid, QSize(static_cast<int>(cols), static_cast<int>(rows)));
  // QCPColorMap draws a dimension of one cell with no extent (its half-cell width is the
  // range over size - 1): one row or column (rowwise scaling, a vector) is drawn as two
  // equal cells centred at +-0.25, which cover the one block from -0.5 to 0.5.
  const int64_t kc = std::max<int64_t>(cols, 2), kr = std::max<int64_t>(rows, 2);
  map->data()->setSize(static_cast<int>(kc), static_cast<int>(kr));
  map->data()->setRange(
      cols == 1 ? QCPRange(-0.25, 0.25) : QCPRange(0, static_cast<double>(cols - 1)),
      rows == 1 ? QCPRange(-0.25, 0.25) : QCPRange(0, static_cast<double>(rows - 1)));
  for (int64_t r = 0; r < kr; ++r) {
    for (int64_t c = 0; c < kc; ++c) {
      const int64_t cell = std::min(r, rows - 1) * cols + std::min(c, cols - 1);
      map->data()->setCell(static_cast<int>(c), static_cast<int>(r),
                           cells[static_cast<size_t>(cell)]);
    }
  }
  // The colour range over the blocks with a figure: QCustomPlot's own rescale starts from
  // the first cell and ends NaN where that cell is NaN (a block without signal).
  float lo = INFINITY, hi = -INFINITY;
  for (float e : cells) {
    if (std::isnan(e)) continue;
    lo = std::min(lo, e);
    hi = std::max(hi, e);
  }
  if (!(lo <= hi)) {
    map->setDataRange(QCPRange(0, 1));  // no block has a figure: all grey
  } else if (lo == hi) {
    // Every block alike (an exact tensor: all 0): a band around the figure, within what a
    // relative error can be.
    map->setDataRange(colour_scale_range(lo, hi, kNonNegativeDomain));
  } else {
    map->setDataRange(QCPRange(lo, hi));
  }
  // Whole blocks in view: each cell spans +-0.5 around its index; ticks only at block
  // indices (whole numbers, steps of 1, 2, 5, 10, ... as the room allows).
  for (QCPAxis* axis : {map->keyAxis(), map->valueAxis()}) {
    if (!axis->ticker().dynamicCast<QCPAxisTickerFixed>()) set_whole_number_ticks(axis);
  }
  map->keyAxis()->setRange(-0.5, static_cast<double>(cols) - 0.5);
  map->valueAxis()->setRange(-0.5, static_cast<double>(rows) - 0.5);
}

void place_legend_below(QCustomPlot* plot, int columns) {
  QCPLegend* legend = plot->legend;
  if (!legend) return;
  QCPLayoutInset* inset = plot->axisRect()->insetLayout();
  if (legend->layout() == inset) {
    inset->take(legend);
    inset->simplify();
  }
  if (legend->layout() != plot->plotLayout()) {
    QCPLayoutGrid* grid = plot->plotLayout();
    const int row = grid->rowCount();
    grid->insertRow(row);
    grid->addElement(row, 0, legend);
    grid->setRowStretchFactor(row, 0.001);  // as tall as its entries, no more
  }
  // The wrap first: setting the fill order lays the entries out again, by the wrap.
  legend->setWrap(std::max(1, columns));
  legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  legend->setBorderPen(Qt::NoPen);
  legend->setBrush(Qt::NoBrush);
  legend->setMargins(QMargins(4, 0, 4, 2));
  legend->setRowSpacing(0);
  legend->setColumnSpacing(12);
}

}  // namespace fp8wb
