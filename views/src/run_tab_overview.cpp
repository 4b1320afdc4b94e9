// defines: OverviewTab: the run's summary line, its loss beside the reference's, the loss
// gap, tokens/s and peak memory; a live run's new points appended.
#include "fp8wb/views/run_tabs.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "fp8wb/core/final_loss.h"
#include "fp8wb/views/exportable_plot.h"
#include "fp8wb/views/name_choices.h"
#include "fp8wb/views/run_data.h"
#include "run_tab_helpers.h"

namespace fp8wb {

using namespace detail;  // the helpers the run tabs share (run_tab_helpers.h)

OverviewTab::OverviewTab(const RunData* run, QWidget* parent)
    : RunTabBase(run, parent),
      summary_(new QLabel(this)),
      loss_(make_plot(this, tr("step"), tr("loss"))),
      gap_(make_plot(this, tr("step"), tr("FP8 loss -\nreference loss"))),
      speed_(make_plot(this, tr("step"), tr("tokens/s (one model's step)"))),
      memory_(make_plot(this, QString(), tr("peak memory (GB)"))),
      memory_bars_(new QCPBars(memory_->xAxis, memory_->yAxis)) {
  auto* layout = new QVBoxLayout(this);
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);  // a long message (why a run ended) must not widen the window
  layout->addWidget(summary_);
  layout->addWidget(loss_, 3);
  auto* row = new QHBoxLayout;
  row->addWidget(gap_);
  row->addWidget(speed_);
  row->addWidget(memory_);
  layout->addLayout(row, 2);
  memory_bars_->setName(tr("peak memory"));
  memory_bars_->setBrush(QColor(0x94, 0x67, 0xbd));
  memory_bars_->setPen(Qt::NoPen);
  memory_bars_->setWidth(0.6);
  memory_->setToolTip(
      tr("On a GPU: the caching allocator's peak of allocated bytes while each model "
         "stepped, with its own parameters and optimizer state. FP8 layers keep FP8 codes, "
         "not high-precision copies, for the backward. On the CPU: the peak resident set "
         "of the whole process that trained (every model, the data and the program; for "
         "a run the GUI trained, the GUI and its earlier runs too)."));
  // The reference underneath, dashed: the FP8 curve usually lies on top of it.
  add_graph(loss_, tr("reference loss"), QColor(0x7f, 0x7f, 0x7f));
  loss_->graph(0)->setPen(QPen(QColor(0x7f, 0x7f, 0x7f), 2.0, Qt::DashLine));
  add_graph(loss_, tr("FP8 loss"), QColor(0x1f, 0x77, 0xb4));
  add_graph(loss_, tr("non-finite loss"), Qt::red, true);
  // Runs on a token file: the held-out losses (eval_interval), points joined by lines.
  add_graph(loss_, tr("held-out loss (FP8)"), QColor(0xff, 0x7f, 0x0e));
  add_graph(loss_, tr("held-out loss (reference)"), QColor(0x8c, 0x56, 0x4b));
  for (int g : {3, 4}) {
    loss_->graph(g)->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
    loss_->graph(g)->removeFromLegend();  // in the legend once the run has any
  }
  loss_->legend->setVisible(true);
  place_legend_below(loss_, 3);  // under the plot: the curves stay visible
  add_graph(gap_, tr("loss gap"), QColor(0xd6, 0x27, 0x28));
  add_graph(speed_, tr("tokens/s"), QColor(0x2c, 0xa0, 0x2c));
  loss_curve_ = {loss_->graph(1), loss_->graph(2)};
  eval_curve_ = {loss_->graph(3), nullptr};
  ref_eval_curve_ = {loss_->graph(4), nullptr};
  ref_curve_ = {loss_->graph(0), nullptr};
  gap_curve_ = {gap_->graph(0), nullptr};
  speed_curve_ = {speed_->graph(0), nullptr};
  summary_->setText(tr("<i>Start a run from the run panel, or open one in the Runs tab.</i>"));
}

