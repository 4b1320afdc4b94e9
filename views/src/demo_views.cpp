#include "fp8wb/views/demo_views.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>
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
    // Unscaled, both formats see the same values, so their histograms coincide: the first
    // format is drawn filled, the others as dashed outlines on top, so that every colour
    // on the plot is one format's own, as the legend shows it.
    QColor col = format_color(c.format);
    if (hist_->graphCount() == 1) {
      g->setPen(QPen(col, 1.5));
      col.setAlpha(90);
      g->setBrush(col);
    } else {
      g->setPen(QPen(col, 2.5, Qt::DashLine));
      g->setBrush(Qt::NoBrush);
    }
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
  layout->addLayout(row);

  curve_->xAxis->setLabel(tr("outlier factor k"));
  curve_->yAxis->setLabel(tr("error outside the first block (%)"));
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
  // The source chapter's factors, to set its figures beside this tensor's.
  OutlierDemoConfig ref;
  ref.format = cfg.format;
  reference_ = run_outlier_demo(ref);
  QStringList here;
  for (const auto& r : reference_.rows) here << QString::number(r.tensorwise_error_pct, 'f', 2);
  footer_->setText(
      tr("The source chapter reports, for E4M3, %1% per tensor at k = 1e2 / 1e4 / 3e4 and %2% "
         "with 1x128 blocks. This tensor (%3, seed %4) gives %5% per tensor and %6% with "
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
         "underflow.")
          .arg(k, 0, 'g', 3)
          .arg(row.tensorwise_error_pct, 0, 'f', 2)
          .arg(row.tensorwise_underflow_pct, 0, 'f', 2)
          .arg(row.block_error_pct, 0, 'f', 2)
          .arg(row.block_underflow_pct, 0, 'f', 2));
}

QString OutlierDemoView::footerText() const {
  return footer_->text();
}

QString OutlierDemoView::summaryText() const {
  return summary_->text() + QLatin1Char('\n') + footer_->text();
}

namespace {

QColor storage_color(StorageFormat f, Rounding r) {
  if (r == Rounding::Stochastic) return QColor(0x94, 0x67, 0xbd);
  switch (f) {
    case StorageFormat::FP32: return QColor(0x33, 0x33, 0x33);
    case StorageFormat::BF16: return QColor(0xff, 0x7f, 0x0e);
    case StorageFormat::FP16: return QColor(0x2c, 0xa0, 0x2c);
    case StorageFormat::E4M3: return format_color(Format::E4M3FN);
    case StorageFormat::E5M2: return format_color(Format::E5M2);
  }
  return Qt::black;
}

QString track_label(const MasterWeightsTrack& t) {
  QString name = qs(storage_format_name(t.format));
  if (t.format == StorageFormat::FP32) name += QObject::tr(" (master weights)");
  if (t.rounding == Rounding::Stochastic) name += QObject::tr(", stochastic rounding");
  return name;
}

QSlider* demo_slider(QWidget* parent, const char* name, int lo, int hi, int value) {
  auto* s = new QSlider(Qt::Horizontal, parent);
  s->setObjectName(QLatin1String(name));
  s->setRange(lo, hi);
  s->setValue(value);
  s->setTickPosition(QSlider::TicksBelow);
  return s;
}

}  // namespace

MasterWeightsDemoView::MasterWeightsDemoView(QWidget* parent)
    : QWidget(parent),
      update_(demo_slider(this, "updateSlider", -20, -4, -12)),
      update_label_(new QLabel(this)),
      steps_(demo_slider(this, "stepsSlider", 1, 50, 10)),
      steps_label_(new QLabel(this)),
      plot_(new ExportablePlot(this)),
      summary_(new QLabel(this)),
      footer_(new QLabel(this)) {
  auto* layout = new QVBoxLayout(this);
  auto* intro = new QLabel(
      tr("A weight of 1.0 receives the same small update again and again; each add is computed "
         "in fp32 and stored in the weight's format. Low-precision weights lose small updates: "
         "mixed-precision training keeps fp32 master weights, or rounds stochastically."),
      this);
  intro->setWordWrap(true);
  layout->addWidget(intro);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Update:"), this));
  update_->setTickInterval(4);
  row->addWidget(update_, 1);
  row->addWidget(update_label_);
  row->addWidget(new QLabel(tr("Steps:"), this));
  steps_->setTickInterval(5);
  steps_->setPageStep(5);
  row->addWidget(steps_, 1);
  row->addWidget(steps_label_);
  layout->addLayout(row);
  plot_->xAxis->setLabel(tr("step"));
  plot_->yAxis->setLabel(tr("weight"));
  plot_->legend->setVisible(true);
  plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  layout->addWidget(plot_, 1);
  summary_->setTextFormat(Qt::RichText);
  layout->addWidget(summary_);
  footer_->setObjectName(QStringLiteral("masterWeightsFooter"));
  footer_->setWordWrap(true);
  layout->addWidget(footer_);
  connect(update_, &QSlider::valueChanged, this, [this] { rerun(); });
  connect(steps_, &QSlider::valueChanged, this, [this] { rerun(); });
  rerun();
}

