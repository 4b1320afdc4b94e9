// defines: RunsTab, add_loss_curve(): the runs in the database (open, overlay, rename,
// delete, export CSV), the list following the database while the tab is shown.
#pragma once

#include <QWidget>
#include <vector>

#include "fp8wb/core/run_store.h"
#include "fp8wb/views/run_list_model.h"

class QTableView;
class QLabel;

namespace fp8wb {

class ExportablePlot;
class EngineController;

// Adds a run's loss curve (finite points) to a plot as a graph named `name`, in the
// n-th colour of the overlay palette. Throws StoreError.
void add_loss_curve(ExportablePlot* plot, const RunStore& store, int64_t run_id,
                    const QString& name, int n);

class RunsTab : public QWidget {
  Q_OBJECT
 public:
  RunsTab(EngineController* engine, QWidget* parent = nullptr);
  RunListModel* model() const { return model_; }
  ExportablePlot* overlayPlot() const { return overlay_; }
  // Reloads the list; returns an error message or empty.
  QString reload();
  // Draws the loss curves of these runs together.
  void overlay(const std::vector<int64_t>& ids);
  QString exportCsv(int64_t id, const QString& path);
  // Reads the list on a pool thread and shows it when it arrives (the tab does this once
  // a second while it is shown, so runs that other processes write appear and move).
  void refreshInBackground();

 Q_SIGNALS:
  void openRequested(qint64 run_id);

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  std::vector<int64_t> selectedIds() const;
  EngineController* engine_;
  RunListModel* model_;
  QTableView* view_;
  ExportablePlot* overlay_;
  QLabel* status_;
  bool refreshing_ = false;
};

}  // namespace fp8wb
