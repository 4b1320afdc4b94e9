// defines: ReplayPanel: the Sweeps tab's "Replay a run": pick a stored run and the margins,
// windows and amax algorithms to try; its recorded per-step amax is replayed under each
// (core/replay/replay.h) on a pool thread and the heatmap (window across, margin up, one
// algorithm at a time) fills with the chosen figure: saturating steps, median headroom,
// estimated underflow or saturation, of every tensor or one. The best cell by the stated
// rule is named and marked; a click on a cell draws that tensor's amax over the run with
// the amax the replayed scale maps to the format's max (and the run's own), saturating
// steps marked. What the replay assumes is said under the heatmap. "Train these cells"
// starts a real sweep of the selected cells (ctrl-click adds a cell) on the run's config.
#pragma once

#include <QWidget>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "fp8wb/core/replay/replay_run.h"
#include "fp8wb/views/common/background_job.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QCPColorMap;
class QCPColorScale;
class QCPAbstractItem;
class QMouseEvent;

namespace fp8wb {

class EngineController;
class ExportablePlot;

class ReplayPanel : public QWidget {
  Q_OBJECT
 public:
  enum Figure { SaturatingSteps, MedianHeadroom, EstUnderflow, EstSaturated, ClosestHeadroom };

  ReplayPanel(EngineController* engine, QWidget* parent = nullptr);
  ~ReplayPanel() override;

  // Lists the open database's runs on a pool thread: runsListed() follows.
  void refreshRuns();
  QStringList runEntries() const;  // "#3 name"
  bool selectRun(int64_t run_id);  // then replays
  int64_t selectedRun() const;
  // The axes as typed ("0,1,2" / "1,16,128" / max and most_recent ticked).
  void setAxes(const QString& margins, const QString& windows, bool max, bool most_recent);
  // Replays the chosen run over the axes on a pool thread: replayed() or failed() follows.
  void replay();
  bool busy() const { return job_.busy(); }
  void setFigure(Figure f);
  void setAlgorithm(int index);          // of the algorithms replayed
  void setTensor(int index);             // 0: every tensor, else tensor index + 1
  double cellValue(int x, int y) const;  // x: window's index, y: margin's index
  QString bestText() const;
  QString assumptionText() const;
  QString checkText() const;  // the own-settings check
  // What a click on (x, y) does: that tensor's amax and replayed scale over the run.
  void showCell(int x, int y);
  QString trajectoryTitle() const;
  // The cells selected for "Train these cells" (x, y), and their grid as a sweep's text.
  void toggleSelected(int x, int y);
  QString selectedGridText() const;
  // How many trials "Train these cells" starts: the cells the selected margins and windows
  // span (a sweep's grid is a product of axes), which may be more than those selected.
  int trainedCellCount() const;
  // Starts a real sweep of the selected cells (the run's config, scaling=delayed):
  // trainRequested() with the base overrides and the grid lines.
  void trainSelected();
  const ReplayRun* run() const { return run_.get(); }
  const ReplayResult* result() const { return result_.get(); }
  ExportablePlot* heatmap() const { return heat_; }
  ExportablePlot* trajectory() const { return curves_; }

 Q_SIGNALS:
  void runsListed();
  void replayed();
  void cellShown();
  void failed(const QString& message);
  // The base config (key=value lines) and the grid (key=v1,v2 lines) of a sweep to run.
  void trainRequested(const QString& base, const QString& grid);

 protected:
  // Shown (its page or the Sweeps tab chosen): the run list read again, runs trained
  // meanwhile in it.
  void showEvent(QShowEvent* e) override;

 private:
  bool report_failures_ = true;  // false: a replay nobody asked for (the runs just listed)
  void redraw();
  void cellClicked(QMouseEvent* e);
  const ReplayCell* cellAt(int x, int y) const;
  const ReplayFigures* figuresAt(int x, int y) const;
  EngineController* engine_;
  QComboBox *runs_, *figure_, *algo_, *tensor_;
  QLineEdit *margins_, *windows_;
  QCheckBox *max_, *recent_;
  QPushButton *replay_, *train_;
  QLabel *status_, *best_, *check_, *assumption_, *selected_;
  ExportablePlot *heat_, *curves_;
  QCPColorMap* map_;
  QCPColorScale* scale_;
  std::vector<QCPAbstractItem*> marks_;
  std::vector<int64_t> run_ids_;
  std::shared_ptr<ReplayRun> run_;
  std::shared_ptr<ReplayResult> result_;
  ReplayGrid grid_;
  std::string base_config_;  // the replayed run's config (JSON)
  std::set<std::pair<int, int>> selected_cells_;
  QString trajectory_title_;
  BackgroundJob list_job_{this};
  BackgroundJob job_{this};
};

}  // namespace fp8wb