std::vector<std::pair<QString, double>> OverviewTab::memoryBars() const {
  double fp8 = NAN, ref = NAN, rss = NAN;
  for (const StepMetrics& m : data_->steps()) {
    if (std::isfinite(m.mem_fp8)) fp8 = m.mem_fp8;
    if (std::isfinite(m.mem_ref)) ref = m.mem_ref;
    if (std::isfinite(m.peak_rss)) rss = m.peak_rss;
  }
  std::vector<std::pair<QString, double>> out;
  if (std::isfinite(fp8)) out.emplace_back(tr("FP8 model (GPU)"), fp8);
  if (std::isfinite(ref)) out.emplace_back(tr("reference (GPU)"), ref);
  if (out.empty() && std::isfinite(rss))
    out.emplace_back(tr("resident memory the run added (CPU)"), rss);
  return out;
}

QString OverviewTab::summaryText() const {
  return summary_->text();
}

void OverviewTab::rebuild() {
  const auto& s = data_->steps();
  size_t from = 0;
  drawn_.append_from(data_->generation(), QString(), s.size(), from);
  loss_curve_.draw(s, from, [](const StepMetrics& m) { return m.loss; });
  ref_curve_.draw(s, from, [](const StepMetrics& m) { return m.ref_loss; });
  // The reference's legend entry only for a run that trains one (or has its losses).
  const bool has_ref = !ref_curve_.graph->data()->isEmpty() ||
                       (data_->hasConfig() && data_->config().reference && data_->config().fp8);
  if (has_ref != loss_->legend->hasItemWithPlottable(ref_curve_.graph)) {
    if (has_ref) {
      ref_curve_.graph->addToLegend();
    } else {
      ref_curve_.graph->removeFromLegend();
    }
  }
  eval_curve_.draw(s, from, [](const StepMetrics& m) { return m.eval_loss; });
  ref_eval_curve_.draw(s, from, [](const StepMetrics& m) { return m.ref_eval_loss; });
  for (const StepCurve* c : {&eval_curve_, &ref_eval_curve_}) {
    const bool has = !c->graph->data()->isEmpty();
    if (has != loss_->legend->hasItemWithPlottable(c->graph)) {
      if (has) {
        c->graph->addToLegend();
      } else {
        c->graph->removeFromLegend();
      }
    }
  }
  gap_curve_.draw(s, from, [](const StepMetrics& m) { return m.loss_gap; });
  speed_curve_.draw(s, from, [](const StepMetrics& m) { return m.tokens_per_s; });
  // Peak memory: the latest figure of each (they are running maxima).
  const auto bars = memoryBars();
  QVector<double> keys, values;
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (size_t i = 0; i < bars.size(); ++i) {
    keys << static_cast<double>(i + 1);
    values << bars[i].second / 1e9;
    ticker->addTick(static_cast<double>(i + 1), bars[i].first);
  }
  memory_bars_->setData(keys, values, true);
  memory_->xAxis->setTicker(ticker);
  for (ExportablePlot* p : plots()) p->rescaleAxes();
  // The curves' highest and lowest points inside the frame, not on it (a line there is cut
  // in half by the axis rect and reads as running off it).
  for (ExportablePlot* p : {loss_, gap_, speed_}) {
    const QCPRange r = p->yAxis->range();
    const double pad = r.size() > 0 ? r.size() * 0.05 : std::max(std::abs(r.upper) * 0.1, 0.5);
    p->yAxis->setRange(r.lower - pad, r.upper + pad);
  }
  memory_->xAxis->setRange(0.4, std::max<double>(2, static_cast<double>(bars.size())) + 0.6);
  memory_->yAxis->setRangeLower(0);
  if (data_->runId() == 0) {
    summary_->setText(tr("<i>Start a run from the run panel, or open one in the Runs tab.</i>"));
    return;
  }
  if (s.empty()) {
    // The run is named at once, before its first step arrives.
    const bool going =
        data_->status() == RunStatus::Running || data_->status() == RunStatus::Paused;
    QString text = (going ? tr("<b>%1</b> (run %2, %3): waiting for the first step")
                          : tr("<b>%1</b> (run %2, %3): no steps recorded"))
                       .arg(qs(data_->name()).toHtmlEscaped())
                       .arg(data_->runId())
                       .arg(QString::fromLatin1(run_status_name(data_->status())));
    if (!data_->message().empty())
      text += QStringLiteral(" - ") + qs(data_->message()).toHtmlEscaped();
    summary_->setText(text);
    return;
  }
  const StepMetrics& m = s.back();
  // An ended run: its final loss and gap, and its tokens/s, as the Sweeps and Runs tabs and
  // the CLI give them (final_loss.h), which the last step's figures are not. A live one:
  // the latest step's loss, said to be the latest (no loss of a run still training is final).
  const bool ended = data_->status() != RunStatus::Running && data_->status() != RunStatus::Paused;
  QString text = (ended ? tr("<b>%1</b> (run %2, %3): step %4, loss %5")
                        : tr("<b>%1</b> (run %2, %3): latest loss %5 (step %4)"))
                     .arg(qs(data_->name()).toHtmlEscaped())
                     .arg(data_->runId())
                     .arg(QString::fromLatin1(run_status_name(data_->status())))
                     .arg(m.step)  // as the plots number it (0 the first)
                     .arg(m.loss, 0, 'f', 4);
  if (std::isfinite(m.ref_loss))
    text += tr(", reference %1, gap %2").arg(m.ref_loss, 0, 'f', 4).arg(m.loss_gap, 0, 'g', 3);
  // None where the run does not count tokens (a watched script given no tokens=).
  if (!ended && std::isfinite(m.tokens_per_s))
    text += tr(", %1 tokens/s per model step").arg(m.tokens_per_s, 0, 'f', 0);
  if (data_->status() == RunStatus::Diverged) {
    // As the stored run's final loss (final_loss.h), `fp8wb runs show` and the Runs tab:
    // none, since the loss of a diverged run's last steps is no result.
    text += tr("; final loss none (the run diverged)");
  } else if (ended) {
    std::vector<SeriesPoint> loss, ref;
    loss.reserve(s.size());
    for (const StepMetrics& p : s) {
      loss.push_back({p.step, p.loss});
      if (std::isfinite(p.ref_loss)) ref.push_back({p.step, p.ref_loss});
    }
    const FinalLoss f = final_loss(loss, ref);
    if (std::isfinite(f.loss)) {
      text += tr("; final loss %1").arg(f.loss, 0, 'f', 4);
      if (std::isfinite(f.gap)) text += tr(", gap %1").arg(f.gap, 0, 'g', 3);
      // A run so short that its last 10% is one step: that step, not "steps 11-11".
      text += f.from_step == f.to_step
                  ? tr(" (of step %1 alone)").arg(f.to_step)
                  : tr(" (mean over steps %1-%2)").arg(f.from_step).arg(f.to_step);
    }
  }
  if (ended) {
    std::vector<double> tps, wall;
    tps.reserve(s.size());
    for (const StepMetrics& p : s) {
      tps.push_back(p.tokens_per_s);
      wall.push_back(p.wall_tokens_per_s);
    }
    // One model's step (the FP8 model's alone), and the whole run's per wall-clock step.
    if (const RunSpeed sp = run_speed(tps); sp.steps > 0)
      text += tr("; %1 tokens/s per model step (median over %2 steps)")
                  .arg(sp.median, 0, 'f', 0)
                  .arg(sp.steps);
    if (const RunSpeed w = run_speed(wall); w.steps > 0)
      text += tr(", %1 per wall-clock step of the whole run").arg(w.median, 0, 'f', 0);
  }
  if (!bars.empty()) {
    QStringList parts;
    for (const auto& [label, bytes] : bars)
      parts << tr("%1 %2 GB").arg(label).arg(bytes / 1e9, 0, 'f', 3);
    text += tr("; peak memory: %1").arg(parts.join(QStringLiteral(", ")));
  }
  if (!data_->message().empty())
    text += QStringLiteral(" - ") + qs(data_->message()).toHtmlEscaped();
  summary_->setText(text);
}

QString OverviewTab::contentOf(const ExportablePlot* plot) const {
  if (plot == memory_) return tr("peak memory figures");
  // A run with steps but none of this plot's figures (a watched script that gives no
  // tokens=, a run without a reference) stored no figures of this plot, not no steps.
  if (!data_->steps().empty()) {
    if (plot == speed_) return tr("tokens/s (a watched script gives them with w.step(tokens=N))");
    if (plot == gap_) return tr("loss gap");
    return tr("figures of this plot");
  }
  return RunTabBase::contentOf(plot);
}

QString OverviewTab::emptyHintFor(const ExportablePlot* plot) const {
  // A loss gap needs an FP8 model and its high-precision reference in the same run.
  if (plot == gap_ && data_->runId() != 0 && data_->hasConfig() &&
      !(data_->config().fp8 && data_->config().reference))
    return tr("No loss gap: this run trains no FP8 model\nbeside a high-precision reference");
  return RunTabBase::emptyHintFor(plot);
}

}  // namespace fp8wb
