// defines: CheckpointModel, CheckpointTab: the Checkpoint tab. Open a checkpoint (dialog,
// drag and drop, recent files); it is opened and analysed on a pool thread with progress
// and cancel; a sortable, filterable table of its tensors (worst SQNR first); for the
// selected tensor the log2 histogram against each format's range, the recipe x format
// comparison (scalings down the side, one bar per format, the recommended and the
// selected recipe marked) and the block error map of a chosen recipe. Before any file is
// open (or after one that could not be read) a placeholder says what to do instead. The
// table's context menu exports it as CSV.
#pragma once

#include <QAbstractTableModel>
#include <QElapsedTimer>
#include <QWidget>
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/views/common/background_job.h"

class QTableView;
class QLabel;
class QLineEdit;
class QMenu;
class QComboBox;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QStackedWidget;
class QCPBars;
class QCPColorMap;
class QCPColorScale;

namespace fp8wb {

class CheckpointEvalDialog;

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
    NonFinite,
    Recommended,
    RecommendedUnderflow,  // the share of nonzero values the recommended recipe turns into 0
    Best,
    BestSqnr,
    TensorwiseSqnr,
    ColumnCount
  };
  explicit CheckpointModel(QObject* parent = nullptr);
  void setTensors(std::vector<TensorAnalysis> t);
  const TensorAnalysis* tensorAt(int row) const;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;
  // What the table's cells say only in part, for the CSV: why the row's tensor has its
  // recommendation (or none), whole, and the recommended recipe's SQNR ("-" where none).
  QString recommendationReason(int row) const;
  QString recommendedSqnr(int row) const;
  // The recipe chosen for the block error map: cells naming it are highlighted.
  void setSelectedRecipe(const QString& name);
  QString selectedRecipe() const { return selected_; }

 private:
  std::vector<TensorAnalysis> tensors_;
  QString selected_;
};

class CheckpointTab : public QWidget {
  Q_OBJECT
 public:
  explicit CheckpointTab(QWidget* parent = nullptr);
  ~CheckpointTab() override;
  // Opens and analyses a checkpoint on a pool thread; returns at once.
  // checkpointLoaded() or failed() (a file that cannot be opened, one being analysed
  // already) follow. The run database (setRunDatabase()), one of its SQLite files or a
  // sharded checkpoint with one of them as a shard, by any path, is refused before it is
  // opened (run_database_guard.h says why), and what is shown stays.
  void openCheckpoint(const QString& path);
  // Where the run database this process has open is (read at each open).
  void setRunDatabase(std::function<QString()> path) { run_database_ = std::move(path); }
  // The checkpoint the table and plots show; empty where none is.
  QString shownPath() const { return path_; }
  // "Evaluate loss...": enabled for a checkpoint with a config.json beside it; opens the
  // evaluation window (checkpoint_eval_dialog.h) for it and returns it.
  QPushButton* evaluateButton() const { return evaluate_; }
  CheckpointEvalDialog* openEvaluation();
  void cancel();
  bool busy() const { return job_.busy(); }
  CheckpointModel* model() const { return model_; }
  QSortFilterProxyModel* proxy() const { return proxy_; }
  void selectTensor(const QString& name);
  std::vector<ExportablePlot*> plots() const { return {hist_, chart_, blocks_}; }
  // Whether the placeholder ("Open a checkpoint ...") shows instead of table and plots.
  bool showsPlaceholder() const;
  // The recipe chosen for the block error map (the recommended one until another is).
  QString selectedRecipe() const;
  void selectRecipe(const QString& name);
  QStringList recentFiles() const;
  // Takes a file off the recent files (one that no longer exists).
  void forgetRecent(const QString& path);
  // The recent checkpoints list read again from the settings that File > Recent files
  // reads too (the files still there), e.g. after another window changed it.
  void refreshRecent();
  QString statusText() const;
  // The table as CSV: every tensor (those the filter hides too), in the table's order, the
  // columns shown, each cell's text as shown; a header of the columns' names.
  QString tableCsv() const;
  // Writes tableCsv() to `path`: an empty string on success, else what went wrong.
  QString exportTable(const QString& path) const;
  // The table's context menu ("Export CSV…"); the caller shows it, or reads its actions.
  QMenu* tableMenu();

 Q_SIGNALS:
  void checkpointLoaded(const QString& path, int tensors);
  void failed(const QString& message);
  void notice(const QString& message);

 protected:
  void dragEnterEvent(QDragEnterEvent* e) override;
  void dropEvent(QDropEvent* e) override;
  void showEvent(QShowEvent* e) override;
  bool eventFilter(QObject* watched, QEvent* e) override;

 private:
  // The constructor's steps (checkpoint_tab.cpp).
  QPushButton* buildControls();
  void setUpPlots();
  void buildLayout(QPushButton* open);
  void showTensor(const TensorAnalysis* t);
  // showTensor()'s steps (checkpoint_plots.cpp).
  void clearFigures();
  void drawHistogram(const TensorAnalysis& t);
  void drawChart(const TensorAnalysis& t);
  void drawBlockMap(const TensorAnalysis& t);
  void showCaption(const TensorAnalysis& t);
  // `note`: said after the status line's count (a sharded set's tensors outside its index);
  // `cut_off`: the tensors a truncated file cuts off (said once, not only in their rows).
  void finishLoad(const QString& path, std::vector<TensorAnalysis> result, bool cancelled,
                  const QString& note = {}, int cut_off = 0);
  void showBusy(bool busy);
  // A checkpoint that could not be opened or analysed: `text` in the status line and
  // failed(), what was shown before kept.
  void refuse(const QString& text);
  void remember(const QString& path);
  void fillRecent(const QStringList& paths, int current);
  // The recent files' box names the checkpoint shown (none: its placeholder).
  void selectShownInRecent();
  // Why `path` must not be opened here (it is a file of the run database), or empty.
  QString refusal(const QString& path) const;
  QComboBox* recent_;
  QLineEdit* filter_;
  QLabel* status_;
  QProgressBar* progress_;
  QPushButton* cancel_;
  QPushButton* evaluate_;
  CheckpointModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  QComboBox* recipe_;
  QComboBox* range_ = nullptr;  // the block map's colour range: auto or fixed
  QLabel* caption_;
  ExportablePlot *hist_, *chart_, *blocks_;
  QCPBars* hist_bars_;
  std::vector<QCPBars*> chart_bars_;  // one per format, rebuilt for each tensor
  QCPColorMap* block_map_;
  QCPColorScale* block_scale_;
  QStackedWidget* pages_;  // the placeholder, or the table and plots
  QMenu* table_menu_ = nullptr;
  QString path_;  // the checkpoint shown
  std::atomic<bool> cancel_flag_{false};
  QElapsedTimer elapsed_;  // since the analysis started
  const TensorAnalysis* shown_ = nullptr;
  std::function<QString()> run_database_;
  BackgroundJob job_{this};  // opens and analyses
};

}  // namespace fp8wb
