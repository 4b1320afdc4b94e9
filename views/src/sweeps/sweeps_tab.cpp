// SweepsTab (sweeps_tab.h): the tab's widgets and layout, its presets and the "New sweep"
// form (base config, grid, seeds, trials side by side), whose Start and Stop go to the
// SweepController (sweep_controller.h) and whose trials' list, status line and heatmap
// follow what it says. Elsewhere: the sweep shown read (sweeps_store_reads.cpp), the
// heatmap (sweeps_heatmap.cpp), its cells (sweeps_cells.cpp) and the overlaid curves
// (sweeps_overlay.cpp), the "Sweep" list and the line describing the sweep shown
// (sweeps_list.cpp), "Collect from folder…" (sweeps_collect.cpp).
#include "fp8wb/views/sweeps/sweeps_tab.h"

#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/file_dialogs.h"
#include "fp8wb/views/common/name_choices.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/sweeps/replay_panel.h"
#include "fp8wb/views/sweeps/sweep_controller.h"
#include "sweeps/sweeps_tab_internal.h"

namespace fp8wb {
namespace {

// A label of wrapped text that keeps the height its text needs at its width: in a layout
// under a tab widget its height is otherwise taken from an unwrapped guess, and the
// heatmap below is laid over its last lines.
class WrappedLabel : public QLabel {
 public:
  using QLabel::QLabel;
  void fitHeight() {
    if (const int h = heightForWidth(width()); h > 0) setMinimumHeight(h);
  }

