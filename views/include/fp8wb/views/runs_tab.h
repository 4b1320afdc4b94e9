// defines: RunListModel, RunsTab, RunPanel: the runs in the database (open, overlay,
// rename, delete, export CSV), and the panel that starts runs (presets, a form for the
// config with inline validation, Start / Pause / Stop, progress and ETA).
#pragma once

#include <QAbstractTableModel>
#include <QWidget>
#include <vector>

#include "fp8wb/core/run_config.h"
#include "fp8wb/core/run_store.h"

class QTableView;
class QLabel;
class QComboBox;
class QSpinBox;
class QDoubleSpinBox;
class QCheckBox;
class QLineEdit;
class QPushButton;
class QProgressBar;

namespace fp8wb {

class ExportablePlot;
class EngineController;

// Adds a run's loss curve (finite points) to a plot as a graph named `name`, in the
// n-th colour of the overlay palette. Throws StoreError.
void add_loss_curve(ExportablePlot* plot, const RunStore& store, int64_t run_id,
                    const QString& name, int n);

class RunListModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Id, Name, Status, Steps, Loss, Device, Started, ColumnCount };
  explicit RunListModel(QObject* parent = nullptr);
  void setRuns(std::vector<RunInfo> runs, std::vector<double> final_loss);
  const RunInfo* runAt(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

 private:
  std::vector<RunInfo> runs_;
  std::vector<double> loss_;
};

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

class RunPanel : public QWidget {
  Q_OBJECT
 public:
  RunPanel(EngineController* engine, QWidget* parent = nullptr);
  static QStringList presetNames();
  QString presetName() const;
  // Loads a preset into the form; false for an unknown name.
  bool applyPreset(const QString& name);
  RunConfig config() const;  // the form's contents
  void setSteps(int64_t steps);
  // Sets fields of the form as key=value would in a config (device=cuda:0, d_model=512);
  // returns the error naming the field, or empty.
  QString applyOverrides(const QStringList& key_values);
  void setConfig(const RunConfig& c);  // fills the form
  QString validationMessage() const;
  QString statusText() const;
  // Starts the form's run; returns an error message or empty.
  QString start();
  // Sets one of the fields the main form does not show (batch, context, ...), as
  // key=value would; returns the error shown beside it, or empty.
  QString setAdvanced(const QString& key, const QString& value);

 private:
  void validate();
  void setRunning(bool running);
  void showAdvancedValues();
  std::vector<std::pair<QString, QLineEdit*>> advanced_;
  QLabel* advanced_error_;
  EngineController* engine_;
  RunConfig base_;  // the preset's fields that the form does not show (batch, widths...)
  QComboBox *preset_, *model_, *recipe_, *formats_, *scaling_, *algo_, *device_;
  QSpinBox *steps_, *margin_, *window_, *seed_, *stats_, *dmodel_, *layers_;
  QDoubleSpinBox* lr_;
  QCheckBox *fprop_, *dgrad_, *wgrad_, *fp8_, *reference_;
  QLineEdit* name_;
  QLabel *error_, *eta_;
  QPushButton *start_, *pause_, *stop_;
  QProgressBar* progress_;
};

}  // namespace fp8wb
