// defines: OverviewTab: the run's summary line, a plot for each kStepSeries row marked for
// the Overview (the loss beside the reference's, the loss gap, tokens/s) with the rows that
// share it, and the peak-memory bars; a live run's new points appended.
#include "fp8wb/views/run_tabs/run_tabs.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "fp8wb/core/sweep/final_loss.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/name_choices.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "run_tabs/run_tab_helpers.h"

namespace fp8wb {

using namespace detail;  // the helpers the run tabs share (run_tab_helpers.h)

namespace {

// How the Overview draws the series it knows. A kStepSeries row not named here is drawn
// plainly: a line in a colour of kPalette, its plot's axis its label (and unit).
struct SeriesLook {
  std::string_view series;
  QRgb colour;
  const char* axis;     // a plot of its own: its value axis (nullptr: label and unit)
  bool underneath;      // drawn first on its plot, under the others, dashed
  const char* markers;  // its non-finite values as red crosses, named so (nullptr: none)
  bool points;          // points joined by lines, in the legend once it has any
};
const SeriesLook kLooks[] = {
    {"loss", 0x1f77b4, "loss", false, "non-finite loss", false},
    // The reference underneath, dashed: the FP8 curve usually lies on top of it.
    {"ref_loss", 0x7f7f7f, nullptr, true, nullptr, false},
    {"loss_gap", 0xd62728, "FP8 loss -\nreference loss", false, nullptr, false},
    {"tokens_per_s", 0x2ca02c, "tokens/s (one model's step)", false, nullptr, false},
    // Runs on a token file: the held-out losses (eval_interval), points joined by lines.
    {"eval_loss", 0xff7f0e, nullptr, false, nullptr, true},
    {"ref_eval_loss", 0x8c564b, nullptr, false, nullptr, true},
};
const QRgb kPalette[] = {0xe377c2, 0x17becf, 0xbcbd22, 0x393b79};

const SeriesLook* look_of(const StepSeries& k) {
  for (const SeriesLook& l : kLooks) {
    if (l.series == k.name) return &l;
  }
  return nullptr;
}

QString axis_of(const StepSeries& k) {
  const SeriesLook* l = look_of(k);
  if (l != nullptr && l->axis != nullptr) return OverviewTab::tr(l->axis);
  const QString label = QString::fromUtf8(k.label);
  return *k.unit != '\0'
             ? label + QStringLiteral(" (") + QString::fromUtf8(k.unit) + QLatin1Char(')')
             : label;
}

}  // namespace

OverviewTab::OverviewTab(const RunData* run, QWidget* parent, std::vector<StepSeries> series)
    : RunTabBase(run, parent), series_(std::move(series)), summary_(new QLabel(this)) {
  // A plot for each row drawn here with a plot of its own, in the table's order.
  for (const StepSeries& k : series_) {
    if (k.tab == StepTab::Overview && k.plot == nullptr)
      step_plots_.push_back(make_plot(this, tr("step"), axis_of(k)));
  }
  memory_ = make_plot(this, QString(), tr("peak memory (GB)"));
  memory_bars_ = new QCPBars(memory_->xAxis, memory_->yAxis);
  // Each row's plot: its own, or that of the row it names.
  std::vector<std::pair<const StepSeries*, ExportablePlot*>> placed;
  size_t own = 0;  // the next plot of its own
  for (const StepSeries& k : series_) {
    if (k.tab != StepTab::Overview) continue;
    ExportablePlot* plot = nullptr;
    if (k.plot == nullptr) {
      plot = step_plots_[own++];
    } else {
      for (const auto& [o, o_plot] : placed) {
        if (std::string_view(o->name) == k.plot) plot = o_plot;
      }
    }
    if (plot == nullptr) {  // kStepSeries: step_plots_resolve() in metrics.h
      throw std::logic_error(std::string("step series '") + k.name + "' shares the plot of '" +
                             k.plot + "', which is no earlier row with a plot of its own");
    }
    placed.emplace_back(&k, plot);
  }
  // Each row's curve on its plot: those drawn underneath first, then the others in the
  // table's order (the graphs' order is their stacking and the legend's order).
  size_t plain = 0;  // rows drawn plainly so far: each takes the palette's next colour
  for (const bool under : {true, false}) {
    for (const auto& [k, plot] : placed) {
      const SeriesLook* look = look_of(*k);
      if ((look != nullptr && look->underneath) != under) continue;
      const QColor colour(look != nullptr ? look->colour : kPalette[plain++ % std::size(kPalette)]);
      QCPGraph* g = add_graph(plot, QString::fromUtf8(k->label), colour);
      QCPGraph* markers = nullptr;
      if (look != nullptr && look->underneath) g->setPen(QPen(colour, 2.0, Qt::DashLine));
      if (look != nullptr && look->markers != nullptr)
        markers = add_graph(plot, tr(look->markers), Qt::red, true);
      if (look != nullptr && look->points) {
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
        g->removeFromLegend();  // in the legend once the run has any
      }
      curves_.push_back({k, plot, StepCurve(g, markers)});
    }
  }
  // The curves in the table's order, whatever order they were made in.
  std::sort(curves_.begin(), curves_.end(),
            [](const SeriesCurve& a, const SeriesCurve& b) { return a.series < b.series; });
  loss_ = plotOf("loss");
  gap_ = plotOf("loss_gap");
  speed_ = plotOf("tokens_per_s");
  auto* layout = new QVBoxLayout(this);
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);  // a long message (why a run ended) must not widen the window
  layout->addWidget(summary_);
  // The first plot (the loss) across the tab, the others and the memory bars in a row under it.
  layout->addWidget(step_plots_.front(), 3);
  auto* row = new QHBoxLayout;
  for (size_t i = 1; i < step_plots_.size(); ++i) row->addWidget(step_plots_[i]);
  row->addWidget(memory_);
  layout->addLayout(row, 2);
  // A legend where curves share a plot, under it: the curves stay visible.
  for (ExportablePlot* p : step_plots_) {
    if (std::count_if(curves_.begin(), curves_.end(),
                      [p](const SeriesCurve& c) { return c.plot == p; }) > 1) {
      p->legend->setVisible(true);
      place_legend_below(p, 3);
    }
  }
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
  summary_->setText(tr("<i>Start a run from the run panel, or open one in the Runs tab.</i>"));
}

