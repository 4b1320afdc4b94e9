// OutlierDemoView (demo_views.h): an activation with outlier channels scaled by k, per
// tensor against 1x128 blocks: the error outside the first block over k, the two block
// error maps side by side at the slider's k (colours auto or fixed over every k), and a reference
// result's figures beside this tensor's.
#include "fp8wb/views/formats/demo_views.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>

#include "formats/demo_views_internal.h"
#include "fp8wb/views/common/exportable_plot.h"

namespace fp8wb {

using namespace demo_detail;  // qs() (demo_views_internal.h)

namespace {
// A cell's colour figure: log10 of its relative error, -6 for none.
double log_error(double e) {
  return e > 0 ? std::log10(e) : -6.0;
}
}  // namespace

OutlierDemoView::OutlierDemoView(QWidget* parent)
    : QWidget(parent),
      slider_(new QSlider(Qt::Horizontal, this)),
      slider_label_(new QLabel(this)),
      format_(new QComboBox(this)),
      curve_(new ExportablePlot(this)),
      maps_(new ExportablePlot(this)),
      map_tensor_(nullptr),
      map_block_(nullptr),
      color_scale_(nullptr),
      range_(make_colour_range_box(this)),
      summary_(new QLabel(this)),
      footer_(new QLabel(this)) {
  auto* layout = new QVBoxLayout(this);
  auto* intro = new QLabel(
      tr("A 256×1024 normal activation with 4 outlier channels scaled by k. Per-tensor scaling "
         "lets the outliers set the scale for everyone; 1x128 blocks keep the damage inside "
         "the first block. Error = √(Σ err² / Σ x²) outside the first 128 channels."),
      this);
  intro->setWordWrap(true);
  layout->addWidget(intro);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Outlier factor k:"), this));
  slider_->setRange(0, 20);
  slider_->setValue(16);  // 1e4
  slider_->setTickPosition(QSlider::TicksBelow);
  slider_->setTickInterval(4);
  row->addWidget(slider_, 1);
  row->addWidget(slider_label_);
  row->addWidget(new QLabel(tr("Format:"), this));
  for (Format f : {Format::E4M3FN, Format::E5M2, Format::E4M3FNUZ})
    format_->addItem(qs(format_info(f).name), static_cast<int>(f));
  row->addWidget(format_);
  // Auto: this k's own lowest to highest error; fixed: the range over every k of the
  // slider, so that the colours mean the same as the slider moves.
  row->addWidget(new QLabel(tr("Colours:"), this));
  range_->setToolTip(
      tr("The colours' range: auto, from this k's lowest error to its highest "
         "(the range moves with k), or fixed, over every k of the slider (the "
         "same colour is the same error at any k); the colour bar says which"));
  row->addWidget(range_);
  layout->addLayout(row);

  curve_->xAxis->setLabel(tr("outlier factor k"));
  // Two lines: one would be taller than the plot on a projector's 720 rows.
  curve_->yAxis->setLabel(tr("error outside\nthe first block (%)"));
  curve_->xAxis->setScaleType(QCPAxis::stLogarithmic);
  // One label per power of ten, written as one ("10^3"): plain numbers run together.
  // The plot is often narrow: as many labels as fit side by side with room between them.
  auto log_ticker = QSharedPointer<QCPAxisTickerLog>::create();
  curve_->xAxis->setTicker(log_ticker);
  curve_->xAxis->setNumberFormat(QStringLiteral("eb"));
  curve_->xAxis->setNumberPrecision(0);
  connect(curve_, &QCustomPlot::beforeReplot, this, [this, log_ticker] {
    const QFontMetrics fm(curve_->xAxis->tickLabelFont());
    const int label = fm.horizontalAdvance(QStringLiteral("1e+05"));
    log_ticker->setTickCount(std::max(1, curve_->axisRect()->width() / (2 * label)));
  });
  curve_->legend->setVisible(true);
  curve_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);

