#include "fp8wb/views/demo_views.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>

#include "fp8wb/views/exportable_plot.h"

namespace fp8wb {
namespace {

QString qs(std::string_view s) {
  return QString::fromLatin1(s.data(), static_cast<int>(s.size()));
}

// The representable band of a format on a log2 axis: subnormals light, normals darker.
void add_band(QCustomPlot* plot, Format f, double y_top, int row) {
  const auto& info = format_info(f);
  const double lo = std::log2(info.min_subnormal), mid = std::log2(info.min_normal);
  const double hi = std::log2(info.max_finite);
  QColor c = format_color(f);
  const double y0 = y_top * (1.02 + 0.04 * row), y1 = y0 + y_top * 0.035;
  for (const auto& [a, b, alpha] : {std::tuple{lo, mid, 70}, std::tuple{mid, hi, 170}}) {
    auto* rect = new QCPItemRect(plot);
    rect->topLeft->setCoords(a, y1);
    rect->bottomRight->setCoords(b, y0);
    c.setAlpha(alpha);
    rect->setBrush(c);
    rect->setPen(Qt::NoPen);
  }
  // Left of the band: the axis ends soon after the widest format's largest value, and a
  // label to its right would be cut at presentation size.
  auto* label = new QCPItemText(plot);
  label->position->setCoords(lo - 0.5, (y0 + y1) / 2);
  label->setPositionAlignment(Qt::AlignRight | Qt::AlignVCenter);
  label->setText(qs(info.name) + QStringLiteral(" range"));
  label->setColor(format_color(f));
}

}  // namespace

GradientDemoView::GradientDemoView(QWidget* parent)
    : QWidget(parent),
      slider_(new QSlider(Qt::Horizontal, this)),
      slider_label_(new QLabel(this)),
      scaled_(new QCheckBox(tr("Per-tensor scaling (scale = fmax / amax)"), this)),
      hist_(new ExportablePlot(this)),
      summary_(new QLabel(this)) {
  auto* layout = new QVBoxLayout(this);
  auto* intro = new QLabel(
      tr("Gradient-like values, |g| log-uniform between 1e-8 and 0.1, cast to E4M3 and E5M2. "
         "Without scaling, E4M3's narrow range flushes most of them to zero; a loss scale or "
         "per-tensor scaling moves them into range."),
      this);
  intro->setWordWrap(true);
  layout->addWidget(intro);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Gradient scale:"), this));
  slider_->setRange(-8, 24);
  slider_->setValue(0);
  slider_->setTickPosition(QSlider::TicksBelow);
  slider_->setTickInterval(4);
  row->addWidget(slider_, 1);
  row->addWidget(slider_label_);
  row->addWidget(scaled_);
  layout->addLayout(row);
  hist_->xAxis->setLabel(tr("log2 |g × scale|"));
  hist_->yAxis->setLabel(tr("values"));
  hist_->legend->setVisible(true);
  hist_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  layout->addWidget(hist_, 1);
  summary_->setTextFormat(Qt::RichText);
  layout->addWidget(summary_);
  connect(slider_, &QSlider::valueChanged, this, [this] { rerun(); });
  connect(scaled_, &QCheckBox::toggled, this, [this] { rerun(); });
  rerun();
}

void GradientDemoView::setScaleExponent(int k) {
  slider_->setValue(k);
}
void GradientDemoView::setPerTensorScaling(bool on) {
  scaled_->setChecked(on);
}

void GradientDemoView::rerun() {
  GradientDemoConfig cfg;
  cfg.n = 1 << 17;  // enough for smooth histograms, fast enough to follow the slider
  cfg.gradient_scale = std::ldexp(1.0, slider_->value());
  result_ = run_gradient_demo(cfg);
  slider_label_->setText(QStringLiteral("2^%1").arg(slider_->value()));
  const bool scaled = scaled_->isChecked();
  hist_->clearGraphs();
  hist_->clearItems();
  double peak = 1;
  QStringList rows;
  for (const GradientDemoCase& c : result_.cases) {
    rows << tr("<tr><td><b>%1</b></td><td>%2</td><td align=right>%3%</td><td "
               "align=right>%4</td></tr>")
                .arg(qs(format_info(c.format).name),
                     c.scaled ? tr("per-tensor, scale %1").arg(c.scale, 0, 'g', 4)
                              : tr("none (plain cast)"))
                .arg(c.stats.underflow_pct(), 0, 'f', 1)
                .arg(c.stats.sqnr_db(), 0, 'f', 1);
    if (c.scaled != scaled) continue;
    QCPGraph* g = hist_->addGraph();
    g->setName(qs(format_info(c.format).name) + (c.scaled ? tr(" (scaled)") : QString()));
    g->setLineStyle(QCPGraph::lsStepCenter);
    QColor col = format_color(c.format);
    g->setPen(QPen(col, 2));
    col.setAlpha(50);
    g->setBrush(col);
    for (int b = 0; b < kHistExpBins; ++b) {
      const double count = static_cast<double>(c.stats.raw.hist[b]);
      g->addData(kHistMinExp + b, count);
      peak = std::max(peak, count);
    }
  }
  int row = 0;
  for (Format f : result_.config.formats) add_band(hist_, f, peak, row++);
  hist_->xAxis->setRange(-32, 20);
  hist_->yAxis->setRange(0, peak * 1.25);
  hist_->replot(QCustomPlot::rpQueuedReplot);
  summary_->setText(
      tr("<table cellspacing=8><tr><th>format</th><th>scaling</th><th>underflow</th><th>SQNR "
         "dB</th>"
         "</tr>%1</table>")
          .arg(rows.join(QString())));
}

QString GradientDemoView::summaryText() const {
  return summary_->text();
}

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
      summary_(new QLabel(this)) {
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
  layout->addLayout(row);

  curve_->xAxis->setLabel(tr("outlier factor k"));
  curve_->yAxis->setLabel(tr("error outside the first block (%)"));
  curve_->xAxis->setScaleType(QCPAxis::stLogarithmic);
  curve_->xAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
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
    rect->axis(QCPAxis::atBottom)->setLabel(tr("channel (K) — %1").arg(title));
    rect->axis(QCPAxis::atLeft)->setLabel(tr("token"));
    rect->axis(QCPAxis::atLeft)->setRangeReversed(true);
  }
  for (QCPColorMap* m : {map_tensor_, map_block_}) {
    m->setColorScale(color_scale_);
    m->setGradient(QCPColorGradient(QCPColorGradient::gpThermal));
    m->setInterpolate(false);
  }

  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(curve_);
  split->addWidget(maps_);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  layout->addWidget(split, 1);
  summary_->setTextFormat(Qt::RichText);
  layout->addWidget(summary_);
  connect(slider_, &QSlider::valueChanged, this, [this] { rerun(); });
  connect(format_, &QComboBox::currentIndexChanged, this, [this] {
    rebuildCurve();
    rerun();
  });
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
  for (int step = 0; step <= 20; step += 2) cfg.factors.push_back(std::pow(10.0, step / 4.0));
  curve_data_ = run_outlier_demo(cfg);
  curve_->clearGraphs();
  QCPGraph* t = curve_->addGraph();
  t->setName(tr("per tensor"));
  t->setPen(QPen(QColor(0xd6, 0x27, 0x28), 2));
  QCPGraph* b = curve_->addGraph();
  b->setName(tr("1x128 blocks"));
  b->setPen(QPen(QColor(0x1f, 0x77, 0xb4), 2));
  for (const auto& row : curve_data_.rows) {
    t->addData(row.factor, row.tensorwise_error_pct);
    b->addData(row.factor, row.block_error_pct);
  }
  for (QCPGraph* g : {t, b}) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
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

