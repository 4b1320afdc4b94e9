// A heatmap as drawn, checked cell by cell: the axes span whole cells and every cell fills
// its own share of the plot in the colour its figure takes on the scale.
#pragma once

#include <QImage>
#include <QString>
#include <QStringList>
#include <cmath>
#include <functional>

#include <qcustomplot.h>

namespace fp8wb {

// One side of a heatmap: `n` cells `width` apart, the first centred on `first`. With
// `labels`, the axis has one tick on each cell's centre, named by its label; without,
// its ticks are not checked.
struct HeatmapSide {
  int n = 0;
  double first = 0;
  double width = 1;
  QStringList labels = {};
};

// What is wrong with the heatmap `map` of `plot` as drawn, or empty: across (`x`) and up
// (`y`) the map has its cells and the axis spans exactly them, half a cell beyond the
// centres of the first and last, and every cell fills its own share of the plot: its
// centre and four points near its corners all show the colour `figure(column, row)` takes
// on the scale.
inline QString cells_fill_the_plot(QCustomPlot* plot, QCPColorMap* map, const HeatmapSide& x,
                                   const HeatmapSide& y,
                                   const std::function<double(int, int)>& figure) {
  if (!map) return QStringLiteral("no colour map");
  if (map->data()->keySize() != x.n || map->data()->valueSize() != y.n)
    return QStringLiteral("the map is %1 x %2 cells, not %3 x %4")
        .arg(map->data()->keySize())
        .arg(map->data()->valueSize())
        .arg(x.n)
        .arg(y.n);
  plot->replot(QCustomPlot::rpImmediateRefresh);
  struct Along {
    QCPAxis* axis;
    const HeatmapSide& side;
  };
  for (const Along a : {Along{plot->xAxis, x}, Along{plot->yAxis, y}}) {
    const QCPRange r = a.axis->range();
    const HeatmapSide& s = a.side;
    const double lower = s.first - s.width / 2, upper = s.first + s.width * (s.n - 0.5);
    const double tolerance = 1e-9 * std::max(1.0, std::abs(upper - lower));
    if (std::abs(r.lower - lower) > tolerance || std::abs(r.upper - upper) > tolerance)
      return QStringLiteral("the %1 axis spans %2..%3, not the %4 cells' %5..%6")
          .arg(a.axis->axisType() == QCPAxis::atBottom ? QStringLiteral("x") : QStringLiteral("y"))
          .arg(r.lower)
          .arg(r.upper)
          .arg(s.n)
          .arg(lower)
          .arg(upper);
    if (s.labels.isEmpty()) continue;
    const QVector<double> ticks = a.axis->tickVector();
    const QVector<QString> labels = a.axis->tickVectorLabels();
    QStringList seen;
    for (qsizetype i = 0; i < ticks.size(); ++i)
      seen << QStringLiteral("%1:%2").arg(ticks[i]).arg(labels.value(i));
    QStringList want;
    for (qsizetype i = 0; i < s.labels.size(); ++i)
      want << QStringLiteral("%1:%2")
                  .arg(s.first + s.width * static_cast<double>(i))
                  .arg(s.labels[i]);
    if (seen != want)
      return QStringLiteral("ticks %1, not %2").arg(seen.join(u' '), want.join(u' '));
  }
  const QImage image = plot->toPixmap().toImage();
  for (int i = 0; i < x.n; ++i) {
    for (int j = 0; j < y.n; ++j) {
      const double v = figure(i, j);
      if (!std::isfinite(v)) return QStringLiteral("cell %1,%2 has no figure").arg(i).arg(j);
      const QColor want = QColor::fromRgb(map->gradient().color(v, map->dataRange()));
      const double cx = x.first + x.width * i, cy = y.first + y.width * j;
      for (const QPointF d : {QPointF(0, 0), QPointF(-0.4, -0.4), QPointF(-0.4, 0.4),
                              QPointF(0.4, -0.4), QPointF(0.4, 0.4)}) {
        const double kx = cx + d.x() * x.width, ky = cy + d.y() * y.width;
        const QPoint at = map->coordsToPixels(kx, ky).toPoint();
        const QColor c = image.pixelColor(at);
        if (std::hypot(c.red() - want.red(), c.green() - want.green(), c.blue() - want.blue()) > 12)
          return QStringLiteral("cell %1,%2 at %3,%4 (pixel %5,%6) is %7, not its colour %8")
              .arg(i)
              .arg(j)
              .arg(kx)
              .arg(ky)
              .arg(at.x())
              .arg(at.y())
              .arg(c.name(), want.name());
      }
    }
  }
  return {};
}

}  // namespace fp8wb
