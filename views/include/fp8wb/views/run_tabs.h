// defines: OverviewTab, ScalingTab, QuantizationTab: the live tabs of a run, drawn from
// RunData. refresh() replots only when the tab is visible and the data changed.
#pragma once

#include <QWidget>
#include <vector>

#include "fp8wb/core/role.h"

class QComboBox;
class QLabel;
class QTreeWidget;
class QCPColorMap;
class QCPColorScale;
class QCPBars;
class QCPItemRect;
class QCPItemStraightLine;

namespace fp8wb {

class ExportablePlot;
class RunData;

class RunTabBase : public QWidget {
  Q_OBJECT
 public:
  RunTabBase(const RunData* run, QWidget* parent);
  // Replots if visible and the data changed since the last replot (or force).
  void refresh(bool force = false);
  virtual std::vector<ExportablePlot*> plots() const = 0;
  void setPresentationMode(bool on);

 protected:
  void showEvent(QShowEvent* e) override;
  virtual void rebuild() = 0;
  const RunData* data_;

 private:
  int64_t drawn_revision_ = -1;
};

class OverviewTab : public RunTabBase {
  Q_OBJECT
 public:
  OverviewTab(const RunData* run, QWidget* parent = nullptr);
  std::vector<ExportablePlot*> plots() const override { return {loss_, gap_, speed_, memory_}; }
  QString summaryText() const;
  // The peak-memory bars as drawn: (label, bytes) each.
  std::vector<std::pair<QString, double>> memoryBars() const;

 protected:
  void rebuild() override;

 private:
  QLabel* summary_;
  ExportablePlot *loss_, *gap_, *speed_, *memory_;
  QCPBars* memory_bars_;
};

class ScalingTab : public RunTabBase {
  Q_OBJECT
 public:
  ScalingTab(const RunData* run, QWidget* parent = nullptr);
  std::vector<ExportablePlot*> plots() const override { return {amax_, scale_, counts_}; }
  // Selects a tensor by layer and role; false if the run has no such series.
  bool select(const QString& layer, const QString& role);

 protected:
  void rebuild() override;

 private:
  void rebuildTree();
  void drawSelected();
  QTreeWidget* tree_;
  QLabel* caption_;
  ExportablePlot *amax_, *scale_, *counts_;
  QCPItemRect* window_ = nullptr;
  QString layer_;
  Role role_ = Role::Input;
  size_t tree_size_ = 0;
};

class QuantizationTab : public RunTabBase {
  Q_OBJECT
 public:
  QuantizationTab(const RunData* run, QWidget* parent = nullptr);
  std::vector<ExportablePlot*> plots() const override { return {heat_, hist_, blocks_}; }

 protected:
  void rebuild() override;

 private:
  void refillChoices();
  QComboBox *metric_, *role_, *tensor_;
  QLabel* caption_;
  ExportablePlot *heat_, *hist_, *blocks_;
  QCPColorMap *heat_map_, *block_map_;
  QCPBars* bars_;
  QCPItemRect* band_ = nullptr;
  size_t tensors_seen_ = 0;
};

}  // namespace fp8wb
