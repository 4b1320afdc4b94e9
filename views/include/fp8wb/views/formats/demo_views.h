// defines: GradientDemoView (E4M3 vs E5M2 on gradient-like values, a slider for the
// gradient scale), OutlierDemoView (per-tensor vs 1x128 scaling with outlier channels, a
// slider for the outlier factor), MasterWeightsDemoView (a weight's small updates in
// each format, sliders for the update and the step count) and LossScalingDemoView
// (dynamic loss scaling of a tiny model's gradients, sliders for the initial scale and
// the growth interval): the Formats tab's live demos.
#pragma once

#include <QWidget>
#include <vector>

#include "fp8wb/core/formats/demos.h"

class QSlider;
class QLabel;
class QComboBox;
class QCheckBox;
class QCPColorMap;
class QCPColorScale;
class QCPRange;

namespace fp8wb {

class ExportablePlot;

class GradientDemoView : public QWidget {
  Q_OBJECT
 public:
  explicit GradientDemoView(QWidget* parent = nullptr);
  // log2 of the gradient scale (a loss scale), -8..24.
  void setScaleExponent(int k);
  void setPerTensorScaling(bool on);
  const GradientDemoResult& result() const { return result_; }
  ExportablePlot* histogramPlot() const { return hist_; }
  QString summaryText() const;

 private:
  void rerun();
  QSlider* slider_;
  QLabel* slider_label_;
  QCheckBox* scaled_;
  ExportablePlot* hist_;
  QLabel* summary_;
  GradientDemoResult result_;
};

class OutlierDemoView : public QWidget {
  Q_OBJECT
 public:
  explicit OutlierDemoView(QWidget* parent = nullptr);
  // log10 of the outlier factor times 4 (0..20: k = 1 .. 1e5).
  void setFactorStep(int step);
  void setFormat(Format f);
  const OutlierDemoResult& result() const { return result_; }
  ExportablePlot* errorPlot() const { return curve_; }
  ExportablePlot* mapPlot() const { return maps_; }
  // The maps' colour range box (make_colour_range_box(): auto, this k's own lowest to
  // highest, or fixed, over every k of the slider) and the range the maps now span.
  QComboBox* colourRangeBox() const { return range_; }
  QCPRange colourRange() const;
  QString summaryText() const;  // the figures at the slider's k, then the footer
  // A reference result's figures beside this tensor's, and why they differ.
  QString footerText() const;

 private:
  void rerun();
  void rebuildCurve();
  QSlider* slider_;
  QLabel* slider_label_;
  QComboBox* format_;
  ExportablePlot* curve_;
  ExportablePlot* maps_;
  QCPColorMap* map_tensor_;
  QCPColorMap* map_block_;
  QCPColorScale* color_scale_;
  QComboBox* range_;
  // The fixed range: log10 error over every k of the slider (none before it is known).
  bool has_fixed_range_ = false;
  double fixed_lo_ = 0, fixed_hi_ = 0;
  QLabel* summary_;
  QLabel* footer_;
  OutlierDemoResult result_;
  OutlierDemoResult curve_data_;
  OutlierDemoResult reference_;  // at the reference result's factors
};

class MasterWeightsDemoView : public QWidget {
  Q_OBJECT
 public:
  explicit MasterWeightsDemoView(QWidget* parent = nullptr);
  // The update is 10^(step / 4), step -20..-4 (1e-5 .. 0.1; -12 is 1e-3).
  void setUpdateStep(int step);
  // Steps in hundreds, 1..50.
  void setStepsHundreds(int hundreds);
  const MasterWeightsResult& result() const { return result_; }
  ExportablePlot* trajectoryPlot() const { return plot_; }
  QString summaryText() const;
  QString footerText() const;

 private:
  static QString footerFor(const MasterWeightsResult& r);
  void rerun();
  QSlider* update_;
  QLabel* update_label_;
  QSlider* steps_;
  QLabel* steps_label_;
  ExportablePlot* plot_;
  QLabel* summary_;
  QLabel* footer_;
  MasterWeightsResult result_;
};

class LossScalingDemoView : public QWidget {
  Q_OBJECT
 public:
  explicit LossScalingDemoView(QWidget* parent = nullptr);
  // log2 of the initial loss scale, 0..24 (16: 65536).
  void setInitScaleExponent(int k);
  void setGrowthInterval(int steps);
  const LossScalingResult& result() const { return result_; }
  ExportablePlot* scalePlot() const { return scale_plot_; }
  ExportablePlot* underflowPlot() const { return underflow_plot_; }
  QString summaryText() const;

 private:
  void rerun();
  QSlider* init_;
  QLabel* init_label_;
  QSlider* growth_;
  QLabel* growth_label_;
  ExportablePlot* scale_plot_;
  ExportablePlot* underflow_plot_;
  QLabel* summary_;
  LossScalingResult result_;
};

}  // namespace fp8wb
