// SweepsTab's "Collect from folder…" (sweeps_tab.h): a cluster sweep's folder (`fp8wb
// sweep --slurm`) collected into the open database as a BackgroundJob, with a progress
// bar a trial; a folder that cannot be collected named with the problem in the GUI's
// terms, over the heatmap, which still shows the sweep before.
#include <QLabel>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <stdexcept>

#include "fp8wb/core/sweep/sweep_collect.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"

namespace fp8wb {

void SweepsTab::setFolderChooser(std::function<QString(QWidget*)> chooser) {
  folder_chooser_ = std::move(chooser);
}

void SweepsTab::collectFolder(const QString& dir) {
  const std::string folder = dir.toStdString();
  const std::string db = engine_->databasePath().toStdString();
  collect_->setEnabled(false);
  collect_failure_->setVisible(false);
  collect_failure_->clear();
  collecting_->setRange(0, 0);  // busy until the folder says how many trials it has
  collecting_->setVisible(true);
  status_->setText(tr("collecting %1…").arg(dir.toHtmlEscaped()));
  auto ended = [this] {
    collecting_->setVisible(false);
    updateWriteButtons();
  };
  collect_job_.run(
      [this, folder, db] {
        // The tab outlives this work (the job's destructor waits for it).
        try {
          return collect_sweep_folder(folder, db, [this](size_t done, size_t total) {
            QMetaObject::invokeMethod(
                this,
                [this, done, total] {
                  collecting_->setRange(0, static_cast<int>(total));
                  collecting_->setValue(static_cast<int>(done));
                },
                Qt::QueuedConnection);
          });
        } catch (const SweepNotInDatabase& e) {
          // Said as the workbench does it: another database is opened from the File menu.
          throw std::runtime_error(
              tr("the sweep in it (\"%1\") was submitted from the database %2, and the database "
                 "open here, %3, does not hold it. Open %2 (File > Open database...) and "
                 "collect the folder again.")
                  .arg(QString::fromStdString(e.sweep_name),
                       QString::fromStdString(e.submitted_from), QString::fromStdString(e.database))
                  .toStdString());
        }
      },
      [this, ended](SweepCollection c) {
        ended();
        trials_->clear();
        for (const CollectedTrial& t : c.trials) {
          QString line = QString::fromStdString(t.key) + QStringLiteral(": ") +
                         QString::fromStdString(t.state);
          if (!t.message.empty())
            line += QStringLiteral(" (") + QString::fromStdString(t.message) + QChar(')');
          trials_->addItem(line);
        }
        showTrialsOrHint();
        const std::string status(sweep_status_name(c.status));
        status_->setText(tr("sweep %1 (%2): %3 collected now, %4 still to come; %5")
                             .arg(c.sweep_id)
                             .arg(QString::fromStdString(c.sweep_name).toHtmlEscaped())
                             .arg(c.added)
                             .arg(c.waiting)
                             .arg(QString::fromStdString(status)));
        if (!c.problems.empty()) {
          QStringList problems;
          for (const std::string& p : c.problems) problems << QString::fromStdString(p);
          fail(tr("Some trials could not be collected: %1")
                   .arg(problems.join(QStringLiteral("; "))));
        }
        showSweep(c.sweep_id);
        refreshSweeps();  // lists it, chosen, once shown
        Q_EMIT collected(c.sweep_id, c.added, c.waiting);
      },
      [this, ended, dir](const QString& message) {
        ended();
        // The folder, then the problem (which may begin with the folder: "it" there).
        QString why = message.trimmed();
        if (why.startsWith(dir + QLatin1Char(' '))) why = tr("it") + why.mid(dir.size());
        if (!why.endsWith(QLatin1Char('.'))) why += QLatin1Char('.');
        const QString what = tr("Nothing was collected from the folder %1: %2").arg(dir, why);
        // Whatever the tab shows is the sweep from before: said over it, so that it is not
        // taken for this folder's.
        const QString shown =
            spec_.axes.empty()
                ? QString()
                : tr(" The heatmap and the list still show sweep %1 (\"%2\"), unchanged.")
                      .arg(sweep_id_)
                      .arg(QString::fromStdString(spec_.name));
        collect_failure_->setText(what + shown);
        collect_failure_->setVisible(true);
        status_->setText(tr("collecting %1 failed").arg(dir.toHtmlEscaped()));
        fail(what);
      });
}

}  // namespace fp8wb
