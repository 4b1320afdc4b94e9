#include "main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDialog>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPainter>
#include <QRegularExpression>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextBrowser>
#include <QTimer>
#include <QUrl>
#include <QVBoxLayout>

#include <algorithm>

#include "fp8wb/core/backend_info.h"
#include "fp8wb/core/file_io.h"
#include "fp8wb/core/run_store.h"
#include "fp8wb/views/checkpoint_tab.h"
#include "fp8wb/views/engine_controller.h"
#include "fp8wb/views/exportable_plot.h"
#include "fp8wb/views/file_dialogs.h"
#include "fp8wb/views/formats_tab.h"
#include "fp8wb/views/presentation_mode.h"
#include "fp8wb/views/run_panel.h"
#include "fp8wb/views/run_tabs.h"
#include "fp8wb/views/runs_tab.h"
#include "fp8wb/views/sweeps_tab.h"
#include "fp8wb/views/training_run_button.h"

namespace fp8wb {

namespace {

// A label that gives up width down to none, its text cut with "..." (the whole of it in
// its tooltip): the status bar's GEMM line at 1280 px would otherwise run under the
// database label beside it.
class ElidedLabel : public QLabel {
 public:
  using QLabel::QLabel;
  QSize minimumSizeHint() const override { return {0, QLabel::minimumSizeHint().height()}; }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    const QRect r = contentsRect();
    p.setPen(palette().color(foregroundRole()));
    p.drawText(r, Qt::AlignLeft | Qt::AlignVCenter,
               fontMetrics().elidedText(text(), Qt::ElideRight, r.width()));
  }
};

}  // namespace

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
      run_status_(new QLabel(this)),
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

  const BackendInfo b = probe_backend();
  auto* device = new QLabel(tr("Device: %1").arg(QString::fromStdString(b.device_name)), this);
  auto* gemm = new ElidedLabel(tr("FP8 GEMM: %1").arg(QString::fromStdString(b.fp8_gemm)), this);
  device->setObjectName(QStringLiteral("deviceLabel"));
  gemm->setObjectName(QStringLiteral("gemmLabel"));
  run_status_->setObjectName(QStringLiteral("runStatus"));
  gemm->setToolTip(
      tr("%1 (LibTorch %2)").arg(gemm->text(), QString::fromStdString(b.torch_version)));
  statusBar()->addWidget(device);
  statusBar()->addWidget(gemm, 1);
  statusBar()->addPermanentWidget(run_status_);
  // While another run is shown, the way back to the one training here.
  back_button_ = new TrainingRunButton(engine_, this);
  statusBar()->addPermanentWidget(back_button_);
  // QStatusBar hides its normal widgets only where they are visible when a message comes:
  // one said while the bar was hidden left them to show up under it later, two texts drawn
  // on top of each other. Here they are hidden while any message shows, and back after.
  connect(statusBar(), &QStatusBar::messageChanged, this, [device, gemm](const QString& m) {
    device->setVisible(m.isEmpty());
    gemm->setVisible(m.isEmpty());
  });
  // The permanent widgets grow and move ("run 1 opened; run 2 trains on", "Back to run
  // 2"): the message is cut again to the room they leave, never clipped under them.
  run_status_->installEventFilter(this);
  back_button_->installEventFilter(this);

  // The run panel: presets, the config form, Start / Pause / Stop.
  auto* dock = run_dock_ = new QDockWidget(tr("Run"), this);
  dock->setObjectName(QStringLiteral("run-panel"));
  // The panel scrolls its form and keeps Start / Pause / Stop in view at any height.
  dock->setWidget(panel_);
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  addDockWidget(Qt::LeftDockWidgetArea, dock);

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

namespace {

const QString kRecentDatabasesKey = QStringLiteral("database/recent");

QAction* named(QAction* a, const char* name) {
  a->setObjectName(QLatin1String(name));
  return a;
}

}  // namespace

