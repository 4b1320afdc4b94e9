#include "fp8wb/views/run_tabs.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "fp8wb/core/run_config.h"
#include "fp8wb/views/exportable_plot.h"
#include "fp8wb/views/name_choices.h"
#include "fp8wb/views/run_data.h"

namespace fp8wb {
namespace {

// The heatmap's choices, in the metric box's order.
constexpr const TensorStatFigure* kHeatmapFigures[] = {&kUnderflowPct, &kSaturatedPct, &kSqnrDb};

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

ExportablePlot* make_plot(QWidget* parent, const QString& x, const QString& y) {
  auto* p = new ExportablePlot(parent);
  p->xAxis->setLabel(x);
  p->yAxis->setLabel(y);
  return p;
}

QCPGraph* add_graph(ExportablePlot* p, const QString& name, const QColor& c, bool scatter = false) {
  QCPGraph* g = p->addGraph();
  g->setName(name);
  g->setPen(QPen(c, 1.5));
  if (scatter) {
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, c, 9));
  }
  return g;
}

// Below 0.1 and from 10^5 up, a tick is labelled in scientific form with the fewest digits
// that give it back ("1e-03", "3.5e-02"), which the axis draws as a power of ten; "0.0"
// or "0.000244141" are not read at a glance.
QString readable_tick_label(double tick, const QLocale& locale, const QString& plain) {
  const double a = std::abs(tick);
  if (a == 0 || (a >= 0.1 && a < 1e5)) return plain;
  // With a lowercase 'e' whatever the locale's exponent sign ("2E-02" in en_US): the plot
  // draws only "2e-02" as a power of ten.
  const auto lower_e = [&locale](QString s) {
    return s.replace(locale.exponential(), QStringLiteral("e"));
  };
  for (int digits = 0; digits < 6; ++digits) {
    const QString s = locale.toString(tick, 'e', digits);
    if (std::abs(locale.toDouble(s) - tick) <= 1e-9 * a) return lower_e(s);
  }
  return lower_e(locale.toString(tick, 'e', 6));
}

// Evenly spaced ticks, labelled as above.
class ReadableTicker : public QCPAxisTicker {
 protected:
  QString getTickLabel(double tick, const QLocale& locale, QChar formatChar,
                       int precision) override {
    return readable_tick_label(tick, locale,
                               QCPAxisTicker::getTickLabel(tick, locale, formatChar, precision));
  }
};

// A log axis labelled as above, with evenly spaced ticks where the range spans less than a
// decade (where a log axis would have one labelled tick or none).
class ReadableLogTicker : public QCPAxisTickerLog {
 public:
  void generate(const QCPRange& range, const QLocale& locale, QChar formatChar, int precision,
                QVector<double>& ticks, QVector<double>* subTicks,
                QVector<QString>* tickLabels) override {
    if (range.lower > 0 && range.upper < range.lower * 10) {
      // Few: evenly spaced ticks crowd together at the top of a log axis.
      linear_.setTickCount(3);
      linear_.generate(range, locale, formatChar, precision, ticks, subTicks, tickLabels);
      return;
    }
    QCPAxisTickerLog::generate(range, locale, formatChar, precision, ticks, subTicks, tickLabels);
  }

 protected:
  QString getTickLabel(double tick, const QLocale& locale, QChar formatChar,
                       int precision) override {
    return readable_tick_label(tick, locale,
                               QCPAxisTickerLog::getTickLabel(tick, locale, formatChar, precision));
  }

 private:
  ReadableTicker linear_;
};

void use_log_axis(QCPAxis* a) {
  a->setScaleType(QCPAxis::stLogarithmic);
  a->setTicker(QSharedPointer<ReadableLogTicker>(new ReadableLogTicker));
  a->setNumberFormat(QStringLiteral("gb"));  // "1e-03" drawn as a power of ten
}