  // Two heatmaps side by side sharing one colour scale (log10 of the relative error).
  maps_->plotLayout()->clear();
  auto* left = new QCPAxisRect(maps_);
  auto* right = new QCPAxisRect(maps_);
  maps_->plotLayout()->addElement(0, 0, left);
  maps_->plotLayout()->addElement(0, 1, right);
  color_scale_ = new QCPColorScale(maps_);
  maps_->plotLayout()->addElement(0, 2, color_scale_);
  color_scale_->axis()->setLabel(tr("log10 relative error"));
  map_tensor_ = new QCPColorMap(left->axis(QCPAxis::atBottom), left->axis(QCPAxis::atLeft));
  map_block_ = new QCPColorMap(right->axis(QCPAxis::atBottom), right->axis(QCPAxis::atLeft));
  for (const auto& [rect, title] :
       {std::pair{left, tr("per tensor")}, std::pair{right, tr("1x128 blocks")}}) {
    // Two lines and ticks 500 apart: each map is a fifth of a projector's width.
    rect->axis(QCPAxis::atBottom)->setLabel(tr("channel (K)\n%1").arg(title));
    rect->axis(QCPAxis::atBottom)->ticker()->setTickCount(3);
    rect->axis(QCPAxis::atLeft)->setLabel(tr("token"));
    rect->axis(QCPAxis::atLeft)->setRangeReversed(true);
  }
  map_tensor_->setName(tr("per tensor"));
  map_block_->setName(tr("1x128 blocks"));
  // The CSV holds the maps' cells by the tensor's indices they cover (tokens, channels)
  // and their relative error itself, each map named: not the drawn log10 by the cells'
  // centres.
  maps_->setCsvTable([this] {
    CsvTable t{{QStringLiteral("map"), QStringLiteral("tokens"), QStringLiteral("channels"),
                QStringLiteral("relative_error")},
               {}};
    if (result_.rows.empty()) return t;
    const OutlierDemoRow& shown = result_.rows.front();
    const int64_t rows = result_.config.rows, cols = result_.config.cols;
    auto span = [](int64_t cell, int64_t extent, int64_t end) {
      const int64_t first = cell * extent, last = std::min(end, first + extent) - 1;
      return first == last ? QString::number(first) : QStringLiteral("%1-%2").arg(first).arg(last);
    };
    for (const auto& [name, stats] : {std::pair{map_tensor_->name(), &shown.tensorwise},
                                      std::pair{map_block_->name(), &shown.block}}) {
      const MapGrid& g = stats->map_grid;
      const auto rel = stats->map_rel_error();
      for (int64_t r = 0; r < g.rows; ++r) {
        for (int64_t c = 0; c < g.cols; ++c) {
          t.rows << QStringList{name, span(r, g.cell_rows, rows), span(c, g.cell_cols, cols),
                                csv_number(rel[static_cast<size_t>(r * g.cols + c)])};
        }
      }
    }
    return t;
  });
  for (QCPColorMap* m : {map_tensor_, map_block_}) {
    m->setColorScale(color_scale_);
    m->setGradient(thermal_on_white());
    m->setInterpolate(false);
  }

  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(curve_);
  split->addWidget(maps_);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  // Two fifths for the error curve from the start: stretch factors alone share only what
  // is left over the plots' size hints, which left the curve a quarter of a projector.
  split->setSizes({2000, 3000});
  split->setChildrenCollapsible(false);  // neither plot dragged or squeezed to nothing
  layout->addWidget(split, 1);
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);
  layout->addWidget(summary_);
  footer_->setObjectName(QStringLiteral("outlierFooter"));
  footer_->setWordWrap(true);
  layout->addWidget(footer_);
  connect(slider_, &QSlider::valueChanged, this, [this] { rerun(); });
  connect(format_, &QComboBox::currentIndexChanged, this, [this] {
    rebuildCurve();
    rerun();
  });
  connect(range_, &QComboBox::currentIndexChanged, this, [this] { rerun(); });
  rebuildCurve();
  rerun();
}

void OutlierDemoView::setFactorStep(int step) {
  slider_->setValue(step);
}
void OutlierDemoView::setFormat(Format f) {
  format_->setCurrentIndex(format_->findData(static_cast<int>(f)));
}