void MasterWeightsDemoView::setUpdateStep(int step) {
  update_->setValue(step);
}
void MasterWeightsDemoView::setStepsHundreds(int hundreds) {
  steps_->setValue(hundreds);
}

void MasterWeightsDemoView::rerun() {
  MasterWeightsConfig cfg;
  cfg.update = std::pow(10.0, update_->value() / 4.0);
  cfg.steps = steps_->value() * 100;
  result_ = run_master_weights_demo(cfg);
  update_label_->setText(QStringLiteral("%1").arg(cfg.update, 0, 'g', 3));
  steps_label_->setText(QString::number(cfg.steps));
  plot_->clearGraphs();
  QVector<double> keys(static_cast<int>(cfg.steps) + 1);
  for (int i = 0; i < keys.size(); ++i) keys[i] = i;
  QStringList rows;
  const MasterWeightsTrack* stochastic = nullptr;
  for (const MasterWeightsTrack& t : result_.tracks) {
    QCPGraph* g = plot_->addGraph();
    g->setName(track_label(t));
    // Formats that lose the update all stay on one line: drawn first wide, then narrower
    // and dashed on top, every one stays visible, as its legend entry shows it.
    QPen pen(storage_color(t.format, t.rounding), 2);
    if (t.format == StorageFormat::BF16 && t.rounding == Rounding::NearestEven) pen.setWidthF(7);
    if (t.format == StorageFormat::E4M3) {
      pen.setWidthF(4);
      pen.setStyle(Qt::DashLine);
    }
    if (t.rounding == Rounding::Stochastic) {
      pen.setStyle(Qt::DashLine);
      stochastic = &t;
    }
    g->setPen(pen);
    g->setData(keys, QVector<double>(t.mean.begin(), t.mean.end()), true);
    QString final = QString::number(t.final_mean, 'f', 4);
    if (t.rounding == Rounding::Stochastic) {
      final += tr(" (mean of %1 seeds, std %2)").arg(cfg.seeds).arg(t.final_std, 0, 'f', 4);
    }
    rows << QStringLiteral("<tr><td><b>%1</b></td><td align=right>%2</td><td>%3</td></tr>")
                .arg(track_label(t).toHtmlEscaped(),
                     QStringLiteral("2<sup>%1</sup>").arg(std::ilogb(t.spacing_at_start)), final);
  }
  if (stochastic) {
    // The spread over seeds: a band between the lowest and the highest run.
    QColor band = storage_color(stochastic->format, stochastic->rounding);
    QCPGraph* low = plot_->addGraph();
    QCPGraph* high = plot_->addGraph();
    for (QCPGraph* g : {low, high}) {
      g->setPen(Qt::NoPen);
      g->removeFromLegend();
    }
    low->setData(keys, QVector<double>(stochastic->low.begin(), stochastic->low.end()), true);
    high->setData(keys, QVector<double>(stochastic->high.begin(), stochastic->high.end()), true);
    band.setAlpha(45);
    high->setBrush(band);
    high->setChannelFillGraph(low);
    high->setName(tr("stochastic rounding: lowest to highest of %1 seeds").arg(cfg.seeds));
    high->addToLegend();
  }
  double lo = INFINITY, hi = -INFINITY;
  for (const MasterWeightsTrack& t : result_.tracks) {
    for (const auto* v : {&t.low, &t.high}) {
      const auto [a, b] = std::minmax_element(v->begin(), v->end());
      lo = std::min(lo, *a);
      hi = std::max(hi, *b);
    }
  }
  const double pad = std::max(hi - lo, 1e-3);
  plot_->xAxis->setRange(0, cfg.steps);
  plot_->yAxis->setRange(lo - 0.08 * pad, hi + 0.35 * pad);
  plot_->replot(QCustomPlot::rpQueuedReplot);
  summary_->setText(tr("<table cellspacing=6><tr><th align=left>format</th><th>spacing above "
                       "the start</th><th align=left>weight after %1 steps (exact %2)</th></tr>%3"
                       "</table>")
                        .arg(cfg.steps)
                        .arg(cfg.initial + cfg.steps * cfg.update, 0, 'f', 4)
                        .arg(rows.join(QString())));
  footer_->setText(footerFor(result_));
}