  double lo = 0, hi = -6;
  for (const auto& [map, stats] :
       {std::pair{map_tensor_, &row.tensorwise}, std::pair{map_block_, &row.block}}) {
    const MapGrid& g = stats->map_grid;
    const auto rel = stats->map_rel_error();
    map->data()->setSize(static_cast<int>(g.cols), static_cast<int>(g.rows));
    map->data()->setRange(QCPRange(0, static_cast<double>(cfg.cols)),
                          QCPRange(0, static_cast<double>(cfg.rows)));
    for (int64_t r = 0; r < g.rows; ++r) {
      for (int64_t c = 0; c < g.cols; ++c) {
        const double e = rel[static_cast<size_t>(r * g.cols + c)];
        const double v = e > 0 ? std::log10(e) : -6.0;
        map->data()->setCell(static_cast<int>(c), static_cast<int>(r), v);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    map->keyAxis()->setRange(0, static_cast<double>(cfg.cols));
    map->valueAxis()->setRange(0, static_cast<double>(cfg.rows));
  }
  color_scale_->setDataRange(
      QCPRange(std::floor(std::min(lo, -2.0)), std::ceil(std::max(hi, -1.0))));
  maps_->replot(QCustomPlot::rpQueuedReplot);
  summary_->setText(
      tr("k = %1: per tensor <b>%2%</b> error, %3% underflow; 1x128 blocks <b>%4%</b> error, %5% "
         "underflow. (The source chapter: 2.6 / 4.9 / 14.1% per tensor at k = 1e2 / 1e4 / 3e4, "
         "2.6% with blocks.)")
          .arg(k, 0, 'g', 3)
          .arg(row.tensorwise_error_pct, 0, 'f', 2)
          .arg(row.tensorwise_underflow_pct, 0, 'f', 2)
          .arg(row.block_error_pct, 0, 'f', 2)
          .arg(row.block_underflow_pct, 0, 'f', 2));
}

QString OutlierDemoView::summaryText() const {
  return summary_->text();
}

}  // namespace fp8wb
