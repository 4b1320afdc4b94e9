// defines: MainWindow's construction (the tabs, the run panel's dock, the signals between
// the engine, the tabs and the window), the tabs by name, presentation mode and the layout
// remembered. The status bar: main_window_status.cpp; the menus: main_window_menus.cpp; the
// run database: main_window_database.cpp.
#include "main_window.h"

#include <QAction>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QLabel>
#include <QSettings>
#include <QTabWidget>

#include "fp8wb/views/checkpoint/checkpoint_tab.h"
#include "fp8wb/views/common/presentation_mode.h"
#include "fp8wb/views/formats/formats_tab.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"
#include "fp8wb/views/run_tabs/run_tabs.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"
#include "status_label.h"

namespace fp8wb {

MainWindow::MainWindow(bool remember_layout, QWidget* parent)
    : QMainWindow(parent),
      tabs_(new QTabWidget(this)),
      formats_(new FormatsTab(this)),
      engine_(new EngineController(this)),
      overview_(new OverviewTab(&engine_->data(), this)),
      scaling_(new ScalingTab(&engine_->data(), this)),
      quantization_(new QuantizationTab(&engine_->data(), this)),
      runs_(new RunsTab(engine_, this)),
      panel_(new RunPanel(engine_, this)),
      checkpoint_(new CheckpointTab(this)),
      sweeps_(new SweepsTab(engine_, this)),
      run_status_(new StatusLabel(this)),
      presentation_(new PresentationMode(this)),
      remember_layout_(remember_layout) {
  setWindowTitle(tr("FP8 Workbench"));
  tabs_->setDocumentMode(true);
  tabs_->addTab(overview_, tr("Overview"));
  tabs_->addTab(scaling_, tr("Scaling"));
  tabs_->addTab(quantization_, tr("Quantization"));
  tabs_->addTab(formats_, tr("Formats"));
  tabs_->addTab(checkpoint_, tr("Checkpoint"));
  tabs_->addTab(sweeps_, tr("Sweeps"));
  tabs_->addTab(runs_, tr("Runs"));
  tabs_->setCurrentWidget(formats_);
  setCentralWidget(tabs_);
  buildStatusBar();  // main_window_status.cpp

  // The run panel: presets, the config form, Start / Pause / Stop.
  auto* dock = run_dock_ = new QDockWidget(tr("Run"), this);
  dock->setObjectName(QStringLiteral("run-panel"));
  // The panel scrolls its form and keeps Start / Pause / Stop in view at any height.
  dock->setWidget(panel_);
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  addDockWidget(Qt::LeftDockWidgetArea, dock);
  connectRun();
  connectTabs();
  connectRunShown();
  buildMenus();

  resize(1400, 900);
  PresentationMode::fitToScreen(this);
  if (remember_layout_) {
    QSettings s;
    restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
    restoreState(s.value(QStringLiteral("window/state")).toByteArray());
    panel_->applyPreset(s.value(QStringLiteral("run/preset")).toString());
    selectTab(s.value(QStringLiteral("window/tab"), tr("Formats")).toString());
    setPresentationMode(s.value(QStringLiteral("window/presentation"), false).toBool());
  }
}

// The run training here: the tabs refreshed, its start and end said; the engine's failures.
void MainWindow::connectRun() {
  connect(engine_, &EngineController::dataChanged, this, [this] { refreshRunTabs(); });
  connect(tabs_, &QTabWidget::currentChanged, this, [this] { refreshRunTabs(); });
  connect(engine_, &EngineController::started, this, [this](qint64 id) {
    run_status_->setText(tr("run %1 training").arg(id));
    clearFailureMessage();
    if (tabs_->currentWidget() == formats_ || tabs_->currentWidget() == runs_)
      tabs_->setCurrentWidget(overview_);
    showRunPanelForPresentation();
  });
  connect(engine_, &EngineController::finished, this,
          [this](RunStatus status, const QString& message) {
            const QString name = QString::fromLatin1(run_status_name(status));
            QString said =
                message.isEmpty() ? tr("run %1").arg(name) : tr("run %1: %2").arg(name, message);
            // Trained here while another run is shown: which run ended, and where it is.
            const int64_t trained = engine_->trainedRunId();
            if (trained != 0 && engine_->data().runId() != trained)
              said = tr("run %1 (trained here) %2; the Runs tab opens it")
                         .arg(trained)
                         .arg(message.isEmpty() ? name : name + QStringLiteral(": ") + message);
            run_status_->setText(said);
            refreshRunTabs(true);
            showRunPanelForPresentation();
          });
  // Failures and notices, from wherever they come, go to one place.
  connect(engine_, &EngineController::failed, this, &MainWindow::showFailure);
  connect(engine_, &EngineController::notice, this, &MainWindow::showNotice);
}

// The Checkpoint, Sweeps and Runs tabs' failures and notices, and the runs they open.
void MainWindow::connectTabs() {
  // A checkpoint chosen by any way (dialog, recent files, drop, --checkpoint) that is the
  // run database, or one of its files, is refused before it is opened.
  checkpoint_->setRunDatabase([this] { return engine_->databasePath(); });
  // The Checkpoint tab's status line says why a file failed; a box says it again only where
  // that line is out of sight (another tab is shown).
  connect(checkpoint_, &CheckpointTab::failed, this, [this](const QString& message) {
    if (isVisible() && tabs_->currentWidget() == checkpoint_) {
      noteFailure(message);
    } else {
      showFailure(message);
    }
  });
  connect(checkpoint_, &CheckpointTab::notice, this, &MainWindow::showNotice);
  connect(checkpoint_, &CheckpointTab::checkpointLoaded, this, [this] { clearFailureMessage(); });
  connect(sweeps_, &SweepsTab::failed, this, &MainWindow::showFailure);
  connect(sweeps_, &SweepsTab::notice, this, &MainWindow::showNotice);
  connect(sweeps_, &SweepsTab::sweepShown, this, [this] { clearFailureMessage(); });
  connect(runs_, &RunsTab::failed, this, &MainWindow::showFailure);
  connect(sweeps_, &SweepsTab::openRunRequested, runs_, &RunsTab::openRequested);
  // Opening a stored run reads it on a pool thread; the window stays responsive.
  connect(runs_, &RunsTab::openRequested, this, [this](qint64 id) {
    engine_->openRun(id);
    if (engine_->isOpening()) run_status_->setText(tr("run %1: opening...").arg(id));
  });
}

// The run shown: opened, followed, another database, paused; the run label says which.
void MainWindow::connectRunShown() {
  connect(engine_, &EngineController::opened, this, [this](qint64 id, bool live) {
    const QString shown =
        live ? tr("run %1: following it live").arg(id) : tr("run %1 opened").arg(id);
    run_status_->setText(engine_->isRunning()
                             ? tr("%1; run %2 trains on").arg(shown).arg(engine_->trainingRunId())
                             : shown);
    clearFailureMessage();
    // The form shows the opened run's settings (Start trains it again); a watched
    // script's run has none the engine could train (its model is the script's), so the
    // form keeps what it had, as it does while a run trains (the form is that run's).
    if (!engine_->isRunning() && engine_->data().hasConfig() && !engine_->data().watched())
      panel_->openConfig(engine_->data().config(), tr("run %1").arg(id));
    tabs_->setCurrentWidget(overview_);
    refreshRunTabs(true);
    showRunPanelForPresentation();
  });
  // Another database (File > Open database, Recent files, any other way): the run named
  // here was the other database's.
  connect(engine_, &EngineController::databaseChanged, this, [this](const QString& path) {
    run_status_->setText(tr("database %1").arg(QDir::toNativeSeparators(path)));
  });
  connect(engine_, &EngineController::trainingShown, this, [this](qint64 id) {
    run_status_->setText(tr("run %1 training").arg(id));
    refreshRunTabs(true);
  });
  connect(engine_, &EngineController::followedRunEnded, this,
          [this](qint64 id, RunStatus status, const QString& message) {
            const QString name = QString::fromLatin1(run_status_name(status));
            run_status_->setText(message.isEmpty()
                                     ? tr("run %1 %2").arg(id).arg(name)
                                     : tr("run %1 %2: %3").arg(id).arg(name, message));
            refreshRunTabs(true);
          });
  connect(engine_, &EngineController::pausedChanged, this, [this](bool paused) {
    const qint64 id = engine_->trainingRunId();
    run_status_->setText(paused ? tr("run %1 paused").arg(id) : tr("run %1 training").arg(id));
    refreshRunTabs(true);
  });
}

QStringList MainWindow::tabNames() const {
  QStringList names;
  for (int i = 0; i < tabs_->count(); ++i) names << tabs_->tabText(i);
  return names;
}

bool MainWindow::selectTab(const QString& name) {
  for (int i = 0; i < tabs_->count(); ++i) {
    if (tabs_->tabText(i).compare(name, Qt::CaseInsensitive) == 0) {
      tabs_->setCurrentIndex(i);
      return true;
    }
  }
  return false;
}

QString MainWindow::currentTabName() const {
  return tabs_->tabText(tabs_->currentIndex());
}

void MainWindow::setPresentationMode(bool on) {
  if (presentation_action_ && presentation_action_->isChecked() != on)
    presentation_action_->setChecked(on);  // toggled() comes back here
  if (on == presentation_->isActive()) return;
  presentation_->setActive(on);
  leave_presentation_action_->setEnabled(on);
  showRunPanelForPresentation();
}

QString MainWindow::runStatusText() const {
  return run_status_->text();
}

bool MainWindow::presentationMode() const {
  return presentation_->isActive();
}

void MainWindow::showRunPanelForPresentation() {
  if (!presentation_->isActive()) return;
  const bool training = engine_->isRunning() || engine_->isFollowing();
  presentation_->showDock(run_dock_, training);
}

void MainWindow::refreshRunTabs(bool force) {
  for (RunTabBase* t : std::initializer_list<RunTabBase*>{overview_, scaling_, quantization_})
    t->refresh(force);
}

void MainWindow::closeEvent(QCloseEvent* e) {
  if (remember_layout_) {
    QSettings s;
    s.setValue(QStringLiteral("window/geometry"), saveGeometry());
    s.setValue(QStringLiteral("window/tab"), currentTabName());
    s.setValue(QStringLiteral("window/presentation"), presentationMode());
    s.setValue(QStringLiteral("window/state"), saveState());
    s.setValue(QStringLiteral("run/preset"), panel_->presetName());
  }
  e->accept();
}

}  // namespace fp8wb
