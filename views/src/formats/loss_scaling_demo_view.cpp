// LossScalingDemoView (demo_views.h): a tiny model's gradients cast to fp16 or E5M2 with
// and without dynamic loss scaling, sliders for the initial scale and the growth
// interval: the loss scale with its skipped steps, and the gradients flushed to zero.
#include "fp8wb/views/formats/demo_views.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "formats/demo_views_internal.h"
#include "fp8wb/views/common/exportable_plot.h"

namespace fp8wb {

using namespace demo_detail;  // qs(), storage_color(), demo_slider() (demo_views_internal.h)

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
  set_whole_number_ticks(scale_plot_->xAxis);
  scale_plot_->yAxis->setLabel(tr("loss scale"));
  scale_plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  scale_plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  underflow_plot_->xAxis->setLabel(tr("step"));
  set_whole_number_ticks(underflow_plot_->xAxis);
  // Short, in two lines: the gradients' share flushed to 0, beside a plot that may be
  // only 170 px tall on a projector's 720 rows.
  underflow_plot_->yAxis->setLabel(tr("flushed\nto 0 (%)"));
  // The legends below the plots: over them they would hide the curves' first steps.
  for (ExportablePlot* p : {scale_plot_, underflow_plot_}) {
    p->legend->setVisible(true);
    place_legend_below(p, 2);
  }
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(scale_plot_);
  split->addWidget(underflow_plot_);
  split->setChildrenCollapsible(false);  // neither plot dragged or squeezed to nothing
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
      // Headers on two lines, cells 6 px padded left and right (not above and below,
      // which would take the plot's height): no header runs into the next.
      tr("<style>th, td { padding-left: 6px; padding-right: 6px; }</style>"
         "<table cellspacing=0><tr><th align=left>gradients in</th><th align=left>loss<br>"
         "scaling</th><th>flushed to zero<br>(mean over steps)</th><th>skipped<br>steps</th>"
         "<th>final<br>scale</th><th>final<br>loss</th></tr>%1</table>")
          .arg(rows.join(QString())));
}

QString LossScalingDemoView::summaryText() const {
  return summary_->text();
}

}  // namespace fp8wb
