// defines: RunListModel: the runs in the database as a table (id, name, recipe, scaling,
// margin, window, status, steps, final loss, loss gap, device, start), newest first, live
// runs marked.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <string>
#include <vector>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/final_loss.h"

namespace fp8wb {

class RunListModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  // Source: who wrote the run (runs.kind: "train", "sweep-trial", "python" for a watched
  // script).
  // Model, Recipe, Scaling, Margin, Window: from the run's config (what tells runs of one
  // preset apart).
  enum Column {
    Id,
    Name,
    Model,
    Recipe,
    Scaling,
    Margin,
    Window,
    Status,
    Steps,
    Loss,
    Gap,
    Device,
    Started,
    Source,
    ColumnCount
  };
  explicit RunListModel(QObject* parent = nullptr);
  // The runs (with their final losses, one a run), shown newest (highest id) first.
  void setRuns(std::vector<RunInfo> runs, std::vector<FinalLoss> finals);
  const RunInfo* runAt(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<RunInfo> runs_;
  std::vector<FinalLoss> finals_;
  struct Settings {
    QString model, recipe, scaling, margin, window;
  };
  static Settings settings_of(const std::string& config_json);
  std::vector<Settings> settings_;  // each run's, read from its config
};

}  // namespace fp8wb
