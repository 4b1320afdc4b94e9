#include "fp8wb/views/common/loss_curves.h"

#include <cmath>
#include <exception>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/common/store_reader.h"

namespace fp8wb {

std::vector<LossCurve> read_loss_curves(const std::string& db_path, std::vector<LossCurve> curves) {
  const auto store = open_store_reader(db_path);
  std::vector<LossCurve> out;
  for (LossCurve& c : curves) {
    const auto info = store->run(c.run_id);
    if (!info) continue;
    if (c.name.isEmpty())
      c.name = QStringLiteral("%1: %2").arg(c.run_id).arg(QString::fromStdString(info->name));
    if (c.name_seed) {
      try {
        c.name += QStringLiteral(", seed %1").arg(parse_run_config(info->config_json).seed);
      } catch (const std::exception&) {
        c.name += QStringLiteral(", run %1").arg(c.run_id);  // its config unreadable
      }
    }
    for (const SeriesPoint& p : store->series(c.run_id, "loss")) {
      if (!std::isfinite(p.value)) continue;
      c.steps << static_cast<double>(p.step);
      c.losses << p.value;
    }
    out.push_back(std::move(c));
  }
  return out;
}

void show_loss_curves(ExportablePlot* plot, const std::vector<LossCurve>& curves) {
  static const QColor colours[] = {QColor(0x1f, 0x77, 0xb4), QColor(0xd6, 0x27, 0x28),
                                   QColor(0x2c, 0xa0, 0x2c), QColor(0xff, 0x7f, 0x0e),
                                   QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b)};
  plot->clearGraphs();
  for (const LossCurve& c : curves) {
    QCPGraph* g = plot->addGraph();
    g->setName(c.name);
    static const Qt::PenStyle styles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine,
                                          Qt::DashDotDotLine};
    g->setPen(QPen(colours[c.colour % 6], 1.5, styles[c.dashes % 5]));
    g->setData(c.steps, c.losses, true);
  }
  plot->legend->setVisible(plot->graphCount() > 0);
  if (plot->graphCount() > 0) {
    place_legend_below(plot, 3);  // under the plot: the curves stay visible
  } else if (plot->legend->layout() == plot->plotLayout()) {
    // An empty legend in the axis rect's column would hold the column to its own (nil)
    // width, the axis rect squeezed to its tick labels: out of the layout until there
    // are curves again.
    plot->plotLayout()->take(plot->legend);
    plot->plotLayout()->simplify();
  }
  plot->rescaleAxes();
  plot->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace fp8wb