// Fits the plot's axes to its data; without `include_step0`, the value axis to the points
// after step 0 (where there are any): a delayed-scaling run starts from a scale of 1, whose
// figures at step 0 would otherwise stretch the axis over values no later step comes near.
void fit_axes(QCustomPlot* p, bool include_step0) {
  p->rescaleAxes();
  if (include_step0) return;
  QCPAxis* y = p->yAxis;
  const QCP::SignDomain sign =
      y->scaleType() == QCPAxis::stLogarithmic ? QCP::sdPositive : QCP::sdBoth;
  const QCPRange after_step0(0.5, std::numeric_limits<double>::max());
  QCPRange r;
  bool any = false;
  for (int i = 0; i < p->graphCount(); ++i) {
    bool found = false;
    const QCPRange g = p->graph(i)->getValueRange(found, sign, after_step0);
    if (!found) continue;
    if (any) {
      r.expand(g);
    } else {
      r = g;
      any = true;
    }
  }
  if (!any) return;
  if (y->scaleType() == QCPAxis::stLogarithmic) {
    r = QCPRange(r.lower / 1.2, r.upper * 1.2);  // a flat line stays inside the frame
  } else {
    const double pad = r.size() > 0 ? r.size() * 0.05 : std::max(std::abs(r.upper) * 0.1, 0.5);
    r = QCPRange(r.lower >= 0 ? 0 : r.lower - pad, r.upper + pad);  // percentages from 0
  }
  y->setRange(r);
}

QCheckBox* make_step0_box(QWidget* parent) {
  auto* box =
      new QCheckBox(QCoreApplication::translate("fp8wb::RunTabBase", "Include step 0"), parent);
  box->setObjectName(QStringLiteral("include-step-0"));
  box->setToolTip(QCoreApplication::translate(
      "fp8wb::RunTabBase",
      "Fit the axes and colours to step 0 too. Step 0 quantizes with the initial scale (1 "
      "for delayed scaling), so its figures are usually far from every later step's."));
  return box;
}

Format role_format(const RunData& d, Role role) {
  return float8_config_of(d.hasConfig() ? d.config() : RunConfig{}).recipe(role).format;
}

QString role_text(Role r) {
  return name_text(role_name(r));
}

QString label_of(const TensorStatFigure& f) {
  return QCoreApplication::translate("fp8wb::TensorStatFigure", f.label);
}

}  // namespace

// Finite points of steps[from..] appended to `g` (from 0: the graph is set anew);
// non-finite values go to `markers`, crosses at the top of the finite values so far.
template <class Get>
void StepCurve::draw(const std::vector<StepMetrics>& steps, size_t from, Get get) {
  if (from == 0) {
    top_ = -INFINITY;
    marker_x_.clear();
  }
  QVector<double> x, y;
  x.reserve(static_cast<int>(steps.size() - from));
  y.reserve(static_cast<int>(steps.size() - from));
  for (size_t i = from; i < steps.size(); ++i) {
    const double v = get(steps[i]);
    if (std::isfinite(v)) {
      x << static_cast<double>(steps[i].step);
      y << v;
      top_ = std::max(top_, v);
    } else if (markers) {
      marker_x_ << static_cast<double>(steps[i].step);
    }
  }
  if (from == 0) {
    graph->setData(x, y, true);
  } else {
    graph->addData(x, y, true);
  }
  if (markers) {
    // NaN and Inf are shown, not dropped: crosses at the top of the visible range (few
    // points: set anew each time, as the top may have moved).
    const QVector<double> my(marker_x_.size(), std::isfinite(top_) ? top_ : 1.0);
    markers->setData(marker_x_, my, true);
  }
}

RunTabBase::RunTabBase(const RunData* run, QWidget* parent) : QWidget(parent), data_(run) {}

void RunTabBase::refresh(bool force) {
  if (!force && (!isVisible() || drawn_revision_ == data_->revision())) return;
  drawn_revision_ = data_->revision();
  rebuild();
  for (ExportablePlot* p : plots()) p->replot(QCustomPlot::rpQueuedReplot);
}

void RunTabBase::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  refresh();
}

// --- Overview -----------------------------------------------------------------------

// Which points a tab has drawn: a run's series only grow between two generations of
// RunData, so a live run's new points are appended; another run, a reload or another
// selection draws everything anew.
bool DrawnPoints::append_from(int64_t generation, const QString& key, size_t size, size_t& from) {
  const bool same = generation == generation_ && key == key_ && size >= count_;
  from = same ? count_ : 0;
  generation_ = generation;
  key_ = key;
  count_ = size;
  return same;
}

