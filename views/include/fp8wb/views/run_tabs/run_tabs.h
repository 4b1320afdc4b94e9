// defines: OverviewTab, ScalingTab, QuantizationTab: the live tabs of a run, drawn from
// RunData. refresh() replots only when the tab is visible and the data changed; the
// curves that follow a live run get its new points appended (DrawnPoints, StepCurve).
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>
#include <cstdint>
#include <iterator>
#include <vector>

#include "fp8wb/core/metrics.h"
#include "fp8wb/core/role.h"
#include "fp8wb/kernels/delayed_scaling.h"

class QCheckBox;
class QComboBox;
class QSpinBox;
class QLabel;
class QTreeWidget;
class QCPColorMap;
class QCPColorScale;
class QCPBars;
class QCPItemRect;
class QCPItemStraightLine;
class QCPGraph;

namespace fp8wb {

class ExportablePlot;
class RunData;

// How many points of which series (a RunData generation and a key naming the selection)
// a tab has drawn.
class DrawnPoints {
 public:
  // Records that `size` points are drawn now; true, with `from` the first new one, where
  // the last drawing was of the same series (append from there), else false and 0 (draw
  // everything anew).
  bool append_from(int64_t generation, const QString& key, size_t size, size_t& from);

 private:
  int64_t generation_ = -1;
  QString key_;
  size_t count_ = 0;
};

// A step series on a graph, with crosses for its non-finite values.
struct StepCurve {
  StepCurve(QCPGraph* g = nullptr, QCPGraph* m = nullptr) : graph(g), markers(m) {}
  QCPGraph* graph;
  QCPGraph* markers;  // optional
  // Draws steps[from..] (from 0: anew) of the value `get` returns.
  template <class Get>
  void draw(const std::vector<StepMetrics>& steps, size_t from, Get get);

 private:
  double top_ = 0;  // the largest finite value drawn
  QVector<double> marker_x_;
};

class RunTabBase : public QWidget {
  Q_OBJECT
 public:
  RunTabBase(const RunData* run, QWidget* parent);
  // Replots if visible and the data changed since the last replot (or force).
  void refresh(bool force = false);
  virtual std::vector<ExportablePlot*> plots() const = 0;

 protected:
  void showEvent(QShowEvent* e) override;
  virtual void rebuild() = 0;
  // What a plot shows once the run has some ("steps", "tensor statistics"), for the hint
  // an empty plot carries instead of axes that look like data (ExportablePlot::setEmptyHint).
  virtual QString contentOf(const ExportablePlot* plot) const;
  // That hint: no run open; what a running run has not stored yet; what an ended one
  // stored none of.
  virtual QString emptyHintFor(const ExportablePlot* plot) const;
  const RunData* data_;

 private:
  int64_t drawn_revision_ = -1;
};

// The run's summary and its per-step plots: one plot for each kStepSeries row marked
// StepTab::Overview without a `plot`, every such row drawn as a curve on its plot (the
// series it knows with their own looks, run_tab_overview.cpp's kLooks; a new one plainly),
// and the peak-memory bars.
class OverviewTab : public RunTabBase {
  Q_OBJECT
 public:
  // `series`: the table it draws the rows marked StepTab::Overview of (a test gives its own).
  explicit OverviewTab(const RunData* run, QWidget* parent = nullptr,
                       std::vector<StepSeries> series = {std::begin(kStepSeries),
                                                         std::end(kStepSeries)});
  // The step plots in kStepSeries' order (loss, loss gap, tokens/s), then the memory bars.
  std::vector<ExportablePlot*> plots() const override;
  // The curve of the kStepSeries row named `series`, nullptr where the tab draws none.
  QCPGraph* seriesGraph(const char* series) const;
  QString summaryText() const;
  // The peak-memory bars as drawn: (label, bytes) each.
  std::vector<std::pair<QString, double>> memoryBars() const;

 protected:
  void rebuild() override;
  QString contentOf(const ExportablePlot* plot) const override;
  QString emptyHintFor(const ExportablePlot* plot) const override;

