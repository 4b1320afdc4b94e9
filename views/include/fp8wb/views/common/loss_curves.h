// defines: LossCurve, read_loss_curves(), show_loss_curves(): runs' loss curves overlaid
// on one plot (the Runs tab, a sweep's row or column). The read runs on any thread
// (a BackgroundJob), the drawing on the GUI thread.
#pragma once

#include <QString>
#include <QVector>
#include <cstdint>
#include <string>
#include <vector>

namespace fp8wb {

class ExportablePlot;

struct LossCurve {
  int64_t run_id = 0;
  QString name;                   // empty: "<id>: <the run's name>"
  int colour = 0;                 // the n-th colour of the overlay palette
  bool name_seed = false;         // the run's seed added to the name: "margin=1, seed 2"
  int dashes = 0;                 // the n-th line style (solid, dashed, dotted, ...): curves
                                  // of one colour told apart
  QVector<double> steps, losses;  // finite points only
};

// Fills each curve's points from the database at `db_path` (a connection of its own);
// curves of runs that are not there are left out. Throws StoreError.
std::vector<LossCurve> read_loss_curves(const std::string& db_path, std::vector<LossCurve> curves);

// Replaces the plot's graphs with the curves (a legend where there are any).
void show_loss_curves(ExportablePlot* plot, const std::vector<LossCurve>& curves);

}  // namespace fp8wb