OverviewTab::OverviewTab(const RunData* run, QWidget* parent)
    : RunTabBase(run, parent),
      summary_(new QLabel(this)),
      loss_(make_plot(this, tr("step"), tr("loss"))),
      gap_(make_plot(this, tr("step"), tr("FP8 loss -\nreference loss"))),
      speed_(make_plot(this, tr("step"), tr("tokens/s"))),
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
  loss_->legend->setVisible(true);
  place_legend_below(loss_, 3);  // under the plot: the curves stay visible
  add_graph(gap_, tr("loss gap"), QColor(0xd6, 0x27, 0x28));
  add_graph(speed_, tr("tokens/s"), QColor(0x2c, 0xa0, 0x2c));
  loss_curve_ = {loss_->graph(1), loss_->graph(2)};
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
    out.emplace_back(tr("peak RSS of the training process (CPU)"), rss);
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
  QString text = tr("<b>%1</b> (run %2, %3): step %4, loss %5")
                     .arg(qs(data_->name()).toHtmlEscaped())
                     .arg(data_->runId())
                     .arg(QString::fromLatin1(run_status_name(data_->status())))
                     .arg(m.step + 1)
                     .arg(m.loss, 0, 'f', 4);
  if (std::isfinite(m.ref_loss))
    text += tr(", reference %1, gap %2").arg(m.ref_loss, 0, 'f', 4).arg(m.loss_gap, 0, 'g', 3);
  text += tr(", %1 tokens/s").arg(m.tokens_per_s, 0, 'f', 0);
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

// --- Scaling ------------------------------------------------------------------------

ScalingTab::ScalingTab(const RunData* run, QWidget* parent)
    : RunTabBase(run, parent),
      tree_(new QTreeWidget(this)),
      caption_(new QLabel(this)),
      include_step0_(make_step0_box(this)),
      amax_(make_plot(this, tr("step"), tr("amax"))),
      scale_(make_plot(this, tr("step"), tr("scale"))),
      counts_(make_plot(this, tr("step"), tr("% of elements"))),
      rank_amax_(make_plot(this, tr("step"), tr("amax of each rank"))),
      rank_scale_(make_plot(this, tr("step"), tr("scale of each rank"))) {
  auto* split = new QSplitter(this);
  tree_->setHeaderLabels({tr("layer / role")});
  tree_->setMinimumWidth(220);
  split->addWidget(tree_);
  auto* right = new QWidget(split);
  auto* rl = new QVBoxLayout(right);
  caption_->setWordWrap(true);
  auto* top = new QHBoxLayout;
  top->addWidget(caption_, 1);
  top->addWidget(include_step0_, 0, Qt::AlignTop);
  rl->addLayout(top);
  rl->addWidget(amax_, 2);
  rl->addWidget(scale_, 1);
  rl->addWidget(counts_, 1);
  // A data-parallel run: the ranks side by side (each rank's own amax of its shard, and
  // the scale it quantized with).
  auto* ranks = new QHBoxLayout;
  ranks->addWidget(rank_amax_, 1);
  ranks->addWidget(rank_scale_, 1);
  rl->addLayout(ranks, 1);
  for (ExportablePlot* p : {rank_amax_, rank_scale_}) {
    use_log_axis(p->yAxis);
    p->legend->setVisible(true);
    p->setVisible(false);
  }
  split->addWidget(right);
  split->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(split);
  add_graph(amax_, tr("amax"), QColor(0x1f, 0x77, 0xb4));
  add_graph(amax_, tr("amax the scale maps to the format's max"), QColor(0xff, 0x7f, 0x0e));
  amax_->graph(1)->setLineStyle(QCPGraph::lsStepLeft);
  amax_->legend->setVisible(true);
  place_legend_below(amax_, 2);  // under the plot: the curves stay visible
  window_ = new QCPItemRect(amax_);
  window_->setPen(Qt::NoPen);
  window_->setBrush(QColor(0x1f, 0x77, 0xb4, 40));
  window_->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
  window_->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
  window_->setVisible(false);
  use_log_axis(amax_->yAxis);
  add_graph(scale_, tr("scale"), QColor(0x94, 0x67, 0xbd));
  use_log_axis(scale_->yAxis);
  add_graph(counts_, label_of(kUnderflowPct), QColor(0x2c, 0xa0, 0x2c));
  add_graph(counts_, label_of(kSaturatedPct), QColor(0xd6, 0x27, 0x28));
  counts_->legend->setVisible(true);
  place_legend_below(counts_, 2);
  connect(tree_, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* item) {
    if (!item || !item->parent()) return;
    layer_ = item->parent()->text(0);
    role_ = parse_role(item->text(0).toStdString()).value_or(Role::Input);
    drawSelected();
    for (ExportablePlot* p : plots()) p->replot(QCustomPlot::rpQueuedReplot);
  });
  connect(include_step0_, &QCheckBox::toggled, this, [this] {
    fitAxes();
    for (ExportablePlot* p : plots()) p->replot(QCustomPlot::rpQueuedReplot);
  });
}