 private:
  // A kStepSeries row drawn here: its plot and curve.
  struct SeriesCurve {
    const StepSeries* series;
    ExportablePlot* plot;
    StepCurve curve;
  };
  const SeriesCurve* curveOf(const char* series) const;
  ExportablePlot* plotOf(const char* series) const;
  std::vector<StepSeries> series_;
  QLabel* summary_;
  std::vector<ExportablePlot*> step_plots_;  // a plot per row with a plot of its own
  std::vector<SeriesCurve> curves_;          // in kStepSeries' order
  ExportablePlot *loss_, *gap_, *speed_, *memory_;
  QCPBars* memory_bars_;
  DrawnPoints drawn_;
};

class ScalingTab : public RunTabBase {
  Q_OBJECT
 public:
  ScalingTab(const RunData* run, QWidget* parent = nullptr);
  // The ranks' plots only where they are shown (a data-parallel run of 2 ranks or more).
  std::vector<ExportablePlot*> plots() const override;
  // Selects a tensor by layer and role; false if the run has no such series.
  bool select(const QString& layer, const QString& role);
  // Every rank's amax and scale of the selected tensor, a curve a rank (graph i: the
  // i-th rank in rank order); hidden for a run of one rank.
  ExportablePlot* rankAmaxPlot() const { return rank_amax_; }
  ExportablePlot* rankScalePlot() const { return rank_scale_; }
  // The tensor drawn ("layer / role"), empty when none.
  QString selectedTensor() const;
  QString captionText() const;
  // What if: the selected tensor's "amax the scale maps to max" as delayed scaling with
  // this margin, window and algorithm would have set it, replayed from the run's every
  // step's amax (core/replay/replay.h), drawn beside the real one (graph 2 of amaxPlot(), every
  // step's amax graph 3). Off, or a run without per-step amax: neither is drawn.
  void setWhatIf(bool on, int margin, int window, AmaxAlgo algo);
  ExportablePlot* amaxPlot() const { return amax_; }
  QString whatIfText() const;

 protected:
  void rebuild() override;
  QString contentOf(const ExportablePlot*) const override { return tr("tensor statistics"); }

 private:
  void drawWhatIf();
  void rebuildTree();
  void selectInTree();
  // The selected tensor's amax, scale and shares, the window band and the caption; its
  // steps:
  void drawSelected();
  // No statistics of the selected tensor: the plots emptied, the caption saying why.
  void showNoStatistics();
  // Where the run recorded every step's amax of the selected tensor: the amax and the
  // orange line drawn for every step, the run's own scaling replayed.
  void drawEveryStepAmax(double fmax, bool delayed, int window, int margin, bool skip0);
  // The caption: the last sampled step's format, amax, scale, headroom and what they mean.
  void describeSelected(const TensorMetrics& last, bool delayed, int window, int margin);
  void fitAxes();
  void drawRanks();
  QTreeWidget* tree_;
  QLabel* caption_;
  QCheckBox* include_step0_;
  ExportablePlot *amax_, *scale_, *counts_;
  ExportablePlot *rank_amax_, *rank_scale_;
  QCPItemRect* window_ = nullptr;
  QCheckBox* what_if_ = nullptr;
  QSpinBox *what_if_margin_ = nullptr, *what_if_window_ = nullptr;
  QComboBox* what_if_algo_ = nullptr;
  QLabel* what_if_text_ = nullptr;
  int64_t what_if_run_ = -1;  // the run the controls were set from
  QString layer_;
  Role role_ = Role::Input;
  size_t tree_size_ = 0;
  int64_t tree_generation_ = -1;  // the RunData generation the tree and selection are of
  DrawnPoints drawn_;
};

class QuantizationTab : public RunTabBase {
  Q_OBJECT
 public:
  QuantizationTab(const RunData* run, QWidget* parent = nullptr);
  std::vector<ExportablePlot*> plots() const override { return {heat_, hist_, blocks_}; }
  QString captionText() const;

 protected:
  void rebuild() override;
  QString contentOf(const ExportablePlot*) const override { return tr("tensor statistics"); }

 private:
  void refillChoices();
  // The layers x sampled steps heatmap of the chosen figure and role, and its CSV.
  void drawHeatmap();
  // The chosen tensor's last sampled step: its exponent histogram beside the format's
  // range, its block error map and the caption.
  void drawChosenTensor();
  QComboBox *metric_, *role_, *tensor_;
  QComboBox* range_ = nullptr;  // the colour scales' range (both maps): auto or fixed
  QCheckBox* include_step0_;
  QLabel* caption_;
  ExportablePlot *heat_, *hist_, *blocks_;
  QCPColorMap *heat_map_, *block_map_;
  QCPBars* bars_;
  QCPItemRect* band_ = nullptr;
  size_t tensors_seen_ = 0;
  int64_t choices_generation_ = -1;  // the RunData generation the tensor choices are of
};

}  // namespace fp8wb
