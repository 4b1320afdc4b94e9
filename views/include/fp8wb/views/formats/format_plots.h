// defines: NumberLinePlot (every representable value of each format on a log2 axis, one
// row per format) and SpacingPlot (the spacing between neighbours against magnitude).
#pragma once

#include <optional>
#include <vector>

#include "fp8wb/views/common/exportable_plot.h"

namespace fp8wb {

// Both plots are given a minimum height while presenting, from the presentation font, so
// that their row and tick labels stay apart (the explorer scrolls instead).
class NumberLinePlot : public ExportablePlot, public PresentationHook {
  Q_OBJECT
 public:
  explicit NumberLinePlot(QWidget* parent = nullptr);
  void setFormats(const std::vector<Format>& formats);
  // A vertical line at |value| (none for 0, NaN, Inf); where it is not on the axis as
  // shown (beyond its range, 0, NaN, Inf), a note over the plot says so.
  void setMarker(std::optional<double> value);
  void presentationScaleChanged(double factor) override;

 private:
  void sizeForPresentation();
  double factor_ = 1;
  std::vector<Format> formats_;
  QCPItemStraightLine* marker_;
  QCPItemText* note_;
  std::optional<double> value_;
};

class SpacingPlot : public ExportablePlot, public PresentationHook {
  Q_OBJECT
 public:
  explicit SpacingPlot(QWidget* parent = nullptr);
  void setFormats(const std::vector<Format>& formats);
  // As NumberLinePlot's: a line at |value|, a note where it is not on the axis.
  void setMarker(std::optional<double> value);
  void presentationScaleChanged(double factor) override;
  // The legend's entries a row below the plot (4; 2 where the plot is narrow: presenting
  // all formats beside their table).
  void setLegendColumns(int columns);

 private:
  double factor_ = 1;
  int legend_columns_ = 4;
  int legend_rows_ = 1;
  int format_count_ = 0;
  QCPItemStraightLine* marker_;
  QCPItemText* note_;
  std::optional<double> value_;
};

}  // namespace fp8wb
