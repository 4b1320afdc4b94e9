// defines: MainWindow's menus: File (Open checkpoint, Open database, Recent files, Export,
// Quit), View (presentation mode, the run panel) and Help (Documentation, About).
#include <QAction>
#include <QApplication>
#include <QDialog>
#include <QDir>
#include <QDockWidget>
#include <QFileInfo>
#include <QImage>
#include <QMenuBar>
#include <QMessageBox>
#include <QRegularExpression>
#include <QSettings>
#include <QTabWidget>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/views/checkpoint/checkpoint_tab.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/file_dialogs.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_tabs/run_tabs.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"
#include "main_window.h"

namespace fp8wb {

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

}  // namespace fp8wb
