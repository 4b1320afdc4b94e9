// defines: MainWindow and its run database: File > Open database (openDatabaseFile()),
// the database given at start-up checked (checkDatabase()) and checked again as the window
// is activated or a failure closed (recheckDatabase()).
#include <QEvent>
#include <QFile>
#include <QFileInfo>

#include "fp8wb/core/checkpoint/file_io.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"
#include "main_window.h"

namespace fp8wb {

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

}  // namespace fp8wb