 protected:
  void resizeEvent(QResizeEvent* e) override {
    QLabel::resizeEvent(e);
    fitHeight();
  }
};

struct Preset {
  const char* name;
  const char* base;  // key=value lines
  const char* grid;
  SweepMetric metric;  // the heatmap's colour to start with
};

// On drifting activations, small windows follow the swings and large ones lag (more
// underflow when the values shrink); margin trades saturation for underflow.
const Preset kPresets[] = {
    {"Margin x window on drifting activations",
     "model=mlp\nsteps=150\ndrift=4\ndrift_period=60\nstats_interval=5\nreference=true",
     "margin=0,1,2,4\nwindow=1,16,128,1024", SweepMetric::UnderflowPct},
    {"E4M3 vs E5M2 gradients x scaling", "model=gpt\nsteps=100\nstats_interval=10",
     "formats=hybrid,e4m3\nscaling=delayed,current", SweepMetric::FinalLoss},
};

}  // namespace

using namespace sweeps_detail;  // SweepRead, read_sweep(), heat_gradient() (sweeps_tab_internal.h)

QStringList SweepsTab::presetNames() {
  QStringList n;
  for (const Preset& p : kPresets) n << QString::fromLatin1(p.name);
  return n;
}

SweepsTab::SweepsTab(EngineController* engine, QWidget* parent)
    : QWidget(parent),
      engine_(engine),
      controller_(new SweepController(engine, this)),
      stored_(new QComboBox(this)),
      preset_(new QComboBox(this)),
      x_axis_(new QComboBox(this)),
      y_axis_(new QComboBox(this)),
      metric_(new QComboBox(this)),
      overlay_(new QComboBox(this)),
      grid_(new QPlainTextEdit(this)),
      base_(new QPlainTextEdit(this)),
      seeds_(new QSpinBox(this)),
      parallel_(new QSpinBox(this)),
      start_(new QPushButton(tr("Start sweep"), this)),
      stop_(new QPushButton(tr("Stop"), this)),
      collect_(new QPushButton(tr("Collect from folder…"), this)),
      trials_(new QListWidget(this)),
      no_trials_(new QLabel(this)),
      status_(new QLabel(this)),
      best_(new WrappedLabel(this)),
      overlay_title_(new QLabel(this)),
      collect_failure_(new QLabel(this)),
      reading_(new QProgressBar(this)),
      collecting_(new QProgressBar(this)),
      shown_spec_(new QLabel(this)),
      copy_spec_(new QPushButton(tr("Copy to new sweep"), this)),
      slicer_row_(new QHBoxLayout),
      held_none_(new QLabel(this)),
      heat_(new ExportablePlot(this)),
      curves_(new ExportablePlot(this)) {
  // The form of a new sweep on the left, the sweep shown on the right.
  QWidget* left = makeNewSweepSide();
  QWidget* right = makeShownSweepSide();
  // Two pages: the sweeps (the form, the stored sweeps' heatmap) and "Replay a run".
  auto* sweeps_page = new QWidget(this);
  auto* layout = new QHBoxLayout(sweeps_page);
  layout->addWidget(left);
  layout->addWidget(right, 1);
  pages_ = new QTabWidget(this);
  pages_->setObjectName(QStringLiteral("sweepsPages"));
  pages_->addTab(sweeps_page, tr("Sweeps"));
  replay_ = new ReplayPanel(engine_, this);
  pages_->addTab(replay_, tr("Replay a run"));
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->addWidget(pages_);
  connectSignals();
  applyPreset(preset_->currentText());
  describeShownSweep();  // none yet
  showNoSweep();
}

// The "New sweep" form, Collect, the status line and the trials' list.
QWidget* SweepsTab::makeNewSweepSide() {
  preset_->addItems(presetNames());
  preset_->setObjectName(QStringLiteral("sweepPreset"));
  // Narrower than its longest preset where the window is (1280 px): the tab's form and
  // heatmap side by side leave the run panel room for its form.
  preset_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  preset_->setMinimumContentsLength(16);
  fill_choices(metric_, kSweepMetrics, &SweepMetricEntry::label);
  seeds_->setRange(1, 100);
  seeds_->setObjectName(QStringLiteral("seedsPerPoint"));
  parallel_->setRange(0, 64);
  parallel_->setSpecialValueText(tr("auto"));
  grid_->setPlaceholderText(tr("one axis a line: margin=0,1,2,4"));
  base_->setPlaceholderText(tr("base config, one key=value a line"));
  grid_->setMaximumHeight(90);
  base_->setMaximumHeight(110);
  stop_->setEnabled(false);
  // The form of a sweep to start here, apart from the sweep shown on the right (which the
  // line under the "Sweep" list describes).
  auto* new_sweep = new QGroupBox(tr("New sweep"), this);
  new_sweep->setObjectName(QStringLiteral("newSweep"));
  new_sweep->setToolTip(
      tr("The settings of a sweep to start here. The sweep shown on the right is described "
         "under its \"Sweep\" list."));
  grid_->setObjectName(QStringLiteral("gridText"));
  base_->setObjectName(QStringLiteral("baseText"));
  auto* form = new QFormLayout;
  form->addRow(tr("Preset"), preset_);
  form->addRow(tr("Base config"), base_);
  form->addRow(tr("Grid"), grid_);
  form->addRow(tr("Seeds per point"), seeds_);
  form->addRow(tr("Trials side by side"), parallel_);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(start_);
  buttons->addWidget(stop_);
  auto* nl = new QVBoxLayout(new_sweep);
  nl->addLayout(form);
  nl->addLayout(buttons);
  start_->setObjectName(QStringLiteral("start-sweep"));
  collect_->setObjectName(QStringLiteral("collect-folder"));
  auto* left = new QWidget(this);
  auto* ll = new QVBoxLayout(left);
  ll->addWidget(new_sweep);
  ll->addWidget(collect_);
  status_->setWordWrap(true);
  ll->addWidget(status_);
  reading_->setRange(0, 0);  // busy, for as long as it takes
  reading_->setMaximumHeight(8);
  reading_->setTextVisible(false);
  reading_->setToolTip(tr("reading the sweep's points"));
  reading_->setVisible(false);
  ll->addWidget(reading_);
  collecting_->setObjectName(QStringLiteral("collect-progress"));
  collecting_->setFormat(tr("%v of %m trials collected"));
  collecting_->setVisible(false);
  ll->addWidget(collecting_);
  ll->addWidget(trials_, 1);
  // An empty list is a blank box: while it is, a line says what it will hold instead.
  no_trials_->setObjectName(QStringLiteral("noTrials"));
  no_trials_->setText(
      tr("A sweep started here, or a folder collected, lists its trials here "
         "with their progress."));
  no_trials_->setWordWrap(true);
  no_trials_->setEnabled(false);  // grey: a hint, not a figure
  no_trials_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  ll->addWidget(no_trials_, 1);
  // Called where the list is filled or cleared, not on the model's signals: those also
  // come while the tab's children are destroyed, after the tab itself.
  showTrialsOrHint();
  left->setMaximumWidth(420);
  return left;
}

// The "Sweep" list, the line describing the sweep shown, the axis choices, the heatmap and
// the overlaid curves.
QWidget* SweepsTab::makeShownSweepSide() {
  map_ = new QCPColorMap(heat_->xAxis, heat_->yAxis);
  map_->setName(tr("sweep"));
  scale_ = new QCPColorScale(heat_);
  heat_->plotLayout()->addElement(0, 1, scale_);
  map_->setColorScale(scale_);
  no_sweep_ = new QCPItemText(heat_);
  no_sweep_->setObjectName(QStringLiteral("noSweep"));
  no_sweep_->position->setType(QCPItemPosition::ptAxisRectRatio);
  no_sweep_->position->setCoords(0.5, 0.5);
  no_sweep_->setText(tr("no sweep shown"));
  no_sweep_->setColor(QColor(120, 120, 120));
  no_sweep_->setSelectable(false);
  map_->setGradient(heat_gradient());
  heat_->setCellTip([this](const QCPColorMap*, int x, int y) { return cellTip(x, y); });
  map_->setInterpolate(false);
  heat_->setInteractions(QCP::Interactions());  // clicks pick cells
  curves_->xAxis->setLabel(tr("step"));
  set_whole_number_ticks(curves_->xAxis);
  curves_->setEmptyHint(
      tr("Choose a sweep above, then click a cell of its heatmap\nto compare "
         "the loss curves of its row (or column)"));
  curves_->yAxis->setLabel(tr("loss"));
  x_axis_->setObjectName(QStringLiteral("xAxis"));
  y_axis_->setObjectName(QStringLiteral("yAxis"));
  auto* pick = new QHBoxLayout;
  pick->addWidget(new QLabel(tr("x"), this));
  pick->addWidget(x_axis_);
  pick->addWidget(new QLabel(tr("y"), this));
  pick->addWidget(y_axis_);
  pick->addWidget(new QLabel(tr("colour"), this));
  pick->addWidget(metric_);
  range_ = make_colour_range_box(this);
  connect(range_, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
  pick->addWidget(range_);
  pick->addWidget(new QLabel(tr("a click overlays its"), this));
  overlay_->setObjectName(QStringLiteral("overlayAlong"));
  overlay_->addItems({tr("row"), tr("column")});
  pick->addWidget(overlay_);
  pick->addStretch(1);
  // The axes neither across nor up, each held at a value, on a line of their own: choosing
  // axes shows and hides them there without widening the tab or moving the heatmap.
  auto* held = new QWidget(this);
  held->setObjectName(QStringLiteral("heldAxes"));
  auto* hl = new QHBoxLayout(held);
  hl->setContentsMargins(QMargins());
  hl->addWidget(new QLabel(tr("Other axes at"), held));
  hl->addLayout(slicer_row_);
  held_none_->setObjectName(QStringLiteral("heldNone"));
  hl->addWidget(held_none_);
  hl->addStretch(1);
  held->setFixedHeight(std::max(x_axis_->sizeHint().height(), held_none_->sizeHint().height()));
  held->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
  // The database's sweeps: any of them is shown by choosing it.
  stored_->setObjectName(QStringLiteral("storedSweeps"));
  stored_->setToolTip(
      tr("The sweeps stored in this database, newest first: run here, by "
         "`fp8wb sweep`, or collected from a cluster's folder"));
  stored_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  stored_->addItem(tr("no stored sweeps"));
  stored_->setEnabled(false);
  auto* chooser = new QHBoxLayout;
  chooser->addWidget(new QLabel(tr("Sweep"), this));
  chooser->addWidget(stored_, 1);
  // What the sweep shown was run with: its grid, seeds and base config, read-only; the
  // button puts them in the form of a new sweep.
  shown_spec_->setObjectName(QStringLiteral("shownSweepSpec"));
  shown_spec_->setWordWrap(true);
  shown_spec_->setTextFormat(Qt::PlainText);
  shown_spec_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  copy_spec_->setObjectName(QStringLiteral("copyToForm"));
  copy_spec_->setToolTip(
      tr("Put the shown sweep's grid, seeds and base config in the form of "
         "a new sweep, on the left"));
  auto* shown = new QHBoxLayout;
  shown->addWidget(shown_spec_, 1);
  shown->addWidget(copy_spec_, 0, Qt::AlignTop);
  auto* right = new QWidget(this);
  auto* rl = new QVBoxLayout(right);
  rl->addLayout(chooser);
  rl->addLayout(shown);
  rl->addLayout(pick);
  rl->addWidget(held);
  collect_failure_->setObjectName(QStringLiteral("collect-failure"));
  collect_failure_->setWordWrap(true);
  collect_failure_->setTextFormat(Qt::PlainText);
  collect_failure_->setStyleSheet(
      QStringLiteral("color: #b71c1c; background: #ffebee; padding: 4px"));
  collect_failure_->setVisible(false);
  rl->addWidget(collect_failure_);
  best_->setObjectName(QStringLiteral("verdict"));
  best_->setWordWrap(true);
  rl->addWidget(best_);
  rl->addWidget(heat_, 3);
  overlay_title_->setObjectName(QStringLiteral("overlayTitle"));
  overlay_title_->setWordWrap(true);
  rl->addWidget(overlay_title_);
  rl->addWidget(curves_, 2);
  return right;
}

void SweepsTab::connectSignals() {
  connect(pages_, &QTabWidget::currentChanged, this, [this](int page) {
    if (page == 1) replay_->refreshRuns();
  });
  connect(replay_, &ReplayPanel::failed, this, &SweepsTab::failed);
  // "Train these cells": a real sweep of them on the replayed run's config.
  connect(replay_, &ReplayPanel::trainRequested, this,
          [this](const QString& base, const QString& grid) {
            setBaseOverrides(base);
            setGridText(grid);
            setSeeds(1);
            pages_->setCurrentIndex(0);
            start();
          });

  connect(preset_, &QComboBox::currentTextChanged, this,
          [this](const QString& n) { applyPreset(n); });
  // The form edited away from its preset: no preset's now (the box says "custom"), and the
  // sweep and its trials are not named after one.
  // Short: a combo box is never narrower than its placeholder (the form's column is).
  preset_->setPlaceholderText(tr("custom sweep settings"));
  preset_->setToolTip(
      tr("Fills the form (\"custom sweep settings\": a preset changed, or a "
         "shown sweep's settings)"));
  for (QPlainTextEdit* e : {base_, grid_})
    connect(e, &QPlainTextEdit::textChanged, this, &SweepsTab::showWhetherPreset);
  connect(start_, &QPushButton::clicked, this, [this] { start(); });
  connect(stop_, &QPushButton::clicked, this, &SweepsTab::stop);
  connect(copy_spec_, &QPushButton::clicked, this, &SweepsTab::copyShownToForm);
  connect(collect_, &QPushButton::clicked, this, [this] {
    const QString dir =
        folder_chooser_
            ? folder_chooser_(this)
            : existing_folder(this, tr("The folder of a sweep run on a cluster (sweep.json)"),
                              QString());
    if (!dir.isEmpty()) collectFolder(dir);
  });
  connect(stored_, &QComboBox::currentIndexChanged, this, [this](int i) {
    const int64_t id = stored_->itemData(i).toLongLong();
    if (id <= 0 || id == sweep_id_) return;
    chosen_ = id;
    showSweep(id);
  });
  // A sweep chosen from the list: its first row's curves, until a cell is clicked.
  connect(this, &SweepsTab::sweepShown, this, [this](qint64 id) {
    if (id != chosen_) return;
    chosen_ = 0;
    overlayLine(0, 0, overlay_->currentIndex() == 1);
  });
  // The sweep run here goes through its controller, which says how it goes.
  connect(controller_, &SweepController::started, this, &SweepsTab::sweepStarted);
  connect(controller_, &SweepController::trialFinished, this,
          [this](qint64, int index, RunStatus status) { trialEnded(index, status); });
  connect(controller_, &SweepController::finished, this, &SweepsTab::sweepEnded);
  connect(controller_, &SweepController::failed, this, &SweepsTab::failed);
  connect(controller_, &SweepController::notice, this, [this](const QString& n) {
    // Grid values dropped as another spelling of a number: on the tab's line too.
    status_->setText(status_->text() + QLatin1Char('\n') + n);
    Q_EMIT notice(n);
  });
  connect(engine_, &EngineController::databaseChanged, this, &SweepsTab::databaseChanged);
  connect(engine_, &EngineController::runsDeleted, this, &SweepsTab::runsDeleted);
  // A database that cannot be written takes no sweeps: the buttons say why, as Start does.
  connect(engine_, &EngineController::readOnlyChanged, this, &SweepsTab::updateWriteButtons);
  updateWriteButtons();
  for (QComboBox* c : {x_axis_, y_axis_, metric_})
    connect(c, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
  // A cell is clicked anywhere inside it, over the map or a marked cell's items (the
  // map's own hit test covers only the span between the outer cells' centres).
  connect(heat_, &QCustomPlot::mousePress, this,
          [this](QMouseEvent* e) { pressed_at_ = e->position().toPoint(); });
  connect(heat_, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* e) {
    if ((e->position().toPoint() - pressed_at_).manhattanLength() <= 3) cellClicked(e, false);
  });
  connect(heat_, &QCustomPlot::mouseDoubleClick, this,
          [this](QMouseEvent* e) { cellClicked(e, true); });
  ticksFollowTheLayout();
  // The sweep shown follows the database by itself, as the Runs tab's list does: trials
  // another process ends or deletes (the CLI's sweep, `fp8wb runs delete`). Read off the
  // GUI thread, once a second while the tab is shown.
  auto* poll = new QTimer(this);
  poll->setInterval(1000);
  connect(poll, &QTimer::timeout, this, [this] {
    if (isVisible()) pollShownSweep();
  });
  poll->start();
  connect(overlay_, &QComboBox::currentIndexChanged, this,
          [this](int column) { overlayLine(overlaid_cell_.x(), overlaid_cell_.y(), column == 1); });
}

SweepsTab::~SweepsTab() {
  stop();  // the controller, a child, waits for the trials as it goes
}

QString SweepsTab::fail(const QString& message) {
  Q_EMIT failed(message);
  return message;
}

bool SweepsTab::applyPreset(const QString& name) {
  for (const Preset& p : kPresets) {
    if (name != QLatin1String(p.name)) continue;
    {
      const QSignalBlocker bb(base_), bg(grid_);
      base_->setPlainText(QString::fromLatin1(p.base));
      grid_->setPlainText(QString::fromLatin1(p.grid));
    }
    if (preset_->currentText() != name) {
      const QSignalBlocker b(preset_);
      preset_->setCurrentText(name);
    }
    choose(metric_, kSweepMetrics, p.metric);
    return true;
  }
  return false;
}

void SweepsTab::showWhetherPreset() {
  // The preset whose settings the form holds (lines compared without their surrounding
  // blanks), however it got there; none: the placeholder, custom.
  const auto lines = [](const QString& text) {
    QStringList out;
    for (const QString& l : text.split(QLatin1Char('\n'))) {
      if (!l.trimmed().isEmpty()) out << l.trimmed();
    }
    return out;
  };
  const QStringList base = lines(base_->toPlainText()), grid = lines(grid_->toPlainText());
  int match = -1;
  for (size_t i = 0; i < std::size(kPresets); ++i) {
    if (base == lines(QString::fromLatin1(kPresets[i].base)) &&
        grid == lines(QString::fromLatin1(kPresets[i].grid)))
      match = static_cast<int>(i);
  }
  if (preset_->currentIndex() == match) return;
  const QSignalBlocker b(preset_);
  preset_->setCurrentIndex(match);
}

void SweepsTab::showReplay() {
  pages_->setCurrentIndex(1);
}

void SweepsTab::setGridText(const QString& text) {
  grid_->setPlainText(text);
}

void SweepsTab::setBaseOverrides(const QString& text) {
  base_->setPlainText(text);
}

void SweepsTab::setSeeds(int seeds) {
  seeds_->setValue(seeds);
}

QString SweepsTab::start() {
  SweepSpec spec;
  try {
    // Named after its preset where the form is one's; else the default name ("sweep").
    if (preset_->currentIndex() >= 0) spec.name = preset_->currentText().toStdString();
    for (const QString& line : base_->toPlainText().split(QLatin1Char('\n'), Qt::SkipEmptyParts))
      apply_override(spec.base, line.trimmed().toStdString());
    for (const QString& line : grid_->toPlainText().split(QLatin1Char('\n'), Qt::SkipEmptyParts))
      spec.axes.push_back(parse_grid(line.trimmed().toStdString()));
    spec.seeds = seeds_->value();
  } catch (const std::exception& e) {
    return fail(QString::fromStdString(e.what()));
  }
  // A refusal is said by the controller's failed(), which is the tab's.
  return controller_->start(spec, parallel_->value());
}

void SweepsTab::sweepStarted(qint64 id, int trials) {
  points_job_.drop();
  setReading(false);
  spec_ = controller_->spec();
  points_.clear();
  sweep_id_ = id;
  clearOverlay();                       // the curves of the sweep shown before
  collect_failure_->setVisible(false);  // the sweep shown now is this one
  collect_failure_->clear();
  trials_->clear();
  for (const SweepTrial& t : controller_->trials())
    trials_->addItem(QString::fromStdString(t.key) + tr(": waiting"));
  showTrialsOrHint();
  status_->setText(tr("sweep %1: %2 trials").arg(id).arg(trials));
  start_->setEnabled(false);
  stop_->setEnabled(true);
  rebuildSlicers();
  redraw();
  refreshSweeps();  // lists the new sweep, chosen
}

void SweepsTab::trialEnded(int index, RunStatus status) {
  if (QListWidgetItem* item = trials_->item(index)) {
    const QString key = item->text().section(QLatin1Char(':'), 0, 0);
    item->setText(key + QStringLiteral(": ") + QString::fromLatin1(run_status_name(status)));
  }
  if (busy()) showSweep(sweep_id_);  // the heatmap with the points so far
}

void SweepsTab::sweepEnded(const SweepOutcome& o) {
  stop_->setEnabled(false);
  updateWriteButtons();
  const int64_t id = o.sweep_id;
  const QString status = QString::fromStdString(o.status_text);
  if (o.failed) {  // failed() said why
    status_->setText(tr("sweep %1 failed").arg(id));
  } else {
    showPoints(id, o.spec, o.points, o.status);
    // The first row's curves, until a cell is clicked.
    overlayLine(0, 0, overlay_->currentIndex() == 1);
    status_->setText(tr("sweep %1 %2").arg(id).arg(status));
    Q_EMIT notice(tr("sweep %1 %2").arg(id).arg(status));
  }
  refreshSweeps();  // its status
  Q_EMIT sweepFinished(id, status);
}

void SweepsTab::updateWriteButtons() {
  const QString read_only = engine_->readOnlyReason();
  // Start while no sweep runs (Stop is enabled then), Collect while no folder is collected.
  start_->setEnabled(!stop_->isEnabled() && read_only.isEmpty());
  start_->setToolTip(read_only);
  collect_->setEnabled(collecting_->isHidden() && read_only.isEmpty());
  collect_->setToolTip(
      read_only.isEmpty()
          ? tr("Merge the finished trials of a sweep run on a cluster (the folder `fp8wb sweep "
               "--slurm` wrote) into this database, as `fp8wb sweep --collect` does")
          : read_only);
}

bool SweepsTab::busy() const {
  return controller_->busy();
}

void SweepsTab::stop() {
  controller_->stop();
}

void SweepsTab::showTrialsOrHint() {
  const bool any = trials_->count() > 0;
  trials_->setVisible(any);
  no_trials_->setVisible(!any);
}

}  // namespace fp8wb