void MainWindow::buildMenus() {
  open_dialog_ = &open_file_name;
  save_dialog_ = &save_file_name;
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->setObjectName(QStringLiteral("file-menu"));
  named(file->addAction(tr("Open &checkpoint..."), QKeySequence::Open, this,
                        [this] {
                          const QString path = open_dialog_(
                              this, tr("Open checkpoint"), QString(),
                              tr("Checkpoints (*.safetensors *.index.json *.pt *.pth *.bin);;All "
                                 "files (*)"));
                          if (!path.isEmpty()) openCheckpointFile(path);
                        }),
        "open-checkpoint");
  named(file->addAction(tr("Open &database..."), QKeySequence(tr("Ctrl+Shift+O")), this,
                        [this] {
                          const QString path =
                              open_dialog_(this, tr("Open run database"),
                                           QFileInfo(engine_->databasePath()).path(),
                                           tr("Run databases (*.sqlite *.db);;All files (*)"));
                          if (!path.isEmpty()) openDatabaseFile(path);
                        }),
        "open-database");
  recent_menu_ = file->addMenu(tr("&Recent files"));
  recent_menu_->setObjectName(QStringLiteral("recent-files"));
  connect(recent_menu_, &QMenu::aboutToShow, this, &MainWindow::fillRecentMenu);
  fillRecentMenu();
  file->addSeparator();
  export_menu_ = file->addMenu(tr("&Export"));
  export_menu_->setObjectName(QStringLiteral("export"));
  // Rebuilt for each tab, so that its shortcuts reach the plots shown, and as the File menu
  // opens, greyed there where the tab has nothing to export (a greyed menu never opens).
  connect(export_menu_, &QMenu::aboutToShow, this, &MainWindow::fillExportMenu);
  connect(file, &QMenu::aboutToShow, this, &MainWindow::fillExportMenu);
  connect(tabs_, &QTabWidget::currentChanged, this, &MainWindow::fillExportMenu);
  // What there is to export changes with the run and the checkpoint or sweep shown: the
  // shortcuts follow.
  connect(engine_, &EngineController::dataChanged, this, &MainWindow::fillExportMenu);
  connect(engine_, &EngineController::opened, this, &MainWindow::fillExportMenu);
  connect(checkpoint_, &CheckpointTab::checkpointLoaded, this, &MainWindow::fillExportMenu);
  connect(sweeps_, &SweepsTab::sweepShown, this, &MainWindow::fillExportMenu);
  fillExportMenu();
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* view = menuBar()->addMenu(tr("&View"));
  presentation_action_ = view->addAction(tr("&Presentation mode (large fonts)"));
  presentation_action_->setCheckable(true);
  presentation_action_->setShortcut(QKeySequence(Qt::Key_F11));
  connect(presentation_action_, &QAction::toggled, this, &MainWindow::setPresentationMode);
  // Esc leaves presentation mode (only then: elsewhere it is the widgets').
  leave_presentation_action_ = new QAction(tr("Leave presentation mode"), this);
  leave_presentation_action_->setShortcut(QKeySequence(Qt::Key_Escape));
  leave_presentation_action_->setEnabled(false);
  connect(leave_presentation_action_, &QAction::triggered, this,
          [this] { setPresentationMode(false); });
  addAction(leave_presentation_action_);
  view->addAction(run_dock_->toggleViewAction());
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  named(help->addAction(tr("&Documentation"), QKeySequence::HelpContents, this,
                        [this] { showDocumentation(); }),
        "help-documentation");
  help->addAction(tr("&About"), this, [this] {
    QMessageBox::about(this, tr("About FP8 Workbench"),
                       tr("<b>FP8 Workbench %1</b><p>See what FP8 does to numbers: formats, "
                          "scaling recipes and FP8 training, bit for bit.</p><p>%2</p>")
                           .arg(QString::fromStdString(workbench_version()), statusText()));
  });
}