std::vector<ExportablePlot*> OverviewTab::plots() const {
  std::vector<ExportablePlot*> out = step_plots_;
  out.push_back(memory_);
  return out;
}

const OverviewTab::SeriesCurve* OverviewTab::curveOf(const char* series) const {
  for (const SeriesCurve& c : curves_) {
    if (std::string_view(c.series->name) == series) return &c;
  }
  return nullptr;
}

ExportablePlot* OverviewTab::plotOf(const char* series) const {
  const SeriesCurve* c = curveOf(series);
  return c != nullptr ? c->plot : nullptr;
}

QCPGraph* OverviewTab::seriesGraph(const char* series) const {
  const SeriesCurve* c = curveOf(series);
  return c != nullptr ? c->curve.graph : nullptr;
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
  // Each curve's new points, and which are in the legend: a series drawn as points (the
  // held-out losses) once the run has any, the reference only for a run that trains one
  // (or has its losses).
  for (SeriesCurve& c : curves_) {
    c.curve.draw(s, from, [field = c.series->field](const StepMetrics& m) { return m.*field; });
    const SeriesLook* look = look_of(*c.series);
    bool listed = false;
    if (std::string_view(c.series->name) == "ref_loss") {
      listed = !c.curve.graph->data()->isEmpty() ||
               (data_->hasConfig() && data_->config().reference && data_->config().fp8);
    } else if (look != nullptr && look->points) {
      listed = !c.curve.graph->data()->isEmpty();
    } else {
      continue;
    }
    if (listed != c.plot->legend->hasItemWithPlottable(c.curve.graph)) {
      if (listed) {
        c.curve.graph->addToLegend();
      } else {
        c.curve.graph->removeFromLegend();
      }
    }
  }
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
  for (ExportablePlot* p : step_plots_) {
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
