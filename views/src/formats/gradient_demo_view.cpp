// GradientDemoView (demo_views.h): gradient-like values cast to E4M3 and E5M2, a slider
// for the gradient scale and a checkbox for per-tensor scaling; their log2 histograms
// over each format's representable band, underflow, saturation and SQNR in a table, and a
// note where values are clamped.
#include "fp8wb/views/formats/demo_views.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "formats/demo_views_internal.h"
#include "fp8wb/views/common/exportable_plot.h"

namespace fp8wb {

using namespace demo_detail;  // qs() (demo_views_internal.h)

namespace {

// The representable band of a format on a log2 axis: subnormals light, normals darker.
// The bands' rows hang from `top` (the axis rect's top left) in pixels, each as high as a
// label's line, whatever the plot's height: rows in plot coordinates crowded together in a
// short plot, where a label overlapped the next row's band. Each label ends at `label_x`,
// left of every band (left of its own band alone, the E4M3FN label lay over the E5M2
// band, which reaches further left).
void add_band(QCustomPlot* plot, QCPItemAnchor* top, Format f, int row, double label_x) {
  const auto& info = format_info(f);
  const double lo = std::log2(info.min_subnormal), mid = std::log2(info.min_normal);
  const double hi = std::log2(info.max_finite);
  auto* label = new QCPItemText(plot);
  const int line = QFontMetrics(label->font()).height();
  const double y0 = 4 + row * (line + 4);  // the row's top, pixels below the axis rect's
  const double y1 = y0 + line - 4;         // its bottom
  QColor c = format_color(f);
  for (const auto& [a, b, alpha] : {std::tuple{lo, mid, 70}, std::tuple{mid, hi, 170}}) {
    auto* rect = new QCPItemRect(plot);
    rect->setObjectName(QStringLiteral("formatBand"));
    for (QCPItemPosition* corner : {rect->topLeft, rect->bottomRight}) {
      corner->setTypeY(QCPItemPosition::ptAbsolute);
      corner->setParentAnchorY(top);
    }
    rect->topLeft->setCoords(a, y0);
    rect->bottomRight->setCoords(b, y1);
    c.setAlpha(alpha);
    rect->setBrush(c);
    rect->setPen(Qt::NoPen);
  }
  // Left of the bands: the axis ends soon after the widest format's largest value, and a
  // label to its right would be cut at presentation size.
  label->setObjectName(QStringLiteral("formatBandLabel"));
  label->position->setTypeY(QCPItemPosition::ptAbsolute);
  label->position->setParentAnchorY(top);
  label->position->setCoords(label_x, (y0 + y1) / 2);
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
  // Below the plot: inside it, it covered the bars (at any slider value some lie under
  // whichever corner it takes) or the ranges' rows at the top.
  place_legend_below(hist_, 2);
  layout->addWidget(hist_, 1);
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);  // the notes on clamped values
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
  // The axis takes in every nonempty bin drawn (each a step of width 1 about its
  // exponent), and at least -32..20: the bands and their labels to their left.
  double x_lo = -32, x_hi = 20;
  QStringList rows, notes;
  for (const GradientDemoCase& c : result_.cases) {
    const QString scaling =
        c.scaled ? tr("per-tensor, scale %1").arg(c.scale, 0, 'g', 4) : tr("none (plain cast)");
    rows << tr("<tr><td><b>%1</b></td><td>%2</td><td align=right>%3%</td><td "
               "align=right>%4% (%5)</td><td align=right>%6</td></tr>")
                .arg(qs(format_info(c.format).name), scaling)
                .arg(c.stats.underflow_pct(), 0, 'f', 1)
                .arg(c.stats.saturated_pct(), 0, 'f', 1)
                .arg(c.stats.raw.saturated)
                .arg(c.stats.sqnr_db(), 0, 'f', 1);
    const std::string note = gradient_clamp_note(c);
    if (!note.empty()) {
      notes << tr("%1, %2: %3.")
                   .arg(qs(format_info(c.format).name), scaling,
                        QString::fromStdString(note).toHtmlEscaped());
    }
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
      if (count > 0) {
        x_lo = std::min(x_lo, kHistMinExp + b - 1.0);
        x_hi = std::max(x_hi, kHistMinExp + b + 1.0);
      }
    }
  }
  double lowest = 0;  // the leftmost band's start
  for (Format f : result_.config.formats)
    lowest = std::min(lowest, std::log2(format_info(f).min_subnormal));
  // The rows' anchor: the axis rect's top left corner.
  auto* top = new QCPItemTracer(hist_);
  top->setStyle(QCPItemTracer::tsNone);
  top->position->setType(QCPItemPosition::ptAxisRectRatio);
  top->position->setCoords(0, 0);
  int row = 0;
  for (Format f : result_.config.formats) add_band(hist_, top->position, f, row++, lowest - 0.5);
  hist_->xAxis->setRange(x_lo, x_hi);
  // The top fifth of the plot for the bands' rows, over the highest bin.
  hist_->yAxis->setRange(0, peak * 1.25);
  hist_->replot(QCustomPlot::rpQueuedReplot);
  // Saturated: values beyond the format's largest value, clamped to it.
  QString text = tr("<table cellspacing=8><tr><th>format</th><th>scaling</th><th>underflow</th>"
                    "<th>saturated (clamped)</th><th>SQNR dB</th></tr>%1</table>")
                     .arg(rows.join(QString()));
  if (!notes.isEmpty())
    text += QStringLiteral("<p>") + notes.join(QStringLiteral("<br>")) + QStringLiteral("</p>");
  summary_->setText(text);
}

QString GradientDemoView::summaryText() const {
  return summary_->text();
}

}  // namespace fp8wb