namespace {

// Where the documentation may be, in turn: $FP8WB_DOC_DIR alone where it is set; else as
// installed beside the program (share/doc/fp8-workbench, by packaging/CMakeLists.txt),
// then the source tree this program was built from (a build not installed).
QStringList documentation_folders() {
  const QString given = qEnvironmentVariable("FP8WB_DOC_DIR");
  if (!given.isEmpty()) return {given};
  QStringList folders{QDir::cleanPath(QCoreApplication::applicationDirPath() +
                                      QStringLiteral("/../share/doc/fp8-workbench"))};
#ifdef FP8WB_SOURCE_DIR
  folders << QStringLiteral(FP8WB_SOURCE_DIR);
#endif
  return folders;
}

// The documentation's viewer: its pictures (screenshots 1400 px wide) at most kWidest
// pixels wide, so that the pages read without scrolling sideways.
class DocumentationBrowser : public QTextBrowser {
 public:
  static constexpr int kWidest = 860;
  using QTextBrowser::QTextBrowser;
  QVariant loadResource(int type, const QUrl& name) override {
    QVariant v = QTextBrowser::loadResource(type, name);
    if (type != QTextDocument::ImageResource) return v;
    QImage image =
        v.typeId() == QMetaType::QByteArray ? QImage::fromData(v.toByteArray()) : v.value<QImage>();
    if (image.width() <= kWidest) return v;
    return image.scaledToWidth(kWidest, Qt::SmoothTransformation);
  }
};

}  // namespace

bool MainWindow::showDocumentation() {
  QString readme;
  const QStringList folders = documentation_folders();
  for (const QString& f : folders) {
    if (QFileInfo(f + QStringLiteral("/README.md")).isFile()) {
      readme = QFileInfo(f + QStringLiteral("/README.md")).absoluteFilePath();
      break;
    }
  }
  if (readme.isEmpty()) {
    showFailure(tr("The documentation is not installed here: no README.md in %1. It is in the "
                   "source tree, README.md and docs/.")
                    .arg(folders.join(tr(", nor in "))));
    return false;
  }
  if (!docs_) {
    // The program's own viewer: Markdown, its links to the other pages and its pictures,
    // with no browser or network needed. Links out of the documentation open outside.
    docs_ = new QDialog(this);
    docs_->setWindowTitle(tr("FP8 Workbench documentation"));
    docs_->resize(960, 760);
    auto* browser = new DocumentationBrowser(docs_);
    browser->setObjectName(QStringLiteral("documentation"));
    browser->setOpenExternalLinks(true);
    auto* layout = new QVBoxLayout(docs_);
    layout->addWidget(browser);
  }
  auto* browser = docs_->findChild<QTextBrowser*>(QStringLiteral("documentation"));
  browser->setSource(QUrl::fromLocalFile(readme));
  docs_->show();
  docs_->raise();
  return true;
}

void MainWindow::setFileDialogs(FileDialog open, FileDialog save) {
  open_dialog_ = std::move(open);
  save_dialog_ = std::move(save);
}

void MainWindow::openCheckpointFile(const QString& path) {
  tabs_->setCurrentWidget(checkpoint_);
  checkpoint_->openCheckpoint(path);
}

bool MainWindow::openDatabaseFile(const QString& path) {
  if (sweeps_->busy()) {
    showFailure(tr("a sweep is running: stop it before opening another database"));
    return false;
  }
  // Only a file that is there: the dialog's choice, or a recent file still there.
  if (!QFileInfo::exists(path)) {
    const QString folder = QFileInfo(path).absolutePath();
    if (const std::string link = link_problem(QFile::encodeName(path).toStdString());
        !link.empty()) {
      showFailure(tr("no run database at %1: it is %2").arg(path, QString::fromStdString(link)));
      return false;
    }
    showFailure(QFileInfo(folder).isDir()
                    ? tr("no run database at %1").arg(path)
                    : tr("no run database at %1: the folder %2 does not exist").arg(path, folder));
    return false;
  }
  if (!engine_->openDatabase(path)) return false;  // failed() has said why
  rememberDatabase(path);                          // the run label says it (databaseChanged)
  runs_->reload();
  refreshRunTabs(true);
  return true;
}