std::vector<ExportablePlot*> ScalingTab::plots() const {
  std::vector<ExportablePlot*> out{amax_, scale_, counts_};
  if (!rank_amax_->isHidden()) {
    out.push_back(rank_amax_);
    out.push_back(rank_scale_);
  }
  return out;
}

void ScalingTab::drawRanks() {
  std::set<int> ranks;
  for (const RankScale& k : data_->ranks()) ranks.insert(k.rank);
  const bool show = ranks.size() > 1;
  rank_amax_->setVisible(show);
  rank_scale_->setVisible(show);
  if (!show) {
    for (ExportablePlot* p : {rank_amax_, rank_scale_}) {
      for (int g = 0; g < p->graphCount(); ++g) p->graph(g)->data()->clear();
    }
    return;
  }
  // Ten distinguishable colours (matplotlib's tab10), then round again.
  static const QColor kColours[] = {{0x1f, 0x77, 0xb4}, {0xff, 0x7f, 0x0e}, {0x2c, 0xa0, 0x2c},
                                    {0xd6, 0x27, 0x28}, {0x94, 0x67, 0xbd}, {0x8c, 0x56, 0x4b},
                                    {0xe3, 0x77, 0xc2}, {0x7f, 0x7f, 0x7f}, {0xbc, 0xbd, 0x22},
                                    {0x17, 0xbe, 0xcf}};
  std::map<int, int> graph_of;
  for (int r : ranks) {
    const int g = static_cast<int>(graph_of.size());
    graph_of[r] = g;
    for (ExportablePlot* p : {rank_amax_, rank_scale_}) {
      if (p->graphCount() <= g) add_graph(p, QString(), kColours[g % 10]);
      p->graph(g)->setName(tr("rank %1").arg(r));
    }
  }
  for (ExportablePlot* p : {rank_amax_, rank_scale_}) {
    while (p->graphCount() > static_cast<int>(ranks.size())) p->removeGraph(p->graphCount() - 1);
    place_legend_below(p, std::min<int>(static_cast<int>(ranks.size()), 4));
  }
  std::vector<QVector<double>> x(ranks.size()), amax(ranks.size()), scale(ranks.size());
  const std::string layer = layer_.toStdString();
  for (const RankScale& k : data_->ranks()) {
    if (k.role != role_ || k.layer != layer) continue;
    const size_t g = static_cast<size_t>(graph_of[k.rank]);
    x[g] << static_cast<double>(k.step);
    amax[g] << k.amax;
    scale[g] << k.scale;
  }
  for (size_t g = 0; g < ranks.size(); ++g) {
    rank_amax_->graph(static_cast<int>(g))->setData(x[g], amax[g], true);
    rank_scale_->graph(static_cast<int>(g))->setData(x[g], scale[g], true);
  }
  fit_axes(rank_amax_, include_step0_->isChecked());
  fit_axes(rank_scale_, include_step0_->isChecked());
}

QString ScalingTab::selectedTensor() const {
  return data_->tensor(layer_.toStdString(), role_)
             ? layer_ + QStringLiteral(" / ") + role_text(role_)
             : QString();
}

QString ScalingTab::captionText() const {
  return caption_->text();
}

void ScalingTab::fitAxes() {
  for (ExportablePlot* p : plots()) fit_axes(p, include_step0_->isChecked());
}

bool ScalingTab::select(const QString& layer, const QString& role) {
  const std::optional<Role> r = parse_role(role.toStdString());
  if (!r || !data_->tensor(layer.toStdString(), *r)) return false;
  rebuildTree();
  layer_ = layer;
  role_ = *r;
  selectInTree();
  drawSelected();
  for (ExportablePlot* p : plots()) p->replot(QCustomPlot::rpQueuedReplot);
  return true;
}