// Why each format ends where it does, from the run itself: the spacing near the start,
// the formats that lose the update, those that move by whole spacings, and where a weight
// stops moving because the spacing there is more than twice the update.
QString MasterWeightsDemoView::footerFor(const MasterWeightsResult& r) {
  const MasterWeightsConfig& cfg = r.config;
  const QString update = QString::number(cfg.update, 'g', 3);
  QStringList spacings, lost, moving, stalled;
  for (const MasterWeightsTrack& t : r.tracks) {
    if (t.format == StorageFormat::FP32 || t.rounding != Rounding::NearestEven) continue;
    const QString name = qs(storage_format_name(t.format));
    spacings << tr("2^%1 in %2").arg(std::ilogb(t.spacing_at_start)).arg(name);
    const std::vector<double>& m = t.mean;
    if (m.size() < 2 || m.back() == m.front()) {
      lost << name;
    } else if (m.back() == m[m.size() - 2]) {
      const double at = m.back();
      const double sp = spacing_above(t.format, at);
      stalled << tr("%1 stops at %2, where the spacing is 2^%3 = %4")
                     .arg(name, QString::number(at, 'g', 6))
                     .arg(std::ilogb(sp))
                     .arg(sp, 0, 'g', 3);
    } else {
      moving << tr("%1 moves by a whole spacing, %2 per step instead of %3, so %4 after %5 "
                   "steps")
                    .arg(name, QString::number(m[1] - m[0], 'g', 3), update,
                         QString::number(t.final_mean, 'f', 4))
                    .arg(cfg.steps);
    }
  }
  QString text =
      tr("Why: every add rounds to nearest even on the format's grid. Near %1 the "
         "spacing is %2.")
          .arg(QString::number(cfg.initial, 'g', 6), spacings.join(QStringLiteral(", ")));
  if (!lost.isEmpty())
    text += tr(" An update of %1 is below half a spacing in %2: it is lost and the weight "
               "never moves.")
                .arg(update, lost.join(QStringLiteral(", ")));
  if (!moving.isEmpty() || !stalled.isEmpty())
    text += tr(" An update above half a spacing moves the weight by a whole spacing.");
  if (!moving.isEmpty())
    text += QLatin1Char(' ') + moving.join(QStringLiteral("; ")) + QLatin1Char('.');
  if (!stalled.isEmpty())
    text += tr(" The spacing doubles with each power of two: %1, more than twice the update, "
               "so from there every add is lost.")
                .arg(stalled.join(QStringLiteral("; ")));
  text +=
      tr(" fp32 master weights keep the update; stochastic rounding rounds up with a "
         "probability equal to the dropped fraction, so it is right on average, with a "
         "spread.");
  return text;
}

QString MasterWeightsDemoView::summaryText() const {
  return summary_->text();
}
QString MasterWeightsDemoView::footerText() const {
  return footer_->text();
}

LossScalingDemoView::LossScalingDemoView(QWidget* parent)
    : QWidget(parent),
      init_(demo_slider(this, "initScaleSlider", 0, 24, 16)),
      init_label_(new QLabel(this)),
      growth_(demo_slider(this, "growthIntervalSlider", 1, 200, 50)),
      growth_label_(new QLabel(this)),
      scale_plot_(new ExportablePlot(this)),
      underflow_plot_(new ExportablePlot(this)),
      summary_(new QLabel(this)) {
  auto* layout = new QVBoxLayout(this);
  auto* intro = new QLabel(
      tr("A tiny MLP learns a teacher with small outputs; its fp32 gradients are cast to fp16 "
         "or E5M2 before each update. Small gradients flush to zero. Dynamic loss scaling "
         "multiplies the loss (so every gradient) by a scale: a step whose gradients overflow "
         "to Inf or NaN is skipped and the scale halved; after N good steps it doubles."),
      this);
  intro->setWordWrap(true);
  layout->addWidget(intro);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Initial scale:"), this));
  init_->setTickInterval(4);
  row->addWidget(init_, 1);
  row->addWidget(init_label_);
  row->addWidget(new QLabel(tr("Good steps before growing (N):"), this));
  growth_->setTickInterval(25);
  row->addWidget(growth_, 1);
  row->addWidget(growth_label_);
  layout->addLayout(row);
  scale_plot_->xAxis->setLabel(tr("step"));
  scale_plot_->yAxis->setLabel(tr("loss scale"));
  scale_plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  scale_plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  underflow_plot_->xAxis->setLabel(tr("step"));
  underflow_plot_->yAxis->setLabel(tr("gradient values flushed to zero (%)"));
  // The legends below the plots: over them they would hide the curves' first steps.
  for (ExportablePlot* p : {scale_plot_, underflow_plot_}) {
    p->legend->setVisible(true);
    place_legend_below(p, 2);
  }
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(scale_plot_);
  split->addWidget(underflow_plot_);
  layout->addWidget(split, 1);
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);
  layout->addWidget(summary_);
  connect(init_, &QSlider::valueChanged, this, [this] { rerun(); });
  connect(growth_, &QSlider::valueChanged, this, [this] { rerun(); });
  rerun();
}

