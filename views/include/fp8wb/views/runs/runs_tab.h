// defines: RunsTab: the runs in the database (open, overlay, rename, delete, export CSV),
// the list following the database while the tab is shown; the list and the curves are
// read on a pool thread.
#pragma once

#include <QWidget>
#include <vector>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/common/background_job.h"
#include "fp8wb/views/runs/run_list_model.h"

class QTableView;
class QTimer;
class QLabel;
class QPushButton;

class QTimer;

namespace fp8wb {

class ExportablePlot;
class EngineController;

class RunsTab : public QWidget {
  Q_OBJECT
 public:
  RunsTab(EngineController* engine, QWidget* parent = nullptr);
  RunListModel* model() const { return model_; }
  ExportablePlot* overlayPlot() const { return overlay_; }
  // Reads the list (with each run's final loss) on a pool thread: reloaded() (or failed())
  // follows; a newer reload supersedes one still reading. A list that cannot be read
  // leaves the table empty with the reason in the status line, and is said by failed()
  // once a database (again once another database is set).
  void reload();
  // reload(), unless a read is under way (the tab does this once a second while it is
  // shown, so runs that other processes write appear and move).
  void refreshInBackground();
  // How often the shown tab polls the database (1000 ms unless set; tests set a short one
  // and wait for polls instead of sleeping), and how many reads its polls have started (a
  // poll while a read is under way starts none).
  void setPollInterval(int ms);
  int pollInterval() const;
  int pollReads() const { return poll_reads_; }
  bool isReading() const { return list_job_.busy(); }
  QString statusText() const;
  // Draws the loss curves of these runs together, read on a pool thread: curvesShown()
  // (or failed()) follows.
  void overlay(const std::vector<int64_t>& ids);
  // Returns what it did ("wrote run N to PATH") or why it could not (failed() says it
  // too).
  QString exportCsv(int64_t id, const QString& path);

 Q_SIGNALS:
  void openRequested(qint64 run_id);
  void reloaded();
  void curvesShown();
  void failed(const QString& message);

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  std::vector<int64_t> selectedIds() const;
  void selectIds(const std::vector<int64_t>& ids);
  QString fail(const QString& message);
  // "a trial of sweep #3 "NAME", ...": what the delete question says of a sweep's trial.
  QString sweepOf(int64_t sweep_id);
  // Rename and Delete disabled, with the reason as their tooltip, while the database is
  // read-only (EngineController::readOnlyReason()).
  void updateWriteButtons();
  EngineController* engine_;
  RunListModel* model_;
  QTableView* view_;
  ExportablePlot* overlay_;
  QLabel* status_;
  QPushButton* rename_ = nullptr;
  QPushButton* delete_ = nullptr;
  std::vector<int64_t> overlaid_;  // the runs whose curves are drawn
  QString overlaid_names_;         // and their names, as drawn
  // Their steps and status when drawn: a live run's curve is read again as it grows.
  QString overlaid_state_;
  QTimer* poll_ = nullptr;          // reads the list again while the tab is shown
  int poll_reads_ = 0;              // reads the poll started
  QString unreadable_said_;         // the database whose list failed() said it cannot read
  BackgroundJob list_job_{this};    // reads of the list
  BackgroundJob curves_job_{this};  // reads of the overlaid curves
};

}  // namespace fp8wb
