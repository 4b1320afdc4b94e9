// defines: SweepsTab: define a grid (a line per axis, key=v1,v2,...), start and stop a
// sweep (through a SweepController, which runs it on a pool thread) with each trial's
// progress; a heatmap of two chosen axes coloured by a chosen metric (final loss, loss
// gap, saturation, underflow, divergence) with the other axes as slicers; clicking a
// cell overlays the loss curves of its row or column, double-clicking opens its run; the
// best setting named with its figures. Cells whose trials have not all ended are grey
// with "…", cells with a diverged run hatched with "diverged": neither takes a colour of
// the scale. The best is named among grid points whose trials all finished, with how
// many of the sweep's trials have. A "Sweep" list over the heatmap names the open
// database's stored sweeps, newest first (those run here, by `fp8wb sweep` or collected
// from a cluster's folder alike): choosing one shows it, and a line under it says what
// the shown sweep was run with; the form on the left is that of a new sweep, apart.
// While the tab is shown, the shown sweep follows the database once a second (trials
// another process ends or deletes), as the Runs tab's list does. A second page, "Replay
// a run" (ReplayPanel), replays a stored run's per-step amax under other delayed-scaling
// settings.
#pragma once

#include <QWidget>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fp8wb/core/sweep/sweep.h"
#include "fp8wb/views/common/background_job.h"

class QComboBox;
class QLabel;
class QListWidget;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QCPAbstractItem;
class QCPColorMap;
class QCPColorScale;
class QCPItemText;
class QHBoxLayout;
class QMouseEvent;
class QShowEvent;
class QTabWidget;

namespace fp8wb {

class EngineController;
class ExportablePlot;
class SweepController;
struct SweepOutcome;
class ReplayPanel;

class SweepsTab : public QWidget {
  Q_OBJECT
 public:
  SweepsTab(EngineController* engine, QWidget* parent = nullptr);
  ~SweepsTab() override;

  static QStringList presetNames();
  bool applyPreset(const QString& name);
  void setGridText(const QString& text);
  void setBaseOverrides(const QString& text);  // key=value lines for the base config
  void setSeeds(int seeds);
  // Starts a sweep of the form's settings through the tab's SweepController
  // (sweep_controller.h), which owns its runner and thread; returns an error message (an
  // invalid grid, naming the field; failed() says it too) or empty. sweepFinished()
  // follows.
  QString start();
  void stop();
  bool busy() const;
  // Reads a stored sweep's points on a pool thread and shows its heatmap: sweepShown()
  // (or failed()) follows. A newer call supersedes one still reading.
  void showSweep(int64_t sweep_id);
  bool isReading() const { return points_job_.busy(); }
  // The sweep shown (0: none).
  int64_t shownSweep() const { return sweep_id_; }
  // Reads the open database's sweeps on a pool thread into the "Sweep" list (newest
  // first; "no stored sweeps", disabled, where it holds none; where it cannot be read, the
  // list says so, the reason in its tooltip, not failed()): sweepsListed() follows.
  // Where no sweep is shown (nor read, run or collected), the newest is then shown. Called
  // when the tab is shown, when the engine opens another database, and as the tab's own
  // sweep starts and ends or a folder is collected.
  void refreshSweeps();
  bool isListing() const { return list_job_.busy(); }
  // The list's entries, newest first: "#3 margin x window (12 trials, finished)".
  QStringList storedSweeps() const;
  // Puts the shown sweep's grid, seeds and base config (the fields it sets apart from the
  // defaults) in the form of a new sweep ("Copy to new sweep").
  void copyShownToForm();
  // x and y (indices of the grid's axes). The same axis across and up is one row of cells
  // along it, the other axes held by their slicers; the y axis says so, and the heatmap
  // keeps its place.
  void setAxes(int x_axis, int y_axis);
  void setMetric(SweepMetric metric);  // the heatmap's colour
  // The heatmap cell (x, y) of the current slice: its run ids (empty if none).
  std::vector<int64_t> runsAt(int x, int y) const;
  double cellValue(int x, int y) const;
  QString bestText() const;
  std::vector<ExportablePlot*> plots() const { return {heat_, curves_}; }
  // Overlays the loss curves of the runs in cell (x, y)'s row (or column), read on a pool
  // thread: curvesShown() (or failed()) follows.
  void overlayLine(int x, int y, bool column);
  // What the overlaid curves show: the fixed value(s) and the axis they run along.
  QString overlayTitle() const;
  // Collects a cluster sweep's folder (`fp8wb sweep --slurm`) into the open database on a
  // pool thread, as `fp8wb sweep --collect` does (collect_sweep_folder()): a progress bar
  // a trial, then each trial's state in the list and the sweep's heatmap; collected()
  // follows, or failed() with the reason (a trial that could not be collected: failed()
  // names it, the others are still collected). A collection that fails as a whole (a
  // folder that is no sweep's, a sweep the open database does not hold) names the folder
  // and the problem in the workbench's terms, and a line over the heatmap says that
  // nothing was collected and that what is shown is the sweep shown before, unchanged
  // (the label "collect-failure"; gone once a sweep is shown, started or collected). "Collect from
  // folder…" asks for the folder (through the chooser, where one is set: tests) and calls
  // it.
  void collectFolder(const QString& dir);
  bool isCollecting() const { return collect_job_.busy(); }
  void setFolderChooser(std::function<QString(QWidget*)> chooser);
  // The "Replay a run" page (a run's recorded amax replayed under other delayed-scaling
  // settings), beside the sweeps' page; showReplay() turns to it.
  ReplayPanel* replayPanel() const { return replay_; }
  void showReplay();