void MainWindow::checkDatabase() {
  const QString path = engine_->databasePath();
  if (!QFileInfo::exists(path)) {
    // A new database is fine; one in a folder that is not there is most likely a mistyped
    // path, whose runs would land in a folder made for them.
    // The default database's folder is made with it (a first start).
    const QString folder = QFileInfo(path).absolutePath();
    if (!QFileInfo(folder).isDir() && path != QString::fromStdString(default_database_path())) {
      showFailure(tr("The run database %1 is in a folder that does not exist (%2). Check the "
                     "path; starting a run would create the folder and a new, empty database "
                     "in it.")
                      .arg(path, folder));
      return;
    }
    // Made by the first run, in the folder, or in the nearest folder above it that is
    // there: one this process cannot write takes no database, and no run.
    QString there = folder;
    while (!QFileInfo::exists(there) && QFileInfo(there).absolutePath() != there)
      there = QFileInfo(there).absolutePath();
    if (!QFileInfo(there).isWritable()) {
      const QString why = tr("The run database %1 cannot be made: the folder %2 cannot be "
                             "written, so no run can be stored there. Choose another database: "
                             "File > Open database.")
                              .arg(path, there);
      engine_->setUnusableReason(why);  // Start, Rename, Delete disabled with it, as for --db
      showFailure(why);
    }
    return;
  }
  try {
    engine_->store();
  } catch (const std::exception& e) {
    showFailure(QString::fromStdString(e.what()));
  }
}

void MainWindow::recheckDatabase() {
  if (engine_->readOnlyReason().isEmpty() || engine_->isRunning()) return;
  const QString path = engine_->databasePath();
  if (QFileInfo::exists(path)) {
    engine_->retryDatabase();
    return;
  }
  // Not made yet: usable again once the nearest folder there can be written.
  QString there = QFileInfo(path).absolutePath();
  while (!QFileInfo::exists(there) && QFileInfo(there).absolutePath() != there)
    there = QFileInfo(there).absolutePath();
  if (QFileInfo(there).isWritable()) engine_->setUnusableReason({});
}

void MainWindow::changeEvent(QEvent* e) {
  QMainWindow::changeEvent(e);
  if (e->type() == QEvent::ActivationChange && isActiveWindow()) recheckDatabase();
}

QStringList MainWindow::recentDatabases() const {
  return QSettings().value(kRecentDatabasesKey).toStringList();
}

void MainWindow::rememberDatabase(const QString& path) {
  QStringList r = recentDatabases();
  r.removeAll(path);
  r.prepend(path);
  while (r.size() > 10) r.removeLast();
  QSettings().setValue(kRecentDatabasesKey, r);
}

// Checkpoints, then databases; files that are gone are taken off the lists, with a notice.
void MainWindow::fillRecentMenu() {
  recent_menu_->clear();
  QStringList gone;
  QStringList databases = recentDatabases();
  for (const QString& p : databases) {
    if (!QFileInfo::exists(p)) gone << p;
  }
  for (const QString& p : gone) databases.removeAll(p);
  if (!gone.isEmpty()) QSettings().setValue(kRecentDatabasesKey, databases);
  QStringList checkpoints;
  for (const QString& p : checkpoint_->recentFiles()) {
    if (QFileInfo::exists(p)) {
      checkpoints << p;
    } else {
      checkpoint_->forgetRecent(p);
      gone << p;
    }
  }
  if (!gone.isEmpty()) {
    showNotice(
        tr("no longer there, taken off the recent files: %1").arg(gone.join(QStringLiteral(", "))));
  }
  auto add = [this](const QString& title, const QStringList& paths, auto open) {
    recent_menu_->addSection(title);
    for (const QString& p : paths) {
      QAction* a = recent_menu_->addAction(QDir::toNativeSeparators(p), this, [this, p, open] {
        if (!QFileInfo::exists(p)) {
          fillRecentMenu();  // says it is gone
          return;
        }
        (this->*open)(p);
      });
      a->setData(p);
    }
  };
  add(tr("Checkpoints"), checkpoints, &MainWindow::openCheckpointFile);
  add(tr("Run databases"), databases, &MainWindow::openDatabaseFile);
  if (checkpoints.isEmpty() && databases.isEmpty())
    recent_menu_->addAction(tr("(none)"))->setEnabled(false);
}

