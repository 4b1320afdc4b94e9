// defines: CheckpointModel, CheckpointTab: the Checkpoint tab. Open a checkpoint (dialog,
// drag and drop, recent files); it is opened and analysed on a pool thread with progress
// and cancel; a sortable, filterable table of its tensors (worst SQNR first); for the
// selected tensor the log2 histogram against each format's range, the recipe x format
// comparison and the block error map of a chosen recipe.
#pragma once

#include <QAbstractTableModel>
#include <QElapsedTimer>
#include <QWidget>
#include <atomic>
#include <memory>
#include <vector>

#include "fp8wb/core/checkpoint_analysis.h"
#include "fp8wb/views/background_job.h"

class QTableView;
class QLabel;
class QLineEdit;
class QComboBox;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QCPBars;
class QCPColorMap;

namespace fp8wb {

class ExportablePlot;

class CheckpointModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Name,
    Dtype,
    Shape,
    Amax,
    Range,
    Best,
    BestSqnr,
    TensorwiseSqnr,
    Recommended,
    ColumnCount
  };
  explicit CheckpointModel(QObject* parent = nullptr);
  void setTensors(std::vector<TensorAnalysis> t);
  const TensorAnalysis* tensorAt(int row) const;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<TensorAnalysis> tensors_;
};

class CheckpointTab : public QWidget {
  Q_OBJECT
 public:
  explicit CheckpointTab(QWidget* parent = nullptr);
  ~CheckpointTab() override;
  // Opens and analyses a checkpoint on a pool thread; returns at once.
  // checkpointLoaded() or failed() (a file that cannot be opened, one being analysed
  // already) follow.
  void openCheckpoint(const QString& path);
  void cancel();
  bool busy() const { return job_.busy(); }
  CheckpointModel* model() const { return model_; }
  QSortFilterProxyModel* proxy() const { return proxy_; }
  void selectTensor(const QString& name);
  std::vector<ExportablePlot*> plots() const { return {hist_, chart_, blocks_}; }
  QStringList recentFiles() const;
  // Takes a file off the recent files (one that no longer exists).
  void forgetRecent(const QString& path);
  QString statusText() const;

 Q_SIGNALS:
  void checkpointLoaded(const QString& path, int tensors);
  void failed(const QString& message);
  void notice(const QString& message);

 protected:
  void dragEnterEvent(QDragEnterEvent* e) override;
  void dropEvent(QDropEvent* e) override;

 private:
  void showTensor(const TensorAnalysis* t);
  void finishLoad(const QString& path, std::vector<TensorAnalysis> result, bool cancelled);
  void showBusy(bool busy);
  void remember(const QString& path);
  QComboBox* recent_;
  QLineEdit* filter_;
  QLabel* status_;
  QProgressBar* progress_;
  QPushButton* cancel_;
  CheckpointModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  QComboBox* recipe_;
  QLabel* caption_;
  ExportablePlot *hist_, *chart_, *blocks_;
  QCPBars *hist_bars_, *chart_bars_;
  QCPColorMap* block_map_;
  std::atomic<bool> cancel_flag_{false};
  QElapsedTimer elapsed_;  // since the analysis started
  const TensorAnalysis* shown_ = nullptr;
  BackgroundJob job_{this};  // opens and analyses
};

}  // namespace fp8wb
