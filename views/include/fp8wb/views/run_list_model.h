// defines: RunListModel: the runs in the database as a table (id, name, status, steps,
// final loss, loss gap, device, start), live runs marked.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "fp8wb/core/final_loss.h"
#include "fp8wb/core/run_store.h"

namespace fp8wb {

class RunListModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  // Source: who wrote the run (runs.kind: "train", "sweep-trial", "python" for a watched
  // script).
  enum Column { Id, Name, Status, Steps, Loss, Gap, Device, Started, Source, ColumnCount };
  explicit RunListModel(QObject* parent = nullptr);
  void setRuns(std::vector<RunInfo> runs, std::vector<FinalLoss> finals);
  const RunInfo* runAt(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<RunInfo> runs_;
  std::vector<FinalLoss> finals_;
};

}  // namespace fp8wb
