// defines: GradientDemoView (E4M3 vs E5M2 on gradient-like values, a slider for the
// gradient scale) and OutlierDemoView (per-tensor vs 1x128 scaling with outlier
// channels, a slider for the outlier factor): the Formats tab's live demos.
#pragma once

#include <QWidget>
#include <vector>

#include "fp8wb/core/demos.h"

class QSlider;
class QLabel;
class QComboBox;
class QCheckBox;
class QCPColorMap;
class QCPColorScale;

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
  QString summaryText() const;

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
  QLabel* summary_;
  OutlierDemoResult result_;
  OutlierDemoResult curve_data_;
};

}  // namespace fp8wb