void ScalingTab::rebuildTree() {
  // Another run (or the same one reloaded): its own tensors, from its first one.
  if (tree_generation_ != data_->generation()) {
    tree_generation_ = data_->generation();
    tree_size_ = std::numeric_limits<size_t>::max();
    layer_.clear();
  }
  if (tree_size_ == data_->tensors().size()) return;
  tree_size_ = data_->tensors().size();
  const QSignalBlocker block(tree_);
  tree_->clear();
  for (const std::string& layer : data_->layers()) {
    auto* l = new QTreeWidgetItem(tree_, {qs(layer)});
    for (const RoleEntry& role : kRoles) {
      if (!data_->tensor(layer, role.value)) continue;
      new QTreeWidgetItem(l, {role_text(role.value)});
    }
    l->setExpanded(true);
  }
  selectInTree();
}

// The tree's current item is the tensor drawn (none where none is).
void ScalingTab::selectInTree() {
  const QSignalBlocker block(tree_);
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    QTreeWidgetItem* l = tree_->topLevelItem(i);
    if (l->text(0) != layer_) continue;
    for (int j = 0; j < l->childCount(); ++j) {
      if (l->child(j)->text(0) == role_text(role_)) {
        tree_->setCurrentItem(l->child(j));
        return;
      }
    }
  }
  tree_->setCurrentItem(nullptr);
}

void ScalingTab::rebuild() {
  rebuildTree();
  if (layer_.isEmpty() && !data_->tensors().empty()) {
    // The tree's first tensor: the first layer's first role.
    const std::string layer = data_->layers().front();
    layer_ = qs(layer);
    for (const RoleEntry& r : kRoles) {
      if (data_->tensor(layer, r.value)) {
        role_ = r.value;
        break;
      }
    }
    selectInTree();
  }
  drawSelected();
}

void ScalingTab::drawSelected() {
  const TensorSeries* t = data_->tensor(layer_.toStdString(), role_);
  if (!t || t->points.empty()) {
    // Nothing of another run or tensor stays under this caption.
    size_t from = 0;
    drawn_.append_from(data_->generation(), QString(), 0, from);
    for (ExportablePlot* p : plots()) {
      for (int g = 0; g < p->graphCount(); ++g) p->graph(g)->data()->clear();
    }
    window_->setVisible(false);
    const int interval = data_->hasConfig() ? data_->config().stats_interval : -1;
    const QString when = interval == 0  ? tr("this run records none")
                         : interval > 0 ? tr("they arrive every %n step(s)", "", interval)
                                        : tr("they arrive every few steps");
    caption_->setText(
        data_->runId() == 0
            ? tr("<i>Start a run from the run panel, or open one in the Runs tab.</i>")
            : tr("<i>%1 (run %2): no tensor statistics yet; %3.</i>")
                  .arg(qs(data_->name()).toHtmlEscaped())
                  .arg(data_->runId())
                  .arg(when));
    drawRanks();
    return;
  }
  drawRanks();
  const Format f = role_format(*data_, t->role);
  const double fmax = format_info(f).max_finite;
  // A live run's new points are appended; another tensor or run is drawn anew.
  size_t from = 0;
  const bool append = drawn_.append_from(
      data_->generation(), layer_ + QChar('/') + role_text(role_), t->points.size(), from);
  QVector<double> x, amax, mapped, scale, under, sat;
  for (size_t i = from; i < t->points.size(); ++i) {
    const TensorMetrics& p = t->points[i];
    x << static_cast<double>(p.step);
    amax << p.amax;
    mapped << (p.scale > 0 ? fmax / p.scale : NAN);
    scale << p.scale;
    under << kUnderflowPct.of(p.raw);
    sat << kSaturatedPct.of(p.raw);
  }
  const std::pair<QCPGraph*, const QVector<double>*> graphs[] = {{amax_->graph(0), &amax},
                                                                 {amax_->graph(1), &mapped},
                                                                 {scale_->graph(0), &scale},
                                                                 {counts_->graph(0), &under},
                                                                 {counts_->graph(1), &sat}};
  for (const auto& [g, y] : graphs) {
    if (append) {
      g->addData(x, *y, true);
    } else {
      g->setData(x, *y, true);
    }
  }
  fitAxes();
  const TensorMetrics& last = t->points.back();
  const bool delayed = data_->hasConfig() && data_->config().scaling == "delayed";
  const int window = data_->hasConfig() ? data_->config().window : 0;
  if (delayed && window > 0) {
    // The steps whose amaxes the next scale comes from.
    window_->topLeft->setCoords(static_cast<double>(last.step - window + 1), 0);
    window_->bottomRight->setCoords(static_cast<double>(last.step) + 0.5, 1);
    window_->setVisible(true);
  } else {
    window_->setVisible(false);
  }
  const int margin = data_->hasConfig() ? data_->config().margin : 0;
  double headroom =
      last.scale > 0 && last.amax > 0 ? std::log2(fmax / (last.amax * last.scale)) : 0.0;
  if (std::abs(headroom) < 0.005) headroom = 0;  // no "2^-0.00"
  const QString how =
      delayed ? tr("The orange steps are the amax each step's scale maps to %1; the shaded "
                   "steps are the delayed-scaling window.")
                    .arg(fmax)
              : tr("Each step's scale comes from that step's own amax (current scaling): the "
                   "orange steps are the amax it maps to %1.")
                    .arg(fmax);
  caption_->setText(
      tr("<b>%1 / %2</b> in %3 (max %4): last sampled step %5, amax %6, scale %7, headroom "
         "2^%8 (margin %9)%10. %11")
          .arg(layer_, role_text(role_), QString::fromLatin1(format_info(f).name.data()))
          .arg(fmax)
          .arg(last.step)
          .arg(last.amax, 0, 'g', 5)
          .arg(last.scale, 0, 'g', 5)
          .arg(headroom, 0, 'f', 2)
          .arg(margin)
          .arg(delayed ? tr(", window %1").arg(window) : QString(), how));
}