 Q_SIGNALS:
  // The sweep has ended and its heatmap shows every point.
  void sweepFinished(qint64 sweep_id, const QString& status);
  void sweepShown(qint64 sweep_id);
  void sweepsListed();
  void curvesShown();
  void openRunRequested(qint64 run_id);
  void collected(qint64 sweep_id, int added, int waiting);
  void failed(const QString& message);
  void notice(const QString& message);

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  // The constructor's parts: the two sides' widgets laid out, the signals connected.
  QWidget* makeNewSweepSide();
  QWidget* makeShownSweepSide();
  void connectSignals();
  // The database was switched: what is shown is the other database's; forget it, list
  // this one's.
  void databaseChanged();
  // The "Sweep" list's entry of the sweep shown, chosen (without showing it again).
  void selectShownSweep();
  // The heatmap of the chosen axes, metric and slice, and the best setting; its steps:
  void redraw();
  // The slicers of the axes neither across (xa) nor up (ya) shown; "none" where none is.
  void showHeldAxes(int xa, int ya);
  // The nx x ny cells' colours (the metric's figure where every trial ended) and the marks
  // of those that take none; returns the lowest and highest figure coloured.
  std::pair<double, double> colourCells(SweepMetric metric, int nx, int ny);
  // Each cell's mark (kind and text; empty: none) placed: alone on a small grid, the
  // cells of a row alike as one item on a large one.
  void placeMarks(const std::vector<std::pair<QString, QString>>& cell_marks, int nx, int ny);
  // The line over the heatmap: the best setting (kSweepVerdictRule) and the trials ended.
  void describeBest();
  // The heatmap's tick labels follow its size: replotted where they were made for another.
  void ticksFollowTheLayout();
  // No sweep shown: the heatmap without cells, ticks, axis labels or colour scale, saying
  // so over its middle, and no overlaid curves; the plots keep their place.
  // Nothing on the heatmap; `why` over its middle ("no sweep shown" without).
  // The form's preset box says "custom" once the base config or grid is no preset's.
  void showWhetherPreset();
  // Cells x0..x1 of row y marked alike by one item, without a text (a large grid's).
  void markCells(int x0, int x1, int y, const QString& kind);
  void showNoSweep(const QString& why = QString());
  // No overlaid curves nor their title (another sweep is shown or started).
  void clearOverlay();
  void rebuildSlicers();
  // The shown sweep's grid, seeds and base config in the line under the "Sweep" list.
  void describeShownSweep();
  // The heatmap's left margin, wide enough for any of the sweep's axes up (its values and
  // label) or the one row of the same axis across and up: choosing axes does not move it.
  void pinHeatmapMargin();
  // The grey or hatched look of a cell that takes no colour of the scale, with its mark.
  void markCell(int x, int y, const QString& kind, const QString& text);
  // A press and release at (nearly) one place over the map's axis rect: its cell.
  void cellClicked(QMouseEvent* e, bool twice);
  // Takes a sweep's grid, points and status (read on a pool thread) and draws them.
  void showPoints(int64_t sweep_id, SweepSpec spec, std::vector<SweepPoint> points,
                  SweepStatus status);
  // Runs were deleted (EngineController::runsDeleted): the sweep shown is read again and
  // the list too, so that a deleted trial reads as deleted.
  void runsDeleted();
  // The shown sweep read again (its list entry too) where its trials' runs changed since
  // it was read (their ids, how they stand): a run another process ended or deleted.
  void pollShownSweep();
  // The shown sweep read again and drawn, its overlaid curves too (a trial deleted, ended).
  void rereadShownSweep();
  // How many of the shown sweep's trials had a run that is gone (every grid point, not
  // only the slice shown).
  int deletedTrials() const;
  // deletedAt()'s count for the grid point `values` (p: its point, or null).
  int deletedOf(const std::vector<std::string>& values, const SweepPoint* p) const;
  // Every axis's value at the heatmap cell (x, y) of the current slice (empty: none).
  std::vector<std::string> valuesAt(int x, int y) const;
  // How many of the cell's trials had a run that is gone: runs seen here for the point and
  // no longer there, and in a sweep whose trials all ran ("finished") every trial missing.
  int deletedAt(int x, int y) const;
  void setReading(bool reading);
  // Start sweep and Collect disabled, with the reason as their tooltip, while the database
  // is read-only (EngineController::readOnlyReason()), and while they are under way.
  void updateWriteButtons();
  QString fail(const QString& message);
  const SweepPoint* pointAt(int x, int y) const;
  // The heatmap cell (x, y)'s tooltip: its settings and its figure ("margin 1, window 16:
  // final loss 3.21"), or what it waits for.
  QString cellTip(int x, int y) const;
  // The controller's sweep started, a trial of it ended, it ended: the list, the status
  // line and the heatmap follow.
  void sweepStarted(qint64 sweep_id, int trials);
  void trialEnded(int index, RunStatus status);
  void sweepEnded(const SweepOutcome& outcome);
  // The trials' list where it holds any, else the grey line saying what it will hold.
  void showTrialsOrHint();
  EngineController* engine_;
  SweepController* controller_;  // runs the sweep started here
  QTabWidget* pages_ = nullptr;
  ReplayPanel* replay_ = nullptr;
  QComboBox* stored_;  // the database's sweeps, newest first; choosing one shows it
  QComboBox *preset_, *x_axis_, *y_axis_, *metric_, *overlay_;
  QComboBox* range_ = nullptr;  // the colour scale's range: auto or fixed
  QPlainTextEdit *grid_, *base_;
  QSpinBox *seeds_, *parallel_;
  QPushButton *start_, *stop_, *collect_;
  QListWidget* trials_;
  QLabel* no_trials_;  // in place of the trials' list while it is empty: what it will hold
  QLabel *status_, *best_, *overlay_title_;
  QLabel* collect_failure_;   // over the heatmap: a collection failed, what is shown is older
  QProgressBar* reading_;     // busy while a sweep's points are read
  QProgressBar* collecting_;  // trials collected of the folder's
  QLabel* shown_spec_;        // the shown sweep's grid, seeds and base config
  QPushButton* copy_spec_;    // "Copy to new sweep": those into the form
  std::function<QString(QWidget*)> folder_chooser_;
  QHBoxLayout* slicer_row_;
  std::vector<QComboBox*> slicers_;  // one per axis (used for those not on x or y)
  QLabel* held_none_;                // in place of the slicers where every axis is on the map
  ExportablePlot *heat_, *curves_;
  QCPColorMap* map_;
  QCPColorScale* scale_;
  QCPItemText* no_sweep_;                // "no sweep shown", over the heatmap's middle
  QPoint pressed_at_;                    // where the heatmap was last pressed
  QPoint overlaid_cell_{0, 0};           // the cell whose row or column is overlaid
  std::vector<QCPAbstractItem*> marks_;  // the marked cells' items, drawn over the map
  int64_t sweep_id_ = 0;
  SweepSpec spec_;
  std::vector<SweepPoint> points_;
  SweepStatus status_of_shown_ = SweepStatus::Running;  // the shown sweep's stored status
  // The runs seen for each grid point (its values) of the shown sweep: one gone since was
  // deleted.
  std::map<std::vector<std::string>, std::set<int64_t>> seen_runs_;
  // points_ by their values (pointAt() on a large grid), and the points_ it was made of.
  mutable std::map<std::vector<std::string>, size_t> point_index_;
  mutable const SweepPoint* indexed_ = nullptr;
  mutable size_t indexed_size_ = 0;
  BackgroundJob points_job_{this};   // reads of its points
  BackgroundJob curves_job_{this};   // reads of the overlaid loss curves
  BackgroundJob collect_job_{this};  // a cluster sweep's folder collected
  BackgroundJob list_job_{this};     // reads of the database's list of sweeps
  BackgroundJob poll_job_{this};     // looks at the shown sweep's runs, once a second
  // The shown sweep's runs as read with it (sweep_runs_state()): a poll that finds them
  // otherwise reads the sweep again. Empty: not known (the tab's own sweep drew it).
  std::string shown_runs_state_;
  int64_t chosen_ = 0;  // chosen from the list (or its newest): its first row's curves once shown
};

}  // namespace fp8wb