void LossScalingDemoView::setInitScaleExponent(int k) {
  init_->setValue(k);
}
void LossScalingDemoView::setGrowthInterval(int steps) {
  growth_->setValue(steps);
}

void LossScalingDemoView::rerun() {
  LossScalingConfig cfg;
  cfg.init_scale = std::ldexp(1.0, init_->value());
  cfg.growth_interval = growth_->value();
  result_ = run_loss_scaling_demo(cfg);
  init_label_->setText(QStringLiteral("2^%1").arg(init_->value()));
  growth_label_->setText(QString::number(cfg.growth_interval));
  scale_plot_->clearGraphs();
  underflow_plot_->clearGraphs();
  QStringList rows;
  double top = 1;
  for (const LossScalingRun& run : result_.runs) {
    const QString name = qs(storage_format_name(run.format));
    const QColor col = storage_color(run.format, Rounding::NearestEven);
    // The formats' curves often coincide (the same scale, no underflow with scaling): the
    // first format is drawn wide, the next narrow on top, so that both stay visible.
    const double width = run.format == result_.runs.front().format ? 6 : 2;
    QCPGraph* u = underflow_plot_->addGraph();
    u->setName(run.scaled ? tr("%1, dynamic loss scaling").arg(name)
                          : tr("%1, no loss scaling").arg(name));
    u->setPen(QPen(col, width, run.scaled ? Qt::SolidLine : Qt::DotLine));
    QCPGraph* scale = nullptr;
    QCPGraph* skipped = nullptr;
    if (run.scaled) {
      scale = scale_plot_->addGraph();
      scale->setName(tr("%1 loss scale").arg(name));
      scale->setPen(QPen(col, width));
      scale->setLineStyle(QCPGraph::lsStepLeft);
      skipped = scale_plot_->addGraph();
      skipped->setName(tr("%1: step skipped (overflow)").arg(name));
      skipped->setLineStyle(QCPGraph::lsNone);
      skipped->setScatterStyle(
          QCPScatterStyle(width > 2 ? QCPScatterStyle::ssCircle : QCPScatterStyle::ssCross, col,
                          width > 2 ? 13 : 9));
    }
    for (size_t i = 0; i < run.steps.size(); ++i) {
      const LossScalingStep& st = run.steps[i];
      u->addData(static_cast<double>(i), st.underflow_pct);
      top = std::max(top, st.underflow_pct);
      if (scale) scale->addData(static_cast<double>(i), st.scale);
      if (skipped && st.skipped) skipped->addData(static_cast<double>(i), st.scale);
    }
    rows << tr("<tr><td><b>%1</b></td><td>%2</td><td align=right>%3%</td><td "
               "align=right>%4</td><td align=right>%5</td><td align=right>%6</td></tr>")
                .arg(name, run.scaled ? tr("dynamic") : tr("none"))
                .arg(run.mean_underflow_pct, 0, 'f', 2)
                .arg(run.skipped_steps)
                .arg(run.steps.back().scale, 0, 'g', 4)
                .arg(run.final_loss, 0, 'g', 3);
  }
  scale_plot_->rescaleAxes();
  const QCPRange sy = scale_plot_->yAxis->range();
  scale_plot_->yAxis->setRange(std::max(sy.lower / 4, 0.25), sy.upper * 16);
  underflow_plot_->xAxis->setRange(0, cfg.steps);
  underflow_plot_->yAxis->setRange(0, std::min(100.0, top * 1.2 + 1));
  scale_plot_->replot(QCustomPlot::rpQueuedReplot);
  underflow_plot_->replot(QCustomPlot::rpQueuedReplot);
  summary_->setText(
      tr("<table cellspacing=6><tr><th align=left>gradients in</th><th align=left>loss "
         "scaling</th><th>flushed to zero (mean over steps)</th><th>skipped steps</th><th>final "
         "scale</th><th>final loss</th></tr>%1</table>")
          .arg(rows.join(QString())));
}

QString LossScalingDemoView::summaryText() const {
  return summary_->text();
}

}  // namespace fp8wb
