// defines: ScalingTab: a tensor chosen in a layer / role tree, its amax, scale, underflow
// and saturation over the steps (the delayed-scaling window shaded), and for a run of two
// ranks or more every rank's amax and scale side by side.
#include "fp8wb/views/run_tabs/run_tabs.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QSplitter>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "fp8wb/core/config/run_config_fields.h"
#include "fp8wb/core/replay/replay.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/name_choices.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "run_tabs/run_tab_helpers.h"

namespace fp8wb {

using namespace detail;  // the helpers the run tabs share (run_tab_helpers.h)

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
  // What if: another delayed-scaling setting replayed from the run's every step's amax.
  what_if_ = new QCheckBox(tr("What if: margin"), this);
  what_if_->setObjectName(QStringLiteral("whatIf"));
  what_if_margin_ = new QSpinBox(this);
  const RunConfigField& margin = *find_run_config_field("margin");  // a run's bounds
  what_if_margin_->setRange(static_cast<int>(margin.min), static_cast<int>(margin.max));
  what_if_window_ = new QSpinBox(this);
  what_if_window_->setRange(1, 1 << 24);
  what_if_algo_ = new QComboBox(this);
  for (std::string_view n : find_run_config_field("amax_algo")->names)
    what_if_algo_->addItem(QString::fromLatin1(n.data(), static_cast<int>(n.size())));
  what_if_text_ = new QLabel(this);
  what_if_text_->setWordWrap(true);
  auto* what_if = new QHBoxLayout;
  what_if->addWidget(what_if_);
  what_if->addWidget(what_if_margin_);
  what_if->addWidget(new QLabel(tr("window"), this));
  what_if->addWidget(what_if_window_);
  what_if->addWidget(new QLabel(tr("algorithm"), this));
  what_if->addWidget(what_if_algo_);
  what_if->addWidget(what_if_text_, 1);
  rl->addLayout(what_if);
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
  // Neither pane is ever dragged or squeezed (a smaller window, presentation mode's fonts)
  // to nothing: each keeps its minimum width, the plots their axes.
  split->setChildrenCollapsible(false);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(split);
  add_graph(amax_, tr("amax"), QColor(0x1f, 0x77, 0xb4));
  add_graph(amax_, tr("amax the scale maps to the format's max"), QColor(0xff, 0x7f, 0x0e));
  amax_->graph(1)->setLineStyle(QCPGraph::lsStepLeft);
  add_graph(amax_, tr("what if: the amax its scale would map to max"), QColor(0x2c, 0xa0, 0x2c));
  add_graph(amax_, tr("amax, every step"), QColor(0x1f, 0x77, 0xb4, 90));
  for (int g : {2, 3}) {
    amax_->graph(g)->setVisible(false);
    amax_->graph(g)->removeFromLegend();
  }
  amax_->graph(2)->setPen(QPen(QColor(0x2c, 0xa0, 0x2c), 2));
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
  // Sampled every few steps: a share held from its sample to the next, not lines drawn
  // between samples (a share at one sample and none at the next drew a triangle, as if it
  // had risen and fallen over the steps between, which no sample saw).
  for (int g = 0; g < 2; ++g) counts_->graph(g)->setLineStyle(QCPGraph::lsStepLeft);
  // The three plots' axes start at the same x, whatever their tick labels' widths ("3.5"
  // against "0.0015"): each plot's left margin at least the widest of the three, once
  // they are laid out (a margin only grows, so that live refreshes never jitter).
  for (ExportablePlot* p : {amax_, scale_, counts_}) {
    connect(p, &QCustomPlot::afterReplot, this, [this] {
      int widest = 0;
      for (ExportablePlot* q : {amax_, scale_, counts_})
        widest = std::max(widest, q->axisRect()->margins().left());
      for (ExportablePlot* q : {amax_, scale_, counts_}) {
        QMargins m = q->axisRect()->minimumMargins();
        if (m.left() >= widest) continue;
        m.setLeft(widest);
        q->axisRect()->setMinimumMargins(m);
        q->replot(QCustomPlot::rpQueuedReplot);
      }
    });
  }
  counts_->legend->setVisible(true);
  place_legend_below(counts_, 2);
  connect(tree_, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* item) {
    if (!item || !item->parent()) return;
    layer_ = item->parent()->text(0);
    role_ = parse_role(item->text(0).toStdString()).value_or(Role::Input);
    drawSelected();
    for (ExportablePlot* p : plots()) p->replot(QCustomPlot::rpQueuedReplot);
  });
  const auto redraw_what_if = [this] {
    drawWhatIf();
    amax_->replot(QCustomPlot::rpQueuedReplot);
  };
  connect(what_if_, &QCheckBox::toggled, this, redraw_what_if);
  connect(what_if_margin_, &QSpinBox::valueChanged, this, redraw_what_if);
  connect(what_if_window_, &QSpinBox::valueChanged, this, redraw_what_if);
  connect(what_if_algo_, &QComboBox::currentIndexChanged, this, redraw_what_if);
  connect(include_step0_, &QCheckBox::toggled, this, [this] {
    drawSelected();  // with step 0 or without it, drawn anew
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
  bool after_step0 = false;
  for (const RankScale& k : data_->ranks())
    after_step0 = after_step0 || (k.role == role_ && k.layer == layer && k.step > 0);
  const bool skip0 = !include_step0_->isChecked() && after_step0;
  for (const RankScale& k : data_->ranks()) {
    if (k.role != role_ || k.layer != layer || (skip0 && k.step == 0)) continue;
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
  // One step axis for the three plots, stacked one under the other: the amax of every
  // step, the scale and the shares sampled every few steps, each step at the same x.
  QCPRange steps;
  bool any = false;
  for (ExportablePlot* p : {amax_, scale_, counts_}) {
    for (int g = 0; g < p->graphCount(); ++g) {
      bool found = false;
      const QCPRange r = p->graph(g)->getKeyRange(found);
      if (!found) continue;
      if (any) {
        steps.expand(r);
      } else {
        steps = r;
        any = true;
      }
    }
  }
  if (any && steps.size() > 0) {
    for (ExportablePlot* p : {amax_, scale_, counts_}) p->xAxis->setRange(steps);
  }
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
    showNoStatistics();
    drawRanks();
    drawWhatIf();  // nothing to replay: the row disabled, saying why
    return;
  }
  drawRanks();
  // What the statistics were measured under is theirs (TensorMetrics::recipe, ::scaling),
  // whatever the run's config says or whether it has one.
  const TensorMetrics& last = t->points.back();
  const Format f = last.recipe.format;
  const double fmax = format_info(f).max_finite;
  const bool delayed = last.scaling == ScalingMode::Delayed;
  // The window: the run's setting, else the length of the amax history the step kept.
  const int window =
      data_->hasConfig() ? data_->config().window : static_cast<int>(last.amax_history.size());
  const int margin = last.recipe.margin;
  // Without "Include step 0", step 0 is not drawn (where later steps are).
  const bool skip0 = !include_step0_->isChecked() && t->points.back().step > 0;
  // A live run's new points are appended; another tensor or run, or step 0 shown or
  // hidden, is drawn anew.
  size_t from = 0;
  const bool append = drawn_.append_from(
      data_->generation(),
      layer_ + QChar('/') + role_text(role_) + (skip0 ? QStringLiteral("/after 0") : QString()),
      t->points.size(), from);
  QVector<double> x, amax, mapped, scale, under, sat;
  for (size_t i = from; i < t->points.size(); ++i) {
    const TensorMetrics& p = t->points[i];
    if (skip0 && p.step == 0) continue;
    x << static_cast<double>(p.step);
    amax << p.amax;
    mapped << (p.scale > 0 ? fmax / p.scale : NAN);
    scale << p.scale;
    under << kUnderflowPct.of(p.raw);
    sat << kSaturatedPct.of(p.raw);
  }
  // The orange steps (step-left: a sample's value holds until the next sample) end in a
  // point one sampling interval past the newest sample, without which the newest step,
  // the one the caption describes, would have no width. Appending, that point goes first.
  QCPGraph* steps = amax_->graph(1);
  if (append && steps->dataCount() > amax_->graph(0)->dataCount())
    steps->data()->remove(steps->data()->at(steps->dataCount() - 1)->key);
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
  // Where the run recorded every step's amax of this tensor, the blue and orange lines are
  // every step's, not the samples' joined.
  drawEveryStepAmax(fmax, delayed, window, margin, skip0);
  if (const int n = amax_->graph(0)->dataCount(); n > 0) {
    const double newest = amax_->graph(0)->data()->at(n - 1)->key;
    const double interval = n > 1 ? newest - amax_->graph(0)->data()->at(n - 2)->key : 1.0;
    steps->addData(newest + interval, steps->data()->at(n - 1)->value);
  }
  fitAxes();
  if (delayed && window > 0) {
    // The steps whose amaxes the next scale comes from.
    window_->topLeft->setCoords(static_cast<double>(last.step - window + 1), 0);
    window_->bottomRight->setCoords(static_cast<double>(last.step) + 0.5, 1);
    window_->setVisible(true);
  } else {
    window_->setVisible(false);
  }
  describeSelected(last, delayed, window, margin);
  drawWhatIf();
}

void ScalingTab::showNoStatistics() {
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
  caption_->setText(data_->runId() == 0
                        ? tr("<i>Start a run from the run panel, or open one in the Runs tab.</i>")
                        : tr("<i>%1 (run %2): no tensor statistics yet; %3.</i>")
                              .arg(qs(data_->name()).toHtmlEscaped())
                              .arg(data_->runId())
                              .arg(when));
}

void ScalingTab::drawEveryStepAmax(double fmax, bool delayed, int window, int margin, bool skip0) {
  // Delayed scaling moves its scale every step: the orange line is then the run's own
  // setting replayed (replay.h's run_scales(), which reproduces the stored scales bit for
  // bit: `fp8wb replay` checks it). Delayed scaling replays with the run's window and
  // algorithm: a run with a config.
  if (delayed && !data_->hasConfig()) return;
  const ReplayInput& in = data_->stepAmax();
  size_t ti = in.tensors.size();
  for (size_t k = 0; k < in.tensors.size(); ++k) {
    if (qs(in.tensors[k].layer) == layer_ && in.tensors[k].role == role_) ti = k;
  }
  if (ti >= in.tensors.size() || in.step_count() == 0) return;
  RunScalingSettings run;
  run.delayed = delayed;
  if (delayed) {
    run.config.window = window;
    run.config.algo = data_->config().amax_algo;
  }
  run.config.margin = margin;
  const std::vector<float> s = run_scales(in, ti, run);
  QVector<double> px, pa, pm;
  for (size_t i = 0; i < in.step_count(); ++i) {
    const float a = in.at(i, ti);
    if (std::isnan(a) || (skip0 && in.steps[i] == 0)) continue;
    px << static_cast<double>(in.steps[i]);
    pa << (a > 0 ? a : NAN);
    pm << (s[i] > 0 ? fmax / s[i] : NAN);
  }
  amax_->graph(0)->setData(px, pa, true);
  amax_->graph(1)->setData(px, pm, true);
}

void ScalingTab::describeSelected(const TensorMetrics& last, bool delayed, int window, int margin) {
  const Format f = last.recipe.format;
  const double fmax = format_info(f).max_finite;
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
  // What the headroom means, and a step whose amax is past what its scale maps to max.
  const QString over =
      headroom < 0 ? tr(" <span style='color:#d62728'><b>Saturating:</b> this step's amax is "
                        "above what its scale maps to %1.</span>")
                         .arg(fmax)
                   : QString();
  const QString meaning =
      tr(" Headroom: how far the amax (blue) stays below the orange line, as a power of 2. "
         "Below 2^0 the largest values saturate; each power of 2 above it is a binade that "
         "the smallest values lose to underflow.");
  caption_->setText(
      tr("<b>%1 / %2</b> in %3 (max %4): last sampled step %5, amax %6, scale %7, headroom "
         "2^%8 (margin %9)%10.%12 %11%13")
          .arg(layer_, role_text(role_), QString::fromLatin1(format_info(f).name.data()))
          .arg(fmax)
          .arg(last.step)
          .arg(last.amax, 0, 'g', 5)
          .arg(last.scale, 0, 'g', 5)
          .arg(headroom, 0, 'f', 2)
          .arg(margin)
          .arg(delayed ? tr(", window %1").arg(window) : QString(), how, over, meaning));
}

void ScalingTab::setWhatIf(bool on, int margin, int window, AmaxAlgo algo) {
  const QSignalBlocker a(what_if_margin_), b(what_if_window_), c(what_if_algo_), d(what_if_);
  what_if_margin_->setValue(margin);
  what_if_window_->setValue(window);
  what_if_algo_->setCurrentIndex(algo == AmaxAlgo::Max ? 0 : 1);
  what_if_->setChecked(on);
  what_if_run_ = data_->runId();  // set by hand: kept while this run is shown
  drawWhatIf();
  amax_->replot();
}

QString ScalingTab::whatIfText() const {
  return what_if_text_->text();
}

void ScalingTab::drawWhatIf() {
  const ReplayInput& in = data_->stepAmax();
  if (what_if_run_ != data_->runId() && data_->hasConfig()) {
    // Another run: the controls start at its own setting.
    const QSignalBlocker a(what_if_margin_), b(what_if_window_), c(what_if_algo_);
    what_if_margin_->setValue(data_->config().margin);
    what_if_window_->setValue(data_->config().window);
    what_if_algo_->setCurrentIndex(data_->config().amax_algo == AmaxAlgo::MostRecent ? 1 : 0);
    what_if_run_ = data_->runId();
  }
  size_t t = in.tensors.size();
  for (size_t k = 0; k < in.tensors.size(); ++k) {
    if (qs(in.tensors[k].layer) == layer_ && in.tensors[k].role == role_) t = k;
  }
  const bool have = t < in.tensors.size() && in.step_count() > 0;
  for (QWidget* w :
       std::initializer_list<QWidget*>{what_if_, what_if_margin_, what_if_window_, what_if_algo_})
    w->setEnabled(have);
  what_if_->setToolTip(have ? tr("Replays this tensor's every step's amax under the setting: the "
                                 "green line is the amax its scale would map to the format's max")
                            : tr("This run recorded no per-step amax of this tensor (runs made "
                                 "before it was recorded, or a recipe that is not tensorwise)"));
  QCPGraph* g = amax_->graph(2);
  QCPGraph* every = amax_->graph(3);
  if (!have || !what_if_->isChecked()) {
    g->data()->clear();
    every->data()->clear();
    for (QCPGraph* h : {g, every}) {
      h->setVisible(false);
      h->removeFromLegend();
    }
    what_if_text_->setText(have ? QString() : tr("(no per-step amax recorded)"));
    return;
  }
  const ReplayCellSetting setting{
      what_if_margin_->value(), what_if_window_->value(),
      what_if_algo_->currentIndex() == 0 ? AmaxAlgo::Max : AmaxAlgo::MostRecent};
  const std::vector<float> s = replay_scales(in, t, setting);
  const double fmax = format_info(in.tensors[t].format).max_finite;
  const float thr = saturation_threshold(in.tensors[t].format);
  const bool skip0 = !include_step0_->isChecked();
  QVector<double> x, mapped, amax;
  int saturating = 0;
  for (size_t i = 0; i < in.step_count(); ++i) {
    const float a = in.at(i, t);
    if (std::isnan(a) || (skip0 && in.steps[i] == 0 && in.step_count() > 1)) continue;
    x << static_cast<double>(in.steps[i]);
    mapped << fmax / s[i];
    amax << (a > 0 ? a : NAN);
    saturating += a > 0 && a * s[i] >= thr;
  }
  g->setData(x, mapped, true);
  every->setData(x, amax, true);
  g->setName(tr("what if margin %1, window %2, %3")
                 .arg(setting.margin)
                 .arg(setting.window)
                 .arg(what_if_algo_->currentText()));
  for (QCPGraph* h : {g, every}) {
    h->setVisible(true);
    if (!amax_->legend->hasItemWithPlottable(h)) h->addToLegend();
  }
  what_if_text_->setText(
      (saturating == 1 ? tr("1 saturating step") : tr("%1 saturating steps").arg(saturating)) +
      tr(" replayed; assumes the amax trajectory does not depend on the setting"));
  fitAxes();
}

}  // namespace fp8wb
