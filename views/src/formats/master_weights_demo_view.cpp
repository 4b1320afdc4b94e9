// MasterWeightsDemoView (demo_views.h): a weight's small updates stored in each format
// (fp32 master weights, bf16, fp16, E4M3, E5M2, stochastic rounding with its spread over
// seeds), sliders for the update and the step count, and why each format ends where it
// does.
#include "fp8wb/views/formats/demo_views.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "formats/demo_views_internal.h"
#include "fp8wb/views/common/exportable_plot.h"

namespace fp8wb {

using namespace demo_detail;  // qs(), storage_color(), demo_slider() (demo_views_internal.h)

namespace {

QString track_label(const MasterWeightsTrack& t) {
  QString name = qs(storage_format_name(t.format));
  if (t.format == StorageFormat::FP32) name += QObject::tr(" (master weights)");
  if (t.rounding == Rounding::Stochastic) name += QObject::tr(", stochastic rounding");
  return name;
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
  set_whole_number_ticks(plot_->xAxis);
  plot_->yAxis->setLabel(tr("weight"));
  plot_->legend->setVisible(true);
  // Below the plot in two columns: seven entries over it would cover its first steps, and
  // on a projector most of it.
  place_legend_below(plot_, 2);
  // The why beside the plot, the table (a column per format) below both: on a projector's
  // 720 rows the plot keeps its height.
  auto* middle = new QHBoxLayout;
  middle->addWidget(plot_, 3);
  footer_->setObjectName(QStringLiteral("masterWeightsFooter"));
  footer_->setWordWrap(true);
  footer_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  middle->addWidget(footer_, 2);
  layout->addLayout(middle, 1);
  summary_->setTextFormat(Qt::RichText);
  layout->addWidget(summary_);
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
  // The table with a column per format (three rows: it leaves the plot its height).
  QString names, spacings, finals;
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
      final += tr(" \u00b1 %2<br>(std, %1 seeds)").arg(cfg.seeds).arg(t.final_std, 0, 'f', 4);
    }
    // A long name on two lines ("bf16,<br>stochastic rounding"): the columns stay narrow
    // enough for a projector's 1280 px without running into each other.
    QString name = track_label(t).toHtmlEscaped();
    name.replace(QStringLiteral(", "), QStringLiteral(",<br>"));
    name.replace(QStringLiteral(" ("), QStringLiteral("<br>("));
    names += QStringLiteral("<th>%1</th>").arg(name);
    spacings +=
        QStringLiteral("<td align=center>2<sup>%1</sup></td>").arg(std::ilogb(t.spacing_at_start));
    finals += QStringLiteral("<td align=center>%1</td>").arg(final);
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
    high->setName(tr("stochastic: range of %1 seeds").arg(cfg.seeds));
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
  summary_->setText(tr("<style>th, td { padding-left: 6px; padding-right: 6px; }</style>"
                       "<table cellspacing=0><tr><th align=left>format</th>%3</tr>"
                       "<tr><th align=left>spacing at the start</th>%4</tr>"
                       "<tr><th align=left>weight after %1 steps<br>(exact %2)</th>%5</tr>"
                       "</table>")
                        .arg(cfg.steps)
                        .arg(cfg.initial + cfg.steps * cfg.update, 0, 'f', 4)
                        .arg(names, spacings, finals));
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

}  // namespace fp8wb