// --- Quantization -------------------------------------------------------------------

QuantizationTab::QuantizationTab(const RunData* run, QWidget* parent)
    : RunTabBase(run, parent),
      metric_(new QComboBox(this)),
      role_(new QComboBox(this)),
      tensor_(new QComboBox(this)),
      include_step0_(make_step0_box(this)),
      caption_(new QLabel(this)),
      heat_(make_plot(this, tr("step"), tr("layer"))),
      hist_(make_plot(this, tr("floor(log2 |x * scale|)"), tr("elements"))),
      blocks_(make_plot(this, tr("block column"), tr("block row"))) {
  for (const TensorStatFigure* f : kHeatmapFigures) metric_->addItem(label_of(*f));
  fill_choices(role_, kRoles);
  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Heatmap of"), this));
  controls->addWidget(metric_);
  controls->addWidget(new QLabel(tr("for role"), this));
  controls->addWidget(role_);
  controls->addSpacing(20);
  controls->addWidget(include_step0_);
  controls->addSpacing(20);
  controls->addWidget(new QLabel(tr("Histogram and block errors of"), this));
  controls->addWidget(tensor_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(controls);
  caption_->setWordWrap(true);
  layout->addWidget(caption_);
  layout->addWidget(heat_, 1);
  auto* row = new QHBoxLayout;
  row->addWidget(hist_, 1);
  row->addWidget(blocks_, 1);
  layout->addLayout(row, 1);

  auto colour_map = [](ExportablePlot* p, const QString& name, const QString& label) {
    auto* m = new QCPColorMap(p->xAxis, p->yAxis);
    m->setName(name);
    auto* scale = new QCPColorScale(p);
    p->plotLayout()->addElement(0, 1, scale);
    scale->axis()->setLabel(label);
    m->setColorScale(scale);
    // Thermal without its white top, so that the highest values stay visible on the
    // plot's white; a cell without data is left transparent over a grey hatch.
    QCPColorGradient thermal(QCPColorGradient::gpThermal);  // color() is not const
    QCPColorGradient g;
    g.clearColorStops();
    for (int i = 0; i <= 8; ++i)
      g.setColorStopAt(i / 8.0, thermal.color(0.85 * i / 8.0, QCPRange(0, 1)));
    g.setNanHandling(QCPColorGradient::nhTransparent);
    m->setGradient(g);
    m->setInterpolate(false);
    p->axisRect()->setBackground(QBrush(QColor(0xbd, 0xbd, 0xbd), Qt::BDiagPattern));
    auto* group = new QCPMarginGroup(p);
    p->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, group);
    scale->setMarginGroup(QCP::msBottom | QCP::msTop, group);
    return m;
  };
  heat_map_ = colour_map(heat_, tr("layer x step"), tr("value"));
  // Steps are whole numbers: ticks at whole steps only (1, 2, 5, 10, ... apart as the room
  // allows), also when the axis spans a single step.
  auto whole_steps = QSharedPointer<QCPAxisTickerFixed>::create();
  whole_steps->setTickStep(1.0);
  whole_steps->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  heat_->xAxis->setTicker(whole_steps);
  block_map_ = colour_map(blocks_, tr("block error"), tr("relative RMS error"));
  bars_ = new QCPBars(hist_->xAxis, hist_->yAxis);
  bars_->setName(tr("exponent histogram"));
  bars_->setWidth(0.9);
  bars_->setBrush(QColor(0x1f, 0x77, 0xb4, 160));
  band_ = new QCPItemRect(hist_);
  band_->setPen(Qt::NoPen);
  band_->setBrush(QColor(0x2c, 0xa0, 0x2c, 40));
  band_->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
  band_->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
  auto redraw = [this] { refresh(true); };
  connect(metric_, &QComboBox::currentIndexChanged, this, redraw);
  connect(role_, &QComboBox::currentIndexChanged, this, redraw);
  connect(tensor_, &QComboBox::currentIndexChanged, this, redraw);
  connect(include_step0_, &QCheckBox::toggled, this, redraw);
}