void OutlierDemoView::rebuildCurve() {
  OutlierDemoConfig cfg;
  cfg.format = static_cast<Format>(format_->currentData().toInt());
  cfg.factors.clear();
  // Every k of the slider: the curve's points, and the fixed colour range over all of them.
  for (int step = 0; step <= 20; ++step) cfg.factors.push_back(std::pow(10.0, step / 4.0));
  curve_data_ = run_outlier_demo(cfg);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& r : curve_data_.rows) {
    for (const TensorStats* stats : {&r.tensorwise, &r.block}) {
      for (const float e : stats->map_rel_error()) {
        const double v = log_error(e);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  has_fixed_range_ = lo <= hi;
  fixed_lo_ = lo;
  fixed_hi_ = hi;
  curve_->clearGraphs();
  QCPGraph* t = curve_->addGraph();
  t->setName(tr("per tensor"));
  t->setPen(QPen(QColor(0xd6, 0x27, 0x28), 2));
  QCPGraph* b = curve_->addGraph();
  b->setName(tr("1x128 blocks"));
  b->setPen(QPen(QColor(0x1f, 0x77, 0xb4), 2));
  // A point every other step of the slider (k = 1, 10^0.5, 10, ...).
  for (size_t i = 0; i < curve_data_.rows.size(); i += 2) {
    const OutlierDemoRow& row = curve_data_.rows[i];
    t->addData(row.factor, row.tensorwise_error_pct);
    b->addData(row.factor, row.block_error_pct);
  }
  for (QCPGraph* g : {t, b}) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
  // The reference result's factors, to set its figures beside this tensor's.
  OutlierDemoConfig ref;
  ref.format = cfg.format;
  reference_ = run_outlier_demo(ref);
  QStringList here;
  for (const auto& r : reference_.rows) here << QString::number(r.tensorwise_error_pct, 'f', 2);
  footer_->setText(
      tr("A reference result from the mixed-precision / FP8 training literature, for this setup "
         "in E4M3: %1% per tensor at k = 1e2 / 1e4 / 3e4 and %2% with 1x128 blocks. This tensor "
         "(%3, seed %4) gives %5% per tensor and %6% with "
         "blocks. The per-tensor figures differ because the scale is set by the tensor's amax, "
         "which depends on the random draw (in E4M3, seeds 0 to 3 give 3.9 to 4.5% at k = 1e4 "
         "and 10.9 to 13.2% at k = 3e4). Blocks outside the first keep their own scale, so "
         "they agree.")
          .arg(QStringLiteral("2.6 / 4.9 / 14.1"), QStringLiteral("2.6"),
               qs(format_info(cfg.format).name))
          .arg(reference_.config.seed)
          .arg(here.join(QStringLiteral(" / ")))
          .arg(reference_.rows.front().block_error_pct, 0, 'f', 2));
  curve_->xAxis->setRange(0.7, 1.5e5);
  curve_->yAxis->rescale();
  curve_->yAxis->setRangeLower(0);
  curve_->yAxis->setRangeUpper(curve_->yAxis->range().upper * 1.15);
}

void OutlierDemoView::rerun() {
  OutlierDemoConfig cfg;
  cfg.format = static_cast<Format>(format_->currentData().toInt());
  const double k = std::pow(10.0, slider_->value() / 4.0);
  cfg.factors = {k};
  result_ = run_outlier_demo(cfg);
  slider_label_->setText(QStringLiteral("k = %1").arg(k, 0, 'g', 3));
  const OutlierDemoRow& row = result_.rows.front();
  curve_->clearItems();
  auto* marker = new QCPItemStraightLine(curve_);
  marker->point1->setCoords(k, 0);
  marker->point2->setCoords(k, 1);
  marker->setPen(QPen(QColor(0, 0, 0, 150), 1.5, Qt::DashLine));
  curve_->replot(QCustomPlot::rpQueuedReplot);

  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& [map, stats] :
       {std::pair{map_tensor_, &row.tensorwise}, std::pair{map_block_, &row.block}}) {
    const MapGrid& g = stats->map_grid;
    const auto rel = stats->map_rel_error();
    map->data()->setSize(static_cast<int>(g.cols), static_cast<int>(g.rows));
    map->data()->setRange(QCPRange(0, static_cast<double>(cfg.cols)),
                          QCPRange(0, static_cast<double>(cfg.rows)));
    for (int64_t r = 0; r < g.rows; ++r) {
      for (int64_t c = 0; c < g.cols; ++c) {
        const double v = log_error(rel[static_cast<size_t>(r * g.cols + c)]);
        map->data()->setCell(static_cast<int>(c), static_cast<int>(r), v);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    map->keyAxis()->setRange(0, static_cast<double>(cfg.cols));
    map->valueAxis()->setRange(0, static_cast<double>(cfg.rows));
  }
  // One colour scale for both maps: setting the range of one sets it for the other.
  apply_colour_range(
      map_tensor_, tr("log10 relative error"), lo, hi, kAnyValue,
      has_fixed_range_ ? std::optional<QCPRange>(QCPRange(fixed_lo_, fixed_hi_)) : std::nullopt,
      fixed_colour_range(range_));
  maps_->replot(QCustomPlot::rpQueuedReplot);
  summary_->setText(
      tr("k = %1: per tensor <b>%2%</b> error, %3% underflow; 1x128 blocks <b>%4%</b> error, %5% "
         "underflow.")
          .arg(k, 0, 'g', 3)
          .arg(row.tensorwise_error_pct, 0, 'f', 2)
          .arg(row.tensorwise_underflow_pct, 0, 'f', 2)
          .arg(row.block_error_pct, 0, 'f', 2)
          .arg(row.block_underflow_pct, 0, 'f', 2));
}

QCPRange OutlierDemoView::colourRange() const {
  return color_scale_->dataRange();
}

QString OutlierDemoView::footerText() const {
  return footer_->text();
}

QString OutlierDemoView::summaryText() const {
  return summary_->text() + QLatin1Char('\n') + footer_->text();
}

}  // namespace fp8wb
