// defines: NumberLinePlot (every representable value of each format on a log2 axis, one
// row per format) and SpacingPlot (the spacing between neighbours against magnitude).
#pragma once

#include <optional>
#include <vector>

#include "fp8wb/views/exportable_plot.h"

namespace fp8wb {

class NumberLinePlot : public ExportablePlot {
  Q_OBJECT
 public:
  explicit NumberLinePlot(QWidget* parent = nullptr);
  void setFormats(const std::vector<Format>& formats);
  // A vertical line at |value| (none for 0, NaN, Inf).
  void setMarker(std::optional<double> value);

 private:
  std::vector<Format> formats_;
  QCPItemStraightLine* marker_;
};

class SpacingPlot : public ExportablePlot {
  Q_OBJECT
 public:
  explicit SpacingPlot(QWidget* parent = nullptr);
  void setFormats(const std::vector<Format>& formats);
  void setMarker(std::optional<double> value);

 private:
  QCPItemStraightLine* marker_;
};

}  // namespace fp8wb