QString QuantizationTab::captionText() const {
  return caption_->text();
}

void QuantizationTab::refillChoices() {
  // Another run: its own tensors, from its first one.
  const bool other_run = choices_generation_ != data_->generation();
  choices_generation_ = data_->generation();
  if (!other_run && tensors_seen_ == data_->tensors().size()) return;
  tensors_seen_ = data_->tensors().size();
  const QString keep = other_run ? QString() : tensor_->currentText();
  const QSignalBlocker block(tensor_);
  tensor_->clear();
  for (const TensorSeries& t : data_->tensors())
    tensor_->addItem(qs(t.layer) + QStringLiteral(" / ") + role_text(t.role));
  const int i = tensor_->findText(keep);
  tensor_->setCurrentIndex(i >= 0 ? i : 0);
}

void QuantizationTab::rebuild() {
  refillChoices();
  // Heatmap: layers (rows) x sampled steps (columns) for the chosen role.
  const Role role = chosen(role_, kRoles);
  std::vector<const TensorSeries*> rows;
  for (const std::string& l : data_->layers()) {
    if (const TensorSeries* t = data_->tensor(l, role)) rows.push_back(t);
  }
  size_t cols = 0;
  for (const TensorSeries* t : rows) cols = std::max(cols, t->points.size());
  heat_map_->data()->clear();
  const TensorStatFigure& figure =
      *kHeatmapFigures[static_cast<size_t>(std::clamp(metric_->currentIndex(), 0, 2))];
  // Column c is centred on its sampled step and row r on r; a cell is as wide as the steps
  // between samples (one step when there is one column) and one row high. The map's range
  // runs from the centre of its first cell to the centre of its last, and it draws half a
  // cell beyond each end, except along a side of one cell, which it draws over exactly its
  // range: there the range is the cell's own span. The axes span the whole cells.
  QCPRange steps_in_view, rows_in_view;
  const bool drawn = !rows.empty() && cols > 0;
  if (drawn) {
    const TensorSeries* longest = *std::max_element(
        rows.begin(), rows.end(), [](const TensorSeries* a, const TensorSeries* b) {
          return a->points.size() < b->points.size();
        });
    const double first = static_cast<double>(longest->points.front().step);
    const double last = static_cast<double>(longest->points.back().step);
    const double n = static_cast<double>(cols), n_rows = static_cast<double>(rows.size());
    const double width = cols > 1 && last > first ? (last - first) / (n - 1) : 1;
    const QCPRange centres(first, first + width * (n - 1));
    steps_in_view = QCPRange(centres.lower - width / 2, centres.upper + width / 2);
    rows_in_view = QCPRange(-0.5, n_rows - 0.5);
    heat_map_->data()->setSize(static_cast<int>(cols), static_cast<int>(rows.size()));
    heat_map_->data()->setRange(cols > 1 ? centres : steps_in_view,
                                rows.size() > 1 ? QCPRange(0, n_rows - 1) : rows_in_view);
    heat_map_->data()->fill(std::numeric_limits<double>::quiet_NaN());  // no data: hatched
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t c = 0; c < rows[r]->points.size(); ++c) {
        double v = figure.of(rows[r]->points[c].raw);
        if (!std::isfinite(v)) v = 200;  // exact (no error): off the top
        heat_map_->data()->setCell(static_cast<int>(c), static_cast<int>(r), v);
      }
    }
    // The colours span the steps after step 0 (unless asked otherwise): step 0 quantizes
    // with the initial scale, and its underflow would leave every later step one colour.
    const bool skip0 = !include_step0_->isChecked() && cols > 1;
    QCPRange span;
    bool any = false;
    for (const TensorSeries* t : rows) {
      for (const TensorMetrics& p : t->points) {
        if (skip0 && p.step == 0) continue;
        double v = figure.of(p.raw);
        if (!std::isfinite(v)) v = 200;
        if (any) {
          span.expand(v);
        } else {
          span = QCPRange(v, v);
          any = true;
        }
      }
    }
    if (any && span.size() == 0) span = QCPRange(span.lower - 0.5, span.upper + 0.5);
    if (any) {
      heat_map_->setDataRange(span);
    } else {
      heat_map_->rescaleDataRange(true);
    }
    // Layer names on the row axis.
    QSharedPointer<QCPAxisTickerText> ticks(new QCPAxisTickerText);
    for (size_t r = 0; r < rows.size(); ++r)
      ticks->addTick(static_cast<double>(r), qs(rows[r]->layer));
    heat_->yAxis->setTicker(ticks);
    heat_map_->colorScale()->axis()->setLabel(metric_->currentText());
  }
  heat_->rescaleAxes();
  if (drawn) {
    heat_->xAxis->setRange(steps_in_view);
    heat_->yAxis->setRange(rows_in_view);
  }

  // The chosen tensor's last sampled step: exponent histogram and block errors.
  const int ti = tensor_->currentIndex();
  if (ti < 0 || ti >= static_cast<int>(data_->tensors().size()) ||
      data_->tensors()[static_cast<size_t>(ti)].points.empty()) {
    // Nothing of another run stays under this caption.
    bars_->data()->clear();
    block_map_->data()->clear();
    caption_->setText(
        data_->runId() == 0
            ? tr("<i>Start a run from the run panel, or open one in the Runs tab.</i>")
            : tr("<i>%1 (run %2): no tensor statistics yet.</i>")
                  .arg(qs(data_->name()).toHtmlEscaped())
                  .arg(data_->runId()));
    return;
  }
  const TensorSeries& t = data_->tensors()[static_cast<size_t>(ti)];
  const TensorMetrics& p = t.points.back();
  QVector<double> keys, counts;
  for (int b = 0; b < kHistExpBins; ++b) {
    if (p.raw.hist[b] == 0) continue;
    keys << static_cast<double>(b + kHistMinExp);
    counts << static_cast<double>(p.raw.hist[b]);
  }
  bars_->setData(keys, counts);
  const Format f = role_format(*data_, t.role);
  const FormatInfo& fi = format_info(f);
  const double lo = std::floor(std::log2(fi.min_subnormal > 0 ? fi.min_subnormal : fi.min_normal));
  const double hi = std::floor(std::log2(fi.max_finite));
  band_->topLeft->setCoords(lo - 0.5, 0);
  band_->bottomRight->setCoords(hi + 0.5, 1);
  hist_->rescaleAxes();
  hist_->xAxis->setRange(std::min(lo - 2, hist_->xAxis->range().lower),
                         std::max(hi + 2, hist_->xAxis->range().upper));
  fill_block_map(block_map_, p.map_grid.rows, p.map_grid.cols, p.map_rel_error);
  caption_->setText(
      tr("<b>%1 / %2</b>, step %3, %4: SQNR %5 dB, underflow %6 %, saturated %7 %, zeros %8 %. "
         "Green: the exponents %4 represents (%9 to %10).")
          .arg(qs(t.layer), role_text(t.role))
          .arg(p.step)
          .arg(QString::fromLatin1(fi.name.data()))
          .arg(kSqnrDb.of(p.raw), 0, 'f', 1)
          .arg(kUnderflowPct.of(p.raw), 0, 'g', 3)
          .arg(kSaturatedPct.of(p.raw), 0, 'g', 3)
          .arg(kZerosPct.of(p.raw), 0, 'g', 3)
          .arg(lo)
          .arg(hi));
}

}  // namespace fp8wb