// What the current tab can export, each by its name: its plots (picture or data, by the
// file's suffix; one with nothing drawn greyed), the Checkpoint tab's table, the run shown
// (on the tabs that show a run). The menu is greyed, and says so, where there is nothing.
void MainWindow::fillExportMenu() {
  if (export_menu_->isVisible()) return;  // not under the pointer of someone choosing
  export_menu_->clear();
  QWidget* tab = tabs_->currentWidget();
  const QString tab_name = tabs_->tabText(tabs_->currentIndex());
  bool first = true, any = false;
  for (ExportablePlot* p : tab->findChildren<ExportablePlot*>()) {
    if (!p->isVisibleTo(tab)) continue;
    // Named by the title its picture carries (setExportTitle(), else made of the axis
    // labels that there are): a chart whose value axis has no label is no "Plot of  by ...".
    QString what = p->exportTitle();
    if (what.isEmpty()) what = tr("plot");
    // The file name offered: the title's words, joined by '-'.
    static const QRegularExpression not_word(QStringLiteral("[^A-Za-z0-9._]+"));
    QString file = QString(what).replace(not_word, QStringLiteral("-"));
    while (file.endsWith(QLatin1Char('-')) || file.endsWith(QLatin1Char('.'))) file.chop(1);
    if (file.isEmpty()) file = QStringLiteral("plot");
    const bool drawn = p->hasData();
    QAction* a = export_menu_->addAction(
        drawn ? tr("Plot of %1 (PNG, PDF, CSV)...").arg(what)
              : tr("Plot of %1 (nothing drawn yet)").arg(what),
        this, [this, p, file] {
          QString path = save_dialog_(this, tr("Export plot"), file + QStringLiteral(".png"),
                                      tr("PNG image (*.png);;PDF (*.pdf);;CSV (*.csv)"));
          if (path.isEmpty()) return;
          if (QFileInfo(path).suffix().isEmpty()) path += QStringLiteral(".png");
          const QString err = p->exportTo(path);
          if (err.isEmpty()) {
            showNotice(tr("wrote %1").arg(path));
          } else {
            showFailure(err);
          }
        });
    a->setObjectName(QStringLiteral("export-plot"));
    a->setEnabled(drawn);
    any = any || drawn;
    if (first) a->setShortcut(QKeySequence::Save);
    first = false;
  }
  if (tab == checkpoint_) {
    const int n = checkpoint_->model()->rowCount();
    QAction* table = export_menu_->addAction(
        n > 0 ? tr("Checkpoint table (%1) as CSV...")
                    .arg(n == 1 ? tr("1 tensor") : tr("%1 tensors").arg(n))
              : tr("Checkpoint table as CSV (no checkpoint analysed)"),
        this, [this] {
          const QString name = QFileInfo(checkpoint_->shownPath()).completeBaseName();
          const QString path =
              save_dialog_(this, tr("Export the table"), name + QStringLiteral("-tensors.csv"),
                           tr("CSV (*.csv)"));
          if (path.isEmpty()) return;
          const QString err = checkpoint_->exportTable(path);
          if (err.isEmpty()) {
            showNotice(tr("wrote %1").arg(path));
          } else {
            showFailure(err);
          }
        });
    table->setObjectName(QStringLiteral("export-checkpoint-table"));
    table->setEnabled(n > 0);
    any = any || n > 0;
  }
  // The run shown, on the tabs that show it (and the Runs tab, which lists it).
  const bool run_tab = tab == overview_ || tab == scaling_ || tab == quantization_ || tab == runs_;
  const qint64 id = engine_->data().runId();
  if (run_tab) {
    if (!export_menu_->isEmpty()) export_menu_->addSeparator();
    QAction* csv = export_menu_->addAction(
        id > 0 ? tr("Run %1 as CSV...").arg(id) : tr("Run as CSV (no run shown)"), this, [this] {
          const qint64 run = engine_->data().runId();
          if (run <= 0) {
            showNotice(tr("no run is shown: start one, or open one in the Runs tab"));
            return;
          }
          const QString path = save_dialog_(
              this, tr("Export run"), QStringLiteral("run%1.csv").arg(run), tr("CSV (*.csv)"));
          if (path.isEmpty()) return;
          bool failed = false;  // a failure comes through the tab's failed()
          const auto c = connect(runs_, &RunsTab::failed, this, [&failed] { failed = true; });
          const QString said = runs_->exportCsv(run, path);
          disconnect(c);
          if (!failed) showNotice(said);
        });
    csv->setObjectName(QStringLiteral("export-run-csv"));
    csv->setShortcut(QKeySequence(tr("Ctrl+Shift+S")));
    csv->setEnabled(id > 0);
    any = any || id > 0;
  }
  export_menu_->setTitle(any ? tr("&Export from %1").arg(tab_name)
                             : tr("&Export (nothing on the %1 tab)").arg(tab_name));
  export_menu_->menuAction()->setEnabled(any);
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

void MainWindow::sayInStatusBar(const QString& message) {
  said_ = message;
  said_shown_ = message;
  // The room left of the permanent label (the database, the run), as QStatusBar clips its
  // message there; before the window shows, its layout is not known: showEvent() says it
  // again.
  if (isVisible()) {
    int right = statusBar()->width();
    for (QWidget* w : {static_cast<QWidget*>(run_status_), back_button_})
      if (w->isVisible()) right = std::min(right, w->geometry().left());
    const int room = right - 24;
    if (room > 0)
      said_shown_ = statusBar()->fontMetrics().elidedText(message, Qt::ElideRight, room);
  }
  statusBar()->setToolTip(said_shown_ != message ? message : QString());
  statusBar()->showMessage(said_shown_, 20000);
}

bool MainWindow::saying() const {
  const QString m = statusBar()->currentMessage();
  return !m.isEmpty() && m == said_shown_;
}

void MainWindow::noteFailure(const QString& message) {
  sayInStatusBar(message);
  failures_ << message;
  while (failures_.size() > 20) failures_.removeFirst();
}

void MainWindow::showFailure(const QString& message) {
  noteFailure(message);
  // One message, not one a failure. Modal to the window, so that nothing is clicked
  // behind it unseen, but shown, not exec()'d: a run, a sweep go on behind it.
  if (!failure_box_) {
    failure_box_ = new QMessageBox(QMessageBox::Warning, tr("FP8 Workbench"), QString(),
                                   QMessageBox::Close, this);
    failure_box_->setWindowModality(Qt::WindowModal);
    connect(failure_box_, &QMessageBox::finished, this, &MainWindow::recheckDatabase);
  }
  failure_box_->setText(message);
  failure_box_->show();
}

void MainWindow::clearFailureMessage() {
  if (!failures_.isEmpty() && saying() && said_ == failures_.last()) {
    statusBar()->clearMessage();
    statusBar()->setToolTip(QString());
  }
}

void MainWindow::showEvent(QShowEvent* e) {
  QMainWindow::showEvent(e);
  // A message shown before the window was (a --db that cannot be opened, said at start-up)
  // did not hide the status bar's labels, which were not visible yet: shown again now, it
  // does, instead of being drawn over them.
  if (saying()) {
    statusBar()->clearMessage();
    sayInStatusBar(said_);  // cut to the room it now has
  }
}

bool MainWindow::eventFilter(QObject* watched, QEvent* e) {
  switch (e->type()) {
    case QEvent::Move:
    case QEvent::Resize:
    case QEvent::Show:
    case QEvent::Hide:
      // After the status bar's layout has placed them all.
      if (!resay_pending_ && saying()) {
        resay_pending_ = true;
        QTimer::singleShot(0, this, [this] {
          resay_pending_ = false;
          if (saying()) sayInStatusBar(said_);
        });
      }
      break;
    default: break;
  }
  return QMainWindow::eventFilter(watched, e);
}

void MainWindow::resizeEvent(QResizeEvent* e) {
  QMainWindow::resizeEvent(e);
  if (saying()) sayInStatusBar(said_);  // cut to the room it now has
}

void MainWindow::showNotice(const QString& message) {
  // What is said without failing (GEMMs emulated, layers kept in high precision, a
  // sweep's end) goes to the status bar, the latest first, and stays in the run label's
  // tooltip.
  sayInStatusBar(message);
  notices_ << message;
  while (notices_.size() > 20) notices_.removeFirst();
  run_status_->setToolTip(notices_.join(QLatin1Char('\n')));
}

QString MainWindow::statusText() const {
  QStringList parts;
  for (QLabel* l : statusBar()->findChildren<QLabel*>()) parts << l->text();
  return parts.join(QStringLiteral(" · "));
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
