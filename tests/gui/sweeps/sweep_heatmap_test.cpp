// The Sweeps tab's heatmap on a sweep written straight into the store, part finished:
// cells whose trials have not all ended (waiting, or one seed still running) and cells
// with a diverged run take no colour of the scale (their pixels are far from every colour
// of the gradient, and items of their own mark them); the scale's ends both stand out
// from the plot's white; the best named is the lowest final loss among points whose
// trials all finished, with how many trials have; a cell's final loss is the mean over
// the last 10% of its runs' steps, computed here by hand; clicking a diverged cell still
// overlays its row's loss curves. The database's stored sweeps are listed over the
// heatmap, newest first: the newest shows when the tab opens, another is shown by
// choosing it, one stored later is listed when the tab is shown again. A trial deleted on
// the Runs tab (whose question names its sweep) reads as deleted on the heatmap at once,
// not as still to run, and is counted as deleted over it; one deleted by another program
// shows by itself; every axis value keeps its tick label. The loss curves' plot says how
// to fill it while it is empty.
#include <QComboBox>
#include <QGroupBox>
#include <QLabel>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QToolTip>
#include <QtTest>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/sweep.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/runs/run_list_model.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"
#include "heatmap_cells.h"

using namespace fp8wb;

namespace {

constexpr int kSteps = 40;  // the window: steps 36..39

// A run's losses: falling, with a wiggle, so that the window's mean is not its last step.
double loss_at(double base, int64_t s) {
  return base + std::exp(-static_cast<double>(s) / 8.0) + 0.02 * static_cast<double>(s % 3);
}
double ref_at(double base, int64_t s) {
  return loss_at(base, s) - 0.01 * static_cast<double>(1 + s % 2);
}

// The final loss by hand: the mean of the loss over steps 36..39.
double final_by_hand(double base) {
  double sum = 0;
  for (int64_t s = kSteps - kSteps / 10; s < kSteps; ++s) sum += loss_at(base, s);
  return sum / (kSteps / 10);
}

int64_t add_run(RunStore& store, int64_t sweep, const SweepTrial& t, double base,
                std::optional<RunStatus> ended) {
  const int64_t id = store.create_run(t.config.name, fp8wb::RunKind::SweepTrial,
                                      run_config_json(t.config), "cpu", sweep);
  MetricBatch b;
  b.run_id = id;
  const bool diverged = ended == RunStatus::Diverged;
  const int64_t steps = ended ? kSteps : kSteps / 2;  // a running one is halfway
  for (int64_t s = 0; s < steps; ++s) {
    StepMetrics m;
    m.step = s;
    m.loss = diverged && s + 1 == steps ? NAN : loss_at(base, s);
    m.ref_loss = ref_at(base, s);
    m.loss_gap = m.loss - m.ref_loss;
    b.steps.push_back(m);
  }
  if (ended) {
    b.final = true;
    b.status = *ended;
  }
  store.write(std::move(b));
  return id;
}

// A finished sweep of the grid `axes` (each "name=v1,v2,..."), a trial's runs with the
// loss level base(trial): the sweep's id.
int64_t finished_sweep(RunStore& store, const char* name, const std::vector<const char*>& axes,
                       const std::function<double(const SweepTrial&)>& base) {
  SweepSpec spec;
  spec.name = name;
  spec.base.model = ModelKind::Mlp;
  for (const char* a : axes) spec.axes.push_back(parse_grid(a));
  const int64_t sweep = store.create_sweep(spec.name, sweep_json(spec));
  for (const SweepTrial& t : expand_sweep(spec))
    add_run(store, sweep, t, base(t), RunStatus::Finished);
  store.set_sweep_status(sweep,
                         fp8wb::SweepStatus::Finished);  // as a sweep whose every trial ran ends
  store.flush();
  return sweep;
}

// How far a colour is from the nearest colour of the gradient.
double distance_to_gradient(QCPColorGradient g, QColor c) {
  double best = 1e9;
  for (int i = 0; i <= 512; ++i) {
    const QColor q = QColor::fromRgb(g.color(i / 512.0, QCPRange(0, 1)));
    best =
        std::min(best, std::hypot(q.red() - c.red(), q.green() - c.green(), q.blue() - c.blue()));
  }
  return best;
}

// WCAG contrast of a colour against white.
double contrast_to_white(QColor c) {
  auto lin = [](int v) {
    const double x = v / 255.0;
    return x <= 0.03928 ? x / 12.92 : std::pow((x + 0.055) / 1.055, 2.4);
  };
  const double l = 0.2126 * lin(c.red()) + 0.7152 * lin(c.green()) + 0.0722 * lin(c.blue());
  return 1.05 / (l + 0.05);
}

// What is wrong with the tab's heatmap as drawn, or empty: across and up, one unit a
// cell, each tick on its cell's centre naming its value (`across` and `up`), every cell
// in the colour of its figure.
QString cells_fill_the_plot(SweepsTab& tab, const QStringList& across, const QStringList& up) {
  ExportablePlot* plot = tab.plots()[0];
  return fp8wb::cells_fill_the_plot(plot, qobject_cast<QCPColorMap*>(plot->plottable(0)),
                                    {static_cast<int>(across.size()), 0, 1, across},
                                    {static_cast<int>(up.size()), 0, 1, up},
                                    [&](int x, int y) { return tab.cellValue(x, y); });
}

// The tab in a window, showing the sweep; false if it never shows.
bool show_sweep(SweepsTab& tab, int64_t sweep) {
  tab.resize(1400, 900);
  tab.show();
  if (!QTest::qWaitForWindowExposed(&tab)) return false;
  QSignalSpy shown(&tab, &SweepsTab::sweepShown);
  tab.showSweep(sweep);
  return shown.wait(30000);
}

// The heatmap item named `name` (a cell's mark or pattern) over cell (x, y), or null.
QCPAbstractItem* cell_item(QCustomPlot* plot, const QString& name, int x, int y) {
  for (int i = 0; i < plot->itemCount(); ++i) {
    QCPAbstractItem* item = plot->item(i);
    if (item->objectName() == name && item->property("cell").toPoint() == QPoint(x, y)) return item;
  }
  return nullptr;
}

}  // namespace

class SweepHeatmapTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void unfinishedAndDivergedCellsHaveTheirOwnLook();
  void clickAnywhereInACellOverlaysItsRowOrColumn();
  void aOneAxisSweepIsOneRowOfCells();
  void aSweepOverSeedsTellsItsCurvesApart();
  void aCellsTooltipNamesItsSettings();
  void aOneTrialSweepSaysTrial();
  void everyCellFillsItsShareOfThePlot();
  void aConstantFigureKeepsItsScaleWithinItsDomain();
  void aStoredSweepIsChosenFromTheList();
  void aDatabaseWithoutSweepsShowsNoAxes();
  void theShownSweepIsDescribedApartFromTheNewSweepForm();
  void theSameAxisAcrossAndUpKeepsTheLayout();
  void aTrialDeletedOnTheRunsTabReadsDeleted();
  void theEmptyCurvesPlotSaysHowToFillIt();
  void aDeletedTrialKeepsEveryTickAndIsCountedDeleted();
  void aTrialDeletedByAnotherProgramReadsDeleted();
  void aSpikedTrialIsFlaggedAndNeverTheBest();
  void finalLossesWithinTheNoiseCrownNoWinner();
  void aBestWhoseReferenceBlewUpSaysSo();
  void theColourRangeIsSaidAndCanBeFixed();
  void aBlockMapsRangeCanBeFixed();

 private:
  QTemporaryDir dir_;
};

void SweepHeatmapTest::unfinishedAndDivergedCellsHaveTheirOwnLook() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("heat.sqlite")));
  // margin (y) = 0, 1, 2; window (x) = 1, 16; two seeds a point: 12 trials.
  SweepSpec spec;
  spec.name = "heat";
  spec.base.model = ModelKind::Mlp;
  spec.axes = {parse_grid("margin=0,1,2"), parse_grid("window=1,16")};
  spec.seeds = 2;
  RunStore& store = engine.store();
  const int64_t sweep = store.create_sweep(spec.name, sweep_json(spec));
  std::map<std::pair<std::string, std::string>, std::vector<const SweepTrial*>> at;
  const std::vector<SweepTrial> trials = expand_sweep(spec);
  QCOMPARE(trials.size(), size_t{12});
  for (const SweepTrial& t : trials) at[{t.values[0], t.values[1]}].push_back(&t);
  auto both = [&](const char* m, const char* w, double base0, double base1) {
    add_run(store, sweep, *at[{m, w}][0], base0, RunStatus::Finished);
    add_run(store, sweep, *at[{m, w}][1], base1, RunStatus::Finished);
  };
  both("0", "1", 0.9, 0.95);   // finished
  both("0", "16", 0.7, 0.75);  // finished: the best of the finished
  both("2", "16", 1.3, 1.2);   // finished: the scale's top
  // margin=1 window=1: the lowest loss of all, but its second seed is still running.
  add_run(store, sweep, *at[{"1", "1"}][0], 0.1, RunStatus::Finished);
  add_run(store, sweep, *at[{"1", "1"}][1], 0.1, std::nullopt);
  // margin=1 window=16: nothing run yet. margin=2 window=1: one seed diverged (its loss
  // was the lowest until then), the other finished.
  add_run(store, sweep, *at[{"2", "1"}][0], 0.05, RunStatus::Diverged);
  add_run(store, sweep, *at[{"2", "1"}][1], 0.2, RunStatus::Finished);
  store.flush();

  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  tab.setAxes(1, 0);  // x = window, y = margin
  tab.setMetric(SweepMetric::FinalLoss);

  // The figure is the one definition, by hand: mean over the seeds of each run's mean
  // loss over the last 10% of its steps.
  QCOMPARE(tab.cellValue(1, 0), (final_by_hand(0.7) + final_by_hand(0.75)) / 2);
  QCOMPARE(tab.cellValue(0, 0), (final_by_hand(0.9) + final_by_hand(0.95)) / 2);

  ExportablePlot* plot = tab.plots()[0];
  auto* map = qobject_cast<QCPColorMap*>(plot->plottable(0));
  QVERIFY(map);
  QCPColorGradient g = map->gradient();
  // Both ends of the scale are visible on the plot's white.
  const QColor top = QColor::fromRgb(g.color(1, QCPRange(0, 1)));
  const QColor bottom = QColor::fromRgb(g.color(0, QCPRange(0, 1)));
  QVERIFY2(contrast_to_white(top) > 1.4, qPrintable(top.name()));
  QVERIFY2(contrast_to_white(bottom) > 1.4, qPrintable(bottom.name()));

  // What the cells look like, as drawn.
  plot->replot(QCustomPlot::rpImmediateRefresh);
  const QImage image = plot->toPixmap().toImage();
  // A point near a cell's corner, clear of the mark written in its middle.
  auto pixel = [&](int x, int y) {
    const QPointF p = map->coordsToPixels(x - 0.3, y + 0.3);
    return image.pixelColor(p.toPoint());
  };
  auto item_at = [&](const QString& name, int x, int y) { return cell_item(plot, name, x, y); };
  // Finished cells are coloured from the scale (the check's own sanity).
  for (const QPoint c : {QPoint(0, 0), QPoint(1, 0), QPoint(1, 2)}) {
    QVERIFY2(distance_to_gradient(g, pixel(c.x(), c.y())) < 12,
             qPrintable(pixel(c.x(), c.y()).name()));
    QVERIFY(!item_at(QStringLiteral("unfinishedCell"), c.x(), c.y()));
  }
  // Still to run (x=1, y=1), one seed running (x=0, y=1), one diverged (x=0, y=2): none
  // takes a colour of the scale, and each has its own item and mark.
  struct Cell {
    int x, y;
    const char* item;
  };
  for (const Cell c :
       {Cell{1, 1, "unfinishedCell"}, Cell{0, 1, "unfinishedCell"}, Cell{0, 2, "divergedCell"}}) {
    const QColor seen = pixel(c.x, c.y);
    QVERIFY2(distance_to_gradient(g, seen) > 40,
             qPrintable(QStringLiteral("cell %1,%2 is %3").arg(c.x).arg(c.y).arg(seen.name())));
    QVERIFY2(std::isnan(map->data()->cell(c.x, c.y)), c.item);
    QVERIFY2(item_at(QLatin1String(c.item), c.x, c.y), c.item);
    auto* mark = qobject_cast<QCPItemText*>(item_at(QStringLiteral("cellMark"), c.x, c.y));
    QVERIFY(mark);
    QVERIFY(!mark->text().isEmpty());
  }
  QVERIFY(qobject_cast<QCPItemText*>(item_at(QStringLiteral("cellMark"), 0, 2))
              ->text()
              .contains(QStringLiteral("diverged")));

  // The best is named among points whose trials all finished, with the count.
  const QString best = tab.bestText();
  QVERIFY2(best.contains(QStringLiteral("margin=0 window=16")), qPrintable(best));
  QVERIFY2(!best.contains(QStringLiteral("margin=1 window=1")), qPrintable(best));
  QVERIFY2(!best.contains(QStringLiteral("margin=2 window=1")), qPrintable(best));
  // Finished: 2 + 2 + 2 + 1 + 1; diverged 1; of 12.
  QVERIFY2(best.contains(QStringLiteral("8 of 12 trials finished")), qPrintable(best));
  QVERIFY2(best.contains(QStringLiteral("1 diverged")), qPrintable(best));
  QVERIFY2(best.contains(QStringLiteral("last 10%")), qPrintable(best));

  // A click on the diverged cell (on its marks) overlays its row: margin=2, two windows,
  // two seeds each.
  QSignalSpy curves(&tab, &SweepsTab::curvesShown);
  QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier,
                    map->coordsToPixels(0 - 0.3, 2 + 0.3).toPoint());
  QVERIFY(curves.wait(30000));
  QCOMPARE(tab.plots()[1]->graphCount(), 4);
}

// A click near a cell's outer corner (away from the centres of the map's cells) picks
// that cell: its row's curves, titled with the held margin; with "column" chosen, its
// column's, one for each margin.
void SweepHeatmapTest::clickAnywhereInACellOverlaysItsRowOrColumn() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("click.sqlite")));
  SweepSpec spec;
  spec.name = "click";
  spec.base.model = ModelKind::Mlp;
  spec.axes = {parse_grid("margin=0,2"), parse_grid("window=1,16")};
  RunStore& store = engine.store();
  const int64_t sweep = store.create_sweep(spec.name, sweep_json(spec));
  // Each cell's runs start from a loss of their own.
  const std::map<std::pair<std::string, std::string>, double> base = {
      {{"0", "1"}, 0.9}, {{"0", "16"}, 0.7}, {{"2", "1"}, 0.5}, {{"2", "16"}, 1.3}};
  for (const SweepTrial& t : expand_sweep(spec))
    add_run(store, sweep, t, base.at({t.values[0], t.values[1]}), RunStatus::Finished);
  store.flush();

  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  tab.setAxes(1, 0);  // x = window, y = margin
  ExportablePlot* plot = tab.plots()[0];
  ExportablePlot* curves = tab.plots()[1];
  auto* map = qobject_cast<QCPColorMap*>(plot->plottable(0));
  QVERIFY(map);
  plot->replot(QCustomPlot::rpImmediateRefresh);
  // The first loss of the graph named `name`.
  auto first_loss = [&](const QString& name) {
    for (int i = 0; i < curves->graphCount(); ++i)
      if (curves->graph(i)->name() == name && !curves->graph(i)->data()->isEmpty())
        return curves->graph(i)->data()->begin()->value;
    return double(NAN);
  };
  QSignalSpy drawn(&tab, &SweepsTab::curvesShown);

  // Row: the cell window=16, margin=2, clicked near its outer corner.
  QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier,
                    map->coordsToPixels(1 + 0.35, 1 + 0.35).toPoint());
  QVERIFY(drawn.wait(30000));
  QCOMPARE(curves->graphCount(), 2);
  QCOMPARE(first_loss(QStringLiteral("window=1")), loss_at(0.5, 0));
  QCOMPARE(first_loss(QStringLiteral("window=16")), loss_at(1.3, 0));
  QVERIFY2(tab.overlayTitle().contains(QStringLiteral("margin=2")), qPrintable(tab.overlayTitle()));

  // Column: the cell window=1, margin=0, clicked near its outer corner.
  auto* along = tab.findChild<QComboBox*>(QStringLiteral("overlayAlong"));
  QVERIFY(along);
  along->setCurrentIndex(1);
  QTRY_VERIFY_WITH_TIMEOUT(drawn.size() >= 2, 30000);
  const qsizetype before = drawn.size();
  QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier,
                    map->coordsToPixels(0 - 0.35, 0 - 0.35).toPoint());
  QTRY_VERIFY_WITH_TIMEOUT(drawn.size() > before, 30000);
  QCOMPARE(curves->graphCount(), 2);
  QCOMPARE(first_loss(QStringLiteral("margin=0")), loss_at(0.9, 0));
  QCOMPARE(first_loss(QStringLiteral("margin=2")), loss_at(0.5, 0));
  QVERIFY2(tab.overlayTitle().contains(QStringLiteral("window=1,")) ||
               tab.overlayTitle().contains(QStringLiteral("window=1 ")),
           qPrintable(tab.overlayTitle()));
}

// A one-axis sweep of two seeds a point, a click on a cell: a curve a run, each legend
// entry naming its value and seed (none alike), under a title naming the sweep's own axis
// and nothing held; then a two-axis sweep, then the one-axis one chosen again: each title
// names the axis its curves run along.
void SweepHeatmapTest::aSweepOverSeedsTellsItsCurvesApart() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("seeds.sqlite")));
  RunStore& store = engine.store();
  SweepSpec spec;
  spec.name = "seeds";
  spec.base.model = ModelKind::Mlp;
  spec.base.seed = 7;
  spec.axes = {parse_grid("margin=0,1")};
  spec.seeds = 2;
  const int64_t sweep = store.create_sweep(spec.name, sweep_json(spec));
  for (const SweepTrial& t : expand_sweep(spec))
    add_run(store, sweep, t, 0.5 + 0.1 * static_cast<double>(t.seed_index), RunStatus::Finished);
  store.set_sweep_status(sweep, fp8wb::SweepStatus::Finished);
  store.flush();
  const int64_t grid = finished_sweep(store, "grid", {"margin=0,2", "window=1,16"},
                                      [](const SweepTrial&) { return 0.8; });

  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  ExportablePlot* plot = tab.plots()[0];
  ExportablePlot* curves = tab.plots()[1];
  auto* map = qobject_cast<QCPColorMap*>(plot->plottable(0));
  QVERIFY(map);
  plot->replot(QCustomPlot::rpImmediateRefresh);
  QSignalSpy drawn(&tab, &SweepsTab::curvesShown);
  QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier, map->coordsToPixels(1, 0).toPoint());
  QVERIFY(drawn.wait(30000));
  QStringList names;
  for (int i = 0; i < curves->graphCount(); ++i) names << curves->graph(i)->name();
  names.sort();
  QCOMPARE(names,
           (QStringList{QStringLiteral("margin=0, seed 7"), QStringLiteral("margin=0, seed 8"),
                        QStringLiteral("margin=1, seed 7"), QStringLiteral("margin=1, seed 8")}));
  QCOMPARE(tab.overlayTitle(), QStringLiteral("Loss, one curve for each margin and seed"));
  // The seeds of one value: one colour, each its own line style.
  std::map<QString, std::set<QRgb>> colours;
  std::map<QString, std::set<int>> styles;
  for (int i = 0; i < curves->graphCount(); ++i) {
    const QString value = curves->graph(i)->name().section(QLatin1Char(','), 0, 0);
    colours[value].insert(curves->graph(i)->pen().color().rgb());
    styles[value].insert(static_cast<int>(curves->graph(i)->pen().style()));
  }
  for (const auto& [value, seen] : colours) QVERIFY2(seen.size() == 1, qPrintable(value));
  for (const auto& [value, seen] : styles) QVERIFY2(seen.size() == 2, qPrintable(value));

  // The two-axis sweep, a row of its cells: along window, margin held.
  QVERIFY(show_sweep(tab, grid));
  // Not the seeds' title (the tab may have overlaid this sweep's first row on its own).
  QVERIFY2(!tab.overlayTitle().contains(QStringLiteral("seed")), qPrintable(tab.overlayTitle()));
  tab.setAxes(1, 0);  // x = window, y = margin
  plot->replot(QCustomPlot::rpImmediateRefresh);
  QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier, map->coordsToPixels(0, 1).toPoint());
  QTRY_VERIFY_WITH_TIMEOUT(drawn.size() >= 2, 30000);
  QCOMPARE(tab.overlayTitle(), QStringLiteral("Loss at margin=2, one curve for each window"));

  // The one-axis sweep again: nothing of the two-axis one's title.
  QVERIFY(show_sweep(tab, sweep));
  plot->replot(QCustomPlot::rpImmediateRefresh);
  QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier, map->coordsToPixels(0, 0).toPoint());
  QTRY_VERIFY_WITH_TIMEOUT(drawn.size() >= 3, 30000);
  QCOMPARE(tab.overlayTitle(), QStringLiteral("Loss, one curve for each margin and seed"));
}

// The pointer over a heatmap cell: its tooltip names the cell's settings (every axis, in
// the grid's order) and its figure, not the cell's place in the grid; a cell still to run
// says so.
void SweepHeatmapTest::aCellsTooltipNamesItsSettings() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("tips.sqlite")));
  RunStore& store = engine.store();
  SweepSpec spec;
  spec.name = "tips";
  spec.base.model = ModelKind::Mlp;
  spec.axes = {parse_grid("margin=0,2"), parse_grid("window=1,16")};
  const int64_t sweep = store.create_sweep(spec.name, sweep_json(spec));
  for (const SweepTrial& t : expand_sweep(spec)) {
    if (t.values[0] == "0" && t.values[1] == "1") continue;  // still to run
    add_run(store, sweep, t, t.values[1] == "16" ? 0.7 : 0.9, RunStatus::Finished);
  }
  store.flush();

  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  tab.setMetric(SweepMetric::FinalLoss);
  tab.setAxes(1, 0);  // x = window, y = margin
  ExportablePlot* plot = tab.plots()[0];
  auto* map = qobject_cast<QCPColorMap*>(plot->plottable(0));
  QVERIFY(map);
  plot->replot(QCustomPlot::rpImmediateRefresh);
  auto tip_at = [&](double x, double y) {
    QToolTip::hideText();
    QTest::mouseMove(plot, map->coordsToPixels(x, y).toPoint());
    QTest::qWaitFor([] { return QToolTip::isVisible(); }, 5000);
    return QToolTip::text();
  };
  QCOMPARE(tip_at(1.2, 1.2), QStringLiteral("margin 2, window 16: final loss %1")
                                 .arg(QString::number(final_by_hand(0.7), 'g', 6)));
  QCOMPARE(tip_at(1, 0), QStringLiteral("margin 0, window 16: final loss %1")
                             .arg(QString::number(final_by_hand(0.7), 'g', 6)));
  QCOMPARE(tip_at(0, 0), QStringLiteral("margin 0, window 1: trials still to run (0 of 1 ended)"));
}

// A sweep along one axis: one row of cells, one a value, each with its own figure (not
// the axis against itself, whose off-diagonal cells would read as trials still to run).
void SweepHeatmapTest::aOneAxisSweepIsOneRowOfCells() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("one_axis.sqlite")));
  const std::map<std::string, double> base = {{"0", 0.9}, {"1", 0.7}, {"2", 1.1}};
  const int64_t sweep = finished_sweep(engine.store(), "one axis", {"margin=0,1,2"},
                                       [&](const SweepTrial& t) { return base.at(t.values[0]); });

  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  tab.setMetric(SweepMetric::FinalLoss);
  auto* map = qobject_cast<QCPColorMap*>(tab.plots()[0]->plottable(0));
  QVERIFY(map);
  QCOMPARE(map->data()->keySize(), 3);
  QCOMPARE(map->data()->valueSize(), 1);
  for (int x = 0; x < 3; ++x)
    QCOMPARE(tab.cellValue(x, 0), final_by_hand(base.at(std::to_string(x))));
  QVERIFY(std::isnan(tab.cellValue(0, 1)));
  // No cell marked as still to run.
  for (int i = 0; i < tab.plots()[0]->itemCount(); ++i)
    QVERIFY(tab.plots()[0]->item(i)->objectName() != QLatin1String("unfinishedCell"));
  // Nothing to choose up, nor a column to overlay: those selectors off, saying why.
  auto* y = tab.findChild<QComboBox*>(QStringLiteral("yAxis"));
  auto* along = tab.findChild<QComboBox*>(QStringLiteral("overlayAlong"));
  QVERIFY(y && along);
  QVERIFY(!y->isEnabled() && !along->isEnabled());
  QVERIFY2(y->toolTip().contains(QStringLiteral("one axis")), qPrintable(y->toolTip()));
  // A sweep of two axes turns them on again.
  const int64_t two = finished_sweep(engine.store(), "two axes", {"margin=0,1", "window=1,16"},
                                     [](const SweepTrial&) { return 0.8; });
  QVERIFY(show_sweep(tab, two));
  QVERIFY(y->isEnabled() && along->isEnabled());
  QVERIFY(y->toolTip().isEmpty());
}

// A sweep of one trial counts it in the singular.
void SweepHeatmapTest::aOneTrialSweepSaysTrial() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("one_trial.sqlite")));
  SweepSpec spec;
  spec.name = "one trial";
  spec.base.model = ModelKind::Mlp;
  spec.axes = {parse_grid("margin=0")};
  RunStore& store = engine.store();
  const int64_t sweep = store.create_sweep(spec.name, sweep_json(spec));
  const std::vector<SweepTrial> trials = expand_sweep(spec);
  QCOMPARE(trials.size(), size_t{1});
  add_run(store, sweep, trials[0], 0.9, RunStatus::Finished);
  store.flush();

  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  const QString best = tab.bestText();
  QVERIFY2(best.contains(QStringLiteral("1 of 1 trial finished")), qPrintable(best));
  QVERIFY2(!best.contains(QStringLiteral("1 trials")), qPrintable(best));
}

// A grid with one value along an axis (one trial; one value of two axes, either way
// round; one axis of three values) draws each cell over its own share of the plot as
// any other grid does, centred on its tick, in the colour of its figure.
void SweepHeatmapTest::everyCellFillsItsShareOfThePlot() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("shapes.sqlite")));
  RunStore& store = engine.store();
  // A finished sweep of the grid `axes`, each trial's runs with a loss of their own.
  // Each trial's runs with a loss of their own.
  double next = 0.35;  // the first trial 0.5
  auto sweep_of = [&](const char* name, const std::vector<const char*>& axes) {
    return finished_sweep(store, name, axes, [&](const SweepTrial&) { return next += 0.15; });
  };
  const int64_t one = sweep_of("one trial", {"margin=0"});
  const int64_t row = sweep_of("one row", {"margin=0", "window=1,16,64"});
  const int64_t line = sweep_of("one axis", {"margin=0,1,2"});
  const int64_t grid = sweep_of("grid", {"margin=0,2", "window=1,16,64"});

  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, one));
  tab.setMetric(SweepMetric::FinalLoss);
  // Every shape's problem, if any, so that one failing shape does not hide another's.
  QStringList wrong;
  auto check = [&](const QString& shape, const QStringList& across, const QStringList& up) {
    const QString problem = cells_fill_the_plot(tab, across, up);
    if (!problem.isEmpty()) wrong << shape + QStringLiteral(": ") + problem;
  };
  check(QStringLiteral("1 x 1"), {QStringLiteral("0")}, {QString()});

  QSignalSpy shown(&tab, &SweepsTab::sweepShown);
  tab.showSweep(row);
  QVERIFY(shown.wait(30000));
  const QStringList windows = {QStringLiteral("1"), QStringLiteral("16"), QStringLiteral("64")};
  tab.setAxes(1, 0);  // x = window, y = margin
  check(QStringLiteral("3 x 1"), windows, {QStringLiteral("0")});
  tab.setAxes(0, 1);  // x = margin, y = window
  check(QStringLiteral("1 x 3"), {QStringLiteral("0")}, windows);

  tab.showSweep(line);
  QVERIFY(shown.wait(30000));
  check(QStringLiteral("one axis, 3 x 1"),
        {QStringLiteral("0"), QStringLiteral("1"), QStringLiteral("2")}, {QString()});

  tab.showSweep(grid);
  QVERIFY(shown.wait(30000));
  tab.setAxes(1, 0);
  check(QStringLiteral("3 x 2"), windows, {QStringLiteral("0"), QStringLiteral("2")});
  QVERIFY2(wrong.isEmpty(), qPrintable(wrong.join(QLatin1Char('\n'))));
}

// A sweep whose every cell has the same figure (no run diverged): the colour scale spans
// a band around it that stays within what the figure can be (no negative count of runs).
void SweepHeatmapTest::aConstantFigureKeepsItsScaleWithinItsDomain() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("constant.sqlite")));
  const int64_t sweep = finished_sweep(engine.store(), "constant", {"margin=0,1,2"},
                                       [](const SweepTrial&) { return 0.9; });

  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  tab.setMetric(SweepMetric::Diverged);
  for (int x = 0; x < 3; ++x) QCOMPARE(tab.cellValue(x, 0), 0.0);
  auto* map = qobject_cast<QCPColorMap*>(tab.plots()[0]->plottable(0));
  QVERIFY(map && map->colorScale());
  const QCPRange r = map->colorScale()->dataRange();
  QVERIFY2(r.lower >= 0 && r.lower < r.upper,
           qPrintable(QStringLiteral("the scale runs %1 .. %2").arg(r.lower).arg(r.upper)));
}

// The sweeps the database holds (written by another program: the CLI, a collection) are
// listed newest first over the heatmap; the tab opens on the newest without a click, the
// other shows its own grid when chosen, and a sweep stored later is listed once the tab
// is shown again. A database without sweeps says so, and its list cannot be opened.
void SweepHeatmapTest::aStoredSweepIsChosenFromTheList() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("stored.sqlite")));
  auto level = [](const SweepTrial& t) {
    return 0.5 + 0.1 * static_cast<double>(t.values[0].size());
  };
  const int64_t older =
      finished_sweep(engine.store(), "older", {"margin=0,1", "window=1,16,128"}, level);
  const int64_t newer = finished_sweep(engine.store(), "newer", {"window=1,16"}, level);
  // How many cells of the shown sweep have a figure.
  auto cells = [](const SweepsTab& tab) {
    int n = 0;
    for (int x = 0; x < 8; ++x)
      for (int y = 0; y < 8; ++y) n += std::isfinite(tab.cellValue(x, y)) ? 1 : 0;
    return n;
  };

  SweepsTab tab(&engine);
  QSignalSpy shown(&tab, &SweepsTab::sweepShown);
  QSignalSpy listed(&tab, &SweepsTab::sweepsListed);
  tab.resize(1400, 900);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QVERIFY(shown.count() > 0 || shown.wait(30000));
  QCOMPARE(shown.at(0).at(0).toLongLong(), newer);
  QCOMPARE(tab.shownSweep(), newer);
  QCOMPARE(cells(tab), 2);
  auto* chooser = tab.findChild<QComboBox*>(QStringLiteral("storedSweeps"));
  QVERIFY(chooser);
  QVERIFY(chooser->isEnabled());
  QCOMPARE(chooser->count(), 2);
  const QStringList texts = tab.storedSweeps();
  QCOMPARE(texts.size(), 2);
  QVERIFY2(texts[0].startsWith(QStringLiteral("#%1 window (2 trials, finished)").arg(newer)),
           qPrintable(texts[0]));
  QVERIFY2(
      texts[1].startsWith(QStringLiteral("#%1 margin x window (6 trials, finished)").arg(older)),
      qPrintable(texts[1]));
  QCOMPARE(chooser->currentIndex(), 0);

  // Choosing the other shows its grid: 2 margins x 3 windows.
  shown.clear();
  chooser->setCurrentIndex(1);
  QVERIFY(shown.wait(30000));
  QCOMPARE(shown.at(0).at(0).toLongLong(), older);
  QCOMPARE(tab.shownSweep(), older);
  QCOMPARE(cells(tab), 6);
  // With its first row's loss curves, one for each window.
  QTRY_COMPARE_WITH_TIMEOUT(tab.plots()[1]->graphCount(), 3, 30000);

  // A sweep stored while the tab was hidden is listed, first, when it is shown again;
  // the sweep shown stays.
  tab.hide();
  const int64_t later = finished_sweep(engine.store(), "later", {"margin=0,1,2"}, level);
  listed.clear();
  tab.show();
  QVERIFY(listed.wait(30000));
  QCOMPARE(tab.storedSweeps().size(), 3);
  QVERIFY(tab.storedSweeps()[0].startsWith(QStringLiteral("#%1 ").arg(later)));
  QCOMPARE(tab.shownSweep(), older);
  QCOMPARE(chooser->currentIndex(), 2);

  // Another database without sweeps: nothing to choose, and nothing of the last one shown.
  ExportablePlot* heat = tab.plots()[0];
  ExportablePlot* curves = tab.plots()[1];
  const int heat_height = heat->height(), curves_height = curves->height();
  listed.clear();
  QVERIFY(engine.openDatabase(dir_.filePath(QStringLiteral("empty.sqlite"))));
  QVERIFY(listed.count() > 0 || listed.wait(30000));
  QVERIFY(tab.storedSweeps().isEmpty());
  QCOMPARE(chooser->currentText(), QStringLiteral("no stored sweeps"));
  QVERIFY(!chooser->isEnabled());
  QCOMPARE(tab.shownSweep(), int64_t{0});
  QCOMPARE(cells(tab), 0);
  // The heatmap and the overlay are empty: no cells, no ticks or labels of the old
  // sweep's axes, no colour scale of its figures, no curves; it says that no sweep is
  // shown.
  auto* map = qobject_cast<QCPColorMap*>(heat->plottable(0));
  QVERIFY(map);
  QCOMPARE(map->data()->keySize(), 0);
  QCOMPARE(map->data()->valueSize(), 0);
  for (QCPAxis* axis : {heat->xAxis, heat->yAxis}) {
    QVERIFY2(axis->label().isEmpty(), qPrintable(axis->label()));
    const auto ticker = axis->ticker().dynamicCast<QCPAxisTickerText>();
    QVERIFY2(!ticker || ticker->ticks().isEmpty(),
             qPrintable(QStringList(ticker->ticks().values()).join(QLatin1Char(' '))));
    QVERIFY(ticker || !axis->tickLabels());
  }
  QVERIFY(!map->colorScale()->visible());
  QVERIFY(map->colorScale()->axis()->label().isEmpty());
  QTRY_COMPARE_WITH_TIMEOUT(curves->graphCount(), 0, 30000);
  QVERIFY(!curves->legend->visible());
  QVERIFY(tab.overlayTitle().isEmpty());
  bool said = false;
  for (int i = 0; i < heat->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(heat->item(i)))
      said = said || (t->visible() && t->text() == QStringLiteral("no sweep shown"));
  QVERIFY(said);
  // The loss plot's axis rect keeps the plot's width (no empty legend holds it to a sliver).
  QTest::qWait(50);  // the layout settled
  QVERIFY2(curves->axisRect()->width() > curves->width() / 2,
           qPrintable(QStringLiteral("axis rect %1 px wide of %2")
                          .arg(curves->axisRect()->width())
                          .arg(curves->width())));
  // Neither plot gives up its share (only the line of the best setting is gone).
  QVERIFY2(heat->height() >= heat_height && curves->height() >= curves_height,
           qPrintable(QStringLiteral("heights %1, %2 were %3, %4")
                          .arg(heat->height())
                          .arg(curves->height())
                          .arg(heat_height)
                          .arg(curves_height)));
}

// A database without sweeps: the heatmap has no axes of its own to show (no labels, no
// ticks, no colour scale), it says that no sweep is shown.
void SweepHeatmapTest::aDatabaseWithoutSweepsShowsNoAxes() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("none.sqlite")));
  SweepsTab tab(&engine);
  QSignalSpy listed(&tab, &SweepsTab::sweepsListed);
  tab.resize(1400, 900);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QVERIFY(listed.count() > 0 || listed.wait(30000));
  ExportablePlot* heat = tab.plots()[0];
  for (QCPAxis* axis : {heat->xAxis, heat->yAxis}) {
    QVERIFY2(axis->label().isEmpty(), qPrintable(axis->label()));
    QVERIFY(!axis->tickLabels());
  }
  auto* map = qobject_cast<QCPColorMap*>(heat->plottable(0));
  QVERIFY(map);
  QVERIFY(!map->colorScale()->visible());
  auto* said = heat->findChild<QCPItemText*>(QStringLiteral("noSweep"));
  QVERIFY(said);
  QVERIFY(said->visible());
  QCOMPARE(said->text(), QStringLiteral("no sweep shown"));
}

// A stored sweep chosen beside a form that still holds the preset's grid: the line under
// the "Sweep" list says what the shown sweep was run with (its grid, seeds and base
// config), the form is the "New sweep" one, apart, and "Copy to new sweep" puts the shown
// sweep's settings in it. Another database without sweeps describes none.
void SweepHeatmapTest::theShownSweepIsDescribedApartFromTheNewSweepForm() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("described.sqlite")));
  SweepSpec spec;
  spec.name = "margin over seeds";
  spec.base.model = ModelKind::Mlp;
  spec.base.steps = kSteps;
  spec.base.stats_interval = 5;
  spec.axes.push_back(parse_grid("margin=0,1,2"));
  spec.seeds = 2;
  const int64_t sweep = engine.store().create_sweep(spec.name, sweep_json(spec));
  for (const SweepTrial& t : expand_sweep(spec))
    add_run(engine.store(), sweep, t, 0.5, RunStatus::Finished);
  engine.store().set_sweep_status(sweep, fp8wb::SweepStatus::Finished);
  engine.store().flush();

  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  auto* form = tab.findChild<QGroupBox*>(QStringLiteral("newSweep"));
  QVERIFY(form);
  QCOMPARE(form->title(), QStringLiteral("New sweep"));
  auto* grid = tab.findChild<QPlainTextEdit*>(QStringLiteral("gridText"));
  auto* base = tab.findChild<QPlainTextEdit*>(QStringLiteral("baseText"));
  auto* seeds = tab.findChild<QSpinBox*>(QStringLiteral("seedsPerPoint"));
  QVERIFY(grid && base && seeds);
  QVERIFY(form->isAncestorOf(grid) && form->isAncestorOf(base) && form->isAncestorOf(seeds));
  QVERIFY2(grid->toPlainText().contains(QStringLiteral("window")),
           qPrintable(grid->toPlainText()));  // the preset's grid, for a new sweep

  auto* shown = tab.findChild<QLabel*>(QStringLiteral("shownSweepSpec"));
  QVERIFY(shown);
  QVERIFY(shown->isVisible());
  QVERIFY(!form->isAncestorOf(shown));
  const QString text = shown->text();
  for (const char* part :
       {"grid margin=0,1,2", "2 seeds a point", "model=mlp", "steps=40", "stats_interval=5"})
    QVERIFY2(text.contains(QLatin1String(part)), qPrintable(part + (": " + text)));
  QVERIFY2(!text.contains(QStringLiteral("window")), qPrintable(text));

  auto* copy = tab.findChild<QPushButton*>(QStringLiteral("copyToForm"));
  QVERIFY(copy);
  QVERIFY(copy->isEnabled());
  QTest::mouseClick(copy, Qt::LeftButton);
  QCOMPARE(grid->toPlainText(), QStringLiteral("margin=0,1,2"));
  QCOMPARE(seeds->value(), 2);
  const QStringList lines = base->toPlainText().split(QLatin1Char('\n'));
  for (const char* line : {"model=mlp", "steps=40", "stats_interval=5"})
    QVERIFY2(lines.contains(QLatin1String(line)), qPrintable(base->toPlainText()));
  QVERIFY2(!base->toPlainText().contains(QStringLiteral("drift")), qPrintable(base->toPlainText()));

  QSignalSpy listed(&tab, &SweepsTab::sweepsListed);
  QVERIFY(engine.openDatabase(dir_.filePath(QStringLiteral("described_empty.sqlite"))));
  QVERIFY(listed.count() > 0 || listed.wait(30000));
  QVERIFY2(shown->text().isEmpty(), qPrintable(shown->text()));
  QVERIFY(!copy->isEnabled());
}

namespace {

// Where each of the tab's visible widgets is, in the tab's coordinates.
std::map<QWidget*, QRect> widget_places(QWidget& tab) {
  std::map<QWidget*, QRect> places;
  for (QWidget* w : tab.findChildren<QWidget*>())
    if (w->isVisible()) places[w] = QRect(w->mapTo(&tab, QPoint(0, 0)), w->size());
  return places;
}

// What moved between two layouts, among the widgets visible in both, or empty.
QString moved(const std::map<QWidget*, QRect>& before, const std::map<QWidget*, QRect>& after) {
  QStringList what;
  for (const auto& [w, r] : before) {
    const auto a = after.find(w);
    if (a == after.end() || a->second == r) continue;
    what << QStringLiteral("%1 (%2) %3,%4 %5x%6 -> %7,%8 %9x%10")
                .arg(QString::fromLatin1(w->metaObject()->className()), w->objectName())
                .arg(r.x())
                .arg(r.y())
                .arg(r.width())
                .arg(r.height())
                .arg(a->second.x())
                .arg(a->second.y())
                .arg(a->second.width())
                .arg(a->second.height());
  }
  return what.join(QStringLiteral("; "));
}

}  // namespace

// Choosing for y the axis on x: one row of cells along it, said on the y axis, the other
// axis held by its slicer; nothing of the tab moves or changes size, the heatmap keeps its
// place, and the tab asks for no more room; back to two axes, the same again.
void SweepHeatmapTest::theSameAxisAcrossAndUpKeepsTheLayout() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("same_axis.sqlite")));
  const int64_t sweep =
      finished_sweep(engine.store(), "same axis", {"margin=0,1", "window=1,16,1024"},
                     [](const SweepTrial& t) { return 0.5 + 0.1 * std::stod(t.values[0]); });
  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  auto* x = tab.findChild<QComboBox*>(QStringLiteral("xAxis"));
  auto* y = tab.findChild<QComboBox*>(QStringLiteral("yAxis"));
  QVERIFY(x && y);
  QCOMPARE(x->currentText(), QStringLiteral("window"));
  QCOMPARE(y->currentText(), QStringLiteral("margin"));
  ExportablePlot* heat = tab.plots()[0];
  auto settle = [&] {
    QTest::qWait(50);
    heat->replot();
  };
  settle();
  const auto before = widget_places(tab);
  const QSize min_before = tab.minimumSizeHint();
  const QRect rect_before = heat->axisRect()->rect();

  y->setCurrentIndex(y->findText(QStringLiteral("window")));
  settle();
  auto* map = qobject_cast<QCPColorMap*>(heat->plottable(0));
  QVERIFY(map);
  QCOMPARE(map->data()->keySize(), 3);
  QCOMPARE(map->data()->valueSize(), 1);
  QVERIFY2(heat->yAxis->label().contains(QStringLiteral("one row")) &&
               heat->yAxis->label().contains(QStringLiteral("window")),
           qPrintable(heat->yAxis->label()));
  bool held = false;  // margin, at its first value
  for (QComboBox* c : tab.findChildren<QComboBox*>())
    held = held || (c->isVisible() && c->currentText() == QStringLiteral("margin=0"));
  QVERIFY(held);
  const QString one_row = moved(before, widget_places(tab));
  QVERIFY2(one_row.isEmpty(), qPrintable(one_row));
  QCOMPARE(tab.minimumSizeHint(), min_before);
  const QRect rect = heat->axisRect()->rect();
  QCOMPARE(rect.left(), rect_before.left());
  QCOMPARE(rect.top(), rect_before.top());
  QCOMPARE(rect.bottom(), rect_before.bottom());

  y->setCurrentIndex(y->findText(QStringLiteral("margin")));
  settle();
  QCOMPARE(map->data()->valueSize(), 2);
  QCOMPARE(heat->yAxis->label(), QStringLiteral("margin"));
  const QString two_axes = moved(before, widget_places(tab));
  QVERIFY2(two_axes.isEmpty(), qPrintable(two_axes));
  QCOMPARE(heat->axisRect()->rect().left(), rect_before.left());
}

// A trial of a finished sweep deleted on the Runs tab: the question names the sweep, and
// the Sweeps tab, left as it was, shows that cell as deleted (cross-hatched, "deleted
// 1/1"), not grey "still to run", without another sweep being chosen.
void SweepHeatmapTest::aTrialDeletedOnTheRunsTabReadsDeleted() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("deleted.sqlite")));
  const int64_t sweep = finished_sweep(engine.store(), "del", {"margin=0,1", "window=1,16"},
                                       [](const SweepTrial&) { return 1.0; });
  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  tab.setAxes(1, 0);                                    // x = window, y = margin
  const std::vector<int64_t> trial = tab.runsAt(1, 0);  // margin=0 window=16
  QCOMPARE(trial.size(), size_t{1});

  RunsTab runs(&engine);
  QSignalSpy reloaded(&runs, &RunsTab::reloaded);
  runs.resize(1200, 700);
  runs.show();
  QVERIFY(QTest::qWaitForWindowExposed(&runs));
  QVERIFY(reloaded.count() > 0 || reloaded.wait(30000));
  QTRY_COMPARE(runs.model()->rowCount(), 4);
  auto* view = runs.findChild<QTableView*>(QStringLiteral("runs"));
  QVERIFY(view);
  int row = -1;
  for (int r = 0; r < runs.model()->rowCount(); ++r)
    if (runs.model()->runAt(r)->id == trial[0]) row = r;
  QVERIFY(row >= 0);
  QTest::mouseClick(view->viewport(), Qt::LeftButton, {},
                    view->visualRect(runs.model()->index(row, RunListModel::Id)).center());
  QTest::mouseClick(runs.findChild<QPushButton*>(QStringLiteral("delete")), Qt::LeftButton);
  // margin=0's row overlaid: its two windows' curves.
  QSignalSpy curves(&tab, &SweepsTab::curvesShown);
  tab.overlayLine(0, 0, false);
  QVERIFY(curves.wait(30000));
  QCOMPARE(tab.plots()[1]->graphCount(), 2);
  auto* confirm = runs.findChild<QMessageBox*>(QStringLiteral("delete-runs"));
  QVERIFY(confirm);
  QVERIFY2(confirm->text().contains(QStringLiteral("sweep #%1").arg(sweep)),
           qPrintable(confirm->text()));
  QTest::mouseClick(confirm->button(QMessageBox::Yes), Qt::LeftButton);

  ExportablePlot* plot = tab.plots()[0];
  auto item_at = [&](const QString& name, int x, int y) { return cell_item(plot, name, x, y); };
  QTRY_VERIFY_WITH_TIMEOUT(item_at(QStringLiteral("deletedCell"), 1, 0), 30000);
  QVERIFY(!item_at(QStringLiteral("unfinishedCell"), 1, 0));
  auto* mark = qobject_cast<QCPItemText*>(item_at(QStringLiteral("cellMark"), 1, 0));
  QVERIFY(mark);
  QVERIFY2(mark->text().contains(QStringLiteral("deleted")), qPrintable(mark->text()));
  QVERIFY(std::isnan(tab.cellValue(1, 0)));
  // The other cells keep their figures; the deleted run's curve is gone.
  QVERIFY(!std::isnan(tab.cellValue(0, 0)));
  QVERIFY(!item_at(QStringLiteral("deletedCell"), 0, 0));
  QTRY_COMPARE_WITH_TIMEOUT(tab.plots()[1]->graphCount(), 1, 30000);
}

// Before a sweep is shown, the loss curves' plot is empty: a line over it says how to
// fill it; once curves are drawn it is gone.
void SweepHeatmapTest::theEmptyCurvesPlotSaysHowToFillIt() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("hint.sqlite")));
  SweepsTab tab(&engine);
  tab.resize(1400, 900);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  ExportablePlot* curves = tab.plots()[1];
  auto* hint = curves->findChild<QCPItemText*>(QStringLiteral("emptyHint"));
  QVERIFY2(hint, "no hint in the empty curves plot");
  QVERIFY(hint->visible());
  QVERIFY2(hint->text().contains(QStringLiteral("sweep")), qPrintable(hint->text()));
  const int64_t sweep =
      finished_sweep(engine.store(), "hint", {"margin=0,1"}, [](const SweepTrial&) { return 1.0; });
  QSignalSpy drawn(&tab, &SweepsTab::curvesShown);
  QVERIFY(show_sweep(tab, sweep));
  tab.overlayLine(0, 0, false);
  QVERIFY(drawn.count() > 0 || drawn.wait(30000));
  curves->replot(QCustomPlot::rpImmediateRefresh);
  QVERIFY(!hint->visible());
}

namespace {

// The tick labels of an axis as drawn now ("1 4"): what the window's own replots left.
QString drawn_tick_labels(QCPAxis* axis) {
  for (int i = 0; i < 10; ++i) {
    QCoreApplication::processEvents();
    QTest::qWait(20);
  }
  QStringList labels;
  for (const QString& l : axis->tickVectorLabels()) labels << l;
  return labels.join(u' ');
}

}  // namespace

// A 2 x 2 sweep with one trial's run deleted while the Sweeps tab was never opened (it
// reads the newest sweep then, drawn on a page not laid out yet): opened, both axes have
// a tick label for each of their values, and the line over the heatmap counts the trial
// as deleted, not as one still to run.
void SweepHeatmapTest::aDeletedTrialKeepsEveryTickAndIsCountedDeleted() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("deleted_ticks.sqlite")));
  const int64_t sweep = finished_sweep(engine.store(), "ticks", {"margin=0,1", "window=1,4"},
                                       [](const SweepTrial&) { return 1.0; });
  QTabWidget window;
  window.addTab(new QWidget, QStringLiteral("Runs"));
  auto* tab = new SweepsTab(&engine);
  window.addTab(tab, QStringLiteral("Sweeps"));
  window.resize(1400, 900);
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  int64_t trial = 0;  // margin=0 window=4
  for (const RunInfo& r : engine.store().runs()) {
    const QString name = QString::fromStdString(r.name);
    if (r.parent_sweep == sweep && name.contains(QStringLiteral("margin=0")) &&
        name.contains(QStringLiteral("window=4")))
      trial = r.id;
  }
  QVERIFY(trial > 0);
  QSignalSpy shown(tab, &SweepsTab::sweepShown);
  engine.deleteRuns({trial});
  QVERIFY(shown.wait(30000));
  QCOMPARE(tab->shownSweep(), sweep);
  window.setCurrentWidget(tab);
  ExportablePlot* plot = tab->plots()[0];
  QCOMPARE(drawn_tick_labels(plot->xAxis), QStringLiteral("1 4"));
  QCOMPARE(drawn_tick_labels(plot->yAxis), QStringLiteral("0 1"));
  QVERIFY(cell_item(plot, QStringLiteral("deletedCell"), 1, 0));
  const QString best = tab->bestText();
  QVERIFY2(best.contains(QStringLiteral("3 of 4 trials finished, 1 deleted")), qPrintable(best));
}

// A trial's run deleted by another program (the CLI's `fp8wb runs delete`) while the
// sweep is shown: the heatmap notices it by itself, as the Runs tab notices its list
// change, without the sweep being chosen again.
void SweepHeatmapTest::aTrialDeletedByAnotherProgramReadsDeleted() {
  const QString path = dir_.filePath(QStringLiteral("deleted_elsewhere.sqlite"));
  int64_t sweep = 0;
  {
    auto store = RunStore::open(path.toStdString());
    sweep = finished_sweep(*store, "elsewhere", {"margin=0,1", "window=1,16"},
                           [](const SweepTrial&) { return 1.0; });
  }
  EngineController engine;
  engine.setDatabasePath(path);
  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  tab.setAxes(1, 0);
  const std::vector<int64_t> trial = tab.runsAt(1, 0);
  QCOMPARE(trial.size(), size_t{1});
  ExportablePlot* plot = tab.plots()[0];
  QVERIFY(!cell_item(plot, QStringLiteral("deletedCell"), 1, 0));
  {
    // Another program's connection: the tab's engine hears nothing of it.
    auto other = RunStore::open(path.toStdString());
    other->delete_run(trial[0]);
    other->flush();
  }
  QTRY_VERIFY_WITH_TIMEOUT(cell_item(plot, QStringLiteral("deletedCell"), 1, 0), 10000);
  QVERIFY(std::isnan(tab.cellValue(1, 0)));
  QVERIFY(!std::isnan(tab.cellValue(0, 0)));
  QCOMPARE(drawn_tick_labels(plot->xAxis), QStringLiteral("1 16"));
  QVERIFY2(tab.bestText().contains(QStringLiteral("1 deleted")), qPrintable(tab.bestText()));
}

namespace {

// A sweep over `axes` whose trials follow a reference loss falling from 63 to about 23
// over 100 steps, offset by offset(trial), and spike to `spike` at step 72 where
// spiked(trial) (the final loss's window, steps 90..99, is after it).
int64_t spiking_sweep(RunStore& store, const std::vector<const char*>& axes,
                      const std::function<double(const SweepTrial&)>& offset,
                      const std::function<bool(const SweepTrial&)>& spiked, double spike = 60,
                      const std::function<bool(const SweepTrial&)>& ref_blows_up = {}) {
  SweepSpec spec;
  spec.name = "spikes";
  spec.base.model = ModelKind::Mlp;
  for (const char* a : axes) spec.axes.push_back(parse_grid(a));
  const int64_t sweep = store.create_sweep(spec.name, sweep_json(spec));
  for (const SweepTrial& t : expand_sweep(spec)) {
    const int64_t id = store.create_run(t.config.name, fp8wb::RunKind::SweepTrial,
                                        run_config_json(t.config), "cpu", sweep);
    MetricBatch b;
    b.run_id = id;
    for (int64_t s = 0; s < 100; ++s) {
      StepMetrics m;
      m.step = s;
      m.ref_loss = 23 + 40 * std::exp(-static_cast<double>(s) / 10);
      m.loss = s == 72 && spiked(t) ? spike : m.ref_loss + offset(t);
      if (ref_blows_up && ref_blows_up(t) && s >= 50) m.ref_loss = 200;  // from 23.3
      m.loss_gap = m.loss - m.ref_loss;
      b.steps.push_back(m);
    }
    b.final = true;
    b.status = RunStatus::Finished;
    store.write(std::move(b));
  }
  store.set_sweep_status(sweep, fp8wb::SweepStatus::Finished);
  store.flush();
  return sweep;
}

}  // namespace

// The case: margin 4's trials have the lowest final loss but spiked to 60 at step
// 72 where the reference was at 23. They are marked "spiked" on the heatmap and passed
// over, named with their spike; the best named is the lowest of the others; the rule is
// stated under the heatmap.
void SweepHeatmapTest::aSpikedTrialIsFlaggedAndNeverTheBest() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("spikes.sqlite")));
  const int64_t sweep = spiking_sweep(
      engine.store(), {"margin=0,1,4", "window=1,16,1024"},
      [](const SweepTrial& t) {
        if (t.values[0] == "4") return -0.9;
        // The others 9% above it: beyond the noise assumed with one seed (5%).
        return t.values[0] == "1" && t.values[1] == "16" ? 0.0 : 2.0;
      },
      [](const SweepTrial& t) { return t.values[0] == "4"; });
  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  tab.setAxes(1, 0);  // x = window, y = margin
  tab.setMetric(SweepMetric::FinalLoss);
  const QString best = tab.bestText();
  QVERIFY2(best.contains(QStringLiteral("best: margin=1 window=16,")), qPrintable(best));
  QVERIFY2(!best.contains(QStringLiteral("best: margin=4")), qPrintable(best));
  QVERIFY2(best.contains(QStringLiteral(
               "passed over as their loss spiked (the mildest spike first): margin=4 window=1 ")),
           qPrintable(best));
  // The spike's size, not a yes/no: 60 against the reference's 23.03, +161 %.
  QVERIFY2(best.contains(QStringLiteral("(+161%) at step 72")), qPrintable(best));
  QVERIFY2(best.contains(QStringLiteral("at step 72")), qPrintable(best));
  QVERIFY2(best.contains(QStringLiteral("3 spiked")), qPrintable(best));
  // The rule, in short beside the heatmap and whole in its tooltip.
  QVERIFY2(best.contains(QStringLiteral("passing over spiked or diverged ones")), qPrintable(best));
  auto* verdict = tab.findChild<QLabel*>(QStringLiteral("verdict"));
  QVERIFY(verdict);
  QVERIFY2(verdict->toolTip().contains(QStringLiteral("passing over points with a flagged trial")),
           qPrintable(verdict->toolTip()));
  ExportablePlot* plot = tab.plots()[0];
  for (int x = 0; x < 3; ++x) {
    auto* mark = qobject_cast<QCPItemText*>(cell_item(plot, QStringLiteral("cellMark"), x, 2));
    QVERIFY(mark);
    QCOMPARE(mark->text(), QStringLiteral("spiked +161 %"));
    QVERIFY(!cell_item(plot, QStringLiteral("cellMark"), x, 1));
  }
  // The tooltip gives the size too.
  auto* map = qobject_cast<QCPColorMap*>(plot->plottable(0));
  QVERIFY(map);
  plot->replot(QCustomPlot::rpImmediateRefresh);
  QToolTip::hideText();
  QTest::mouseMove(plot, map->coordsToPixels(0, 2).toPoint());
  QTest::qWaitFor([] { return QToolTip::isVisible(); }, 5000);
  QVERIFY2(QToolTip::text().contains(QStringLiteral("over the reference, +161 %")),
           qPrintable(QToolTip::text()));
  QToolTip::hideText();
  // Coloured by the spike: margin 4's cells at the scale's top.
  tab.setMetric(SweepMetric::Spike);
  QVERIFY(std::abs(tab.cellValue(0, 2) - (60 - (23 + 40 * std::exp(-7.2)))) < 1e-9);
}

// Final losses 1% apart (one seed): the noise is 2% of the final loss, and no winner is
// named; the settings within it are.
void SweepHeatmapTest::finalLossesWithinTheNoiseCrownNoWinner() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("noise.sqlite")));
  const int64_t sweep = spiking_sweep(
      engine.store(), {"margin=0,1", "window=1,16"},
      [](const SweepTrial& t) { return t.values[0] == "1" ? 0.0 : 0.23; },
      [](const SweepTrial&) { return false; });
  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  const QString best = tab.bestText();
  QVERIFY2(best.contains(QStringLiteral("no clear best: 4 settings are within the noise")),
           qPrintable(best));
  QVERIFY2(!best.contains(QStringLiteral("<b>best")), qPrintable(best));
}

// Issue #52: the best's own reference blew up (another point's held): its loss gap reads
// "none (the reference blew up)", not "none (no reference)", since it had one.
void SweepHeatmapTest::aBestWhoseReferenceBlewUpSaysSo() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("refblew.sqlite")));
  const int64_t sweep = spiking_sweep(
      engine.store(), {"margin=0,1", "window=1"},
      [](const SweepTrial& t) { return t.values[0] == "1" ? 5.0 : 0.0; },
      [](const SweepTrial&) { return false; }, 60,
      [](const SweepTrial& t) { return t.values[0] == "0"; });
  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  const QString best = tab.bestText();
  QVERIFY2(best.contains(QStringLiteral("best: margin=0 window=1,")), qPrintable(best));
  QVERIFY2(best.contains(QStringLiteral("Its loss gap none (the reference blew up)")),
           qPrintable(best));
  QVERIFY2(!best.contains(QStringLiteral("no reference")), qPrintable(best));
}

// The heatmap's colour range: auto, the figures' lowest to highest, said on the colour bar;
// fixed, a percentage over 0-100 % and a loss from 0, said too.
void SweepHeatmapTest::theColourRangeIsSaidAndCanBeFixed() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("range.sqlite")));
  const int64_t sweep = spiking_sweep(
      engine.store(), {"margin=0,1", "window=1,16"},
      [](const SweepTrial& t) { return t.values[0] == "1" ? 0.0 : 1.0; },
      [](const SweepTrial&) { return false; });
  SweepsTab tab(&engine);
  QVERIFY(show_sweep(tab, sweep));
  tab.setMetric(SweepMetric::FinalLoss);
  auto* map = qobject_cast<QCPColorMap*>(tab.plots()[0]->plottable(0));
  auto* range = tab.findChild<QComboBox*>(QStringLiteral("colourRange"));
  QVERIFY(map && range);
  QCOMPARE(range->currentIndex(), 0);  // auto
  const QCPRange own = map->dataRange();
  QVERIFY2(own.lower > 20, qPrintable(QString::number(own.lower)));
  QString label = map->colorScale()->axis()->label();
  QVERIFY2(label.contains(
               QStringLiteral("(auto range: %1 to %2)")
                   .arg(QString::number(own.lower, 'g', 3), QString::number(own.upper, 'g', 3))),
           qPrintable(label));
  range->setCurrentIndex(1);  // fixed: a loss from 0
  QCOMPARE(map->dataRange().lower, 0.0);
  QCOMPARE(map->dataRange().upper, own.upper);
  label = map->colorScale()->axis()->label();
  QVERIFY2(label.contains(QStringLiteral("(fixed range: 0 to")), qPrintable(label));
  tab.setMetric(SweepMetric::UnderflowPct);  // a percentage: 0-100 %
  QCOMPARE(map->dataRange(), kPercentRange);
  label = map->colorScale()->axis()->label();
  QVERIFY2(label.contains(QStringLiteral("underflow %")) &&
               label.contains(QStringLiteral("(fixed range: 0 to 100)")),
           qPrintable(label));
}

// A block map of relative errors from 0.0255 to 0.0275: auto spans just those, and says
// so; fixed spans 0-0.1, and says so.
void SweepHeatmapTest::aBlockMapsRangeCanBeFixed() {
  ExportablePlot plot;
  auto* map = new QCPColorMap(plot.xAxis, plot.yAxis);
  auto* scale = new QCPColorScale(&plot);
  plot.plotLayout()->addElement(0, 1, scale);
  map->setColorScale(scale);
  fill_block_map(map, 2, 2, {0.0255f, 0.026f, 0.027f, 0.0275f});
  apply_block_map_range(map, QStringLiteral("relative RMS error"), false);
  QVERIFY(std::abs(map->dataRange().lower - 0.0255) < 1e-6);
  QVERIFY(std::abs(map->dataRange().upper - 0.0275) < 1e-6);
  QVERIFY2(scale->axis()->label().contains(QStringLiteral("(auto range: 0.0255 to 0.0275)")),
           qPrintable(scale->axis()->label()));
  apply_block_map_range(map, QStringLiteral("relative RMS error"), true);
  QCOMPARE(map->dataRange(), kRelativeErrorRange);
  QCOMPARE(scale->axis()->label(), QStringLiteral("relative RMS error\n(fixed range: 0 to 0.1)"));
  // A cell's tooltip names the figure, not the range said under it.
  plot.resize(400, 300);
  plot.show();
  QVERIFY(QTest::qWaitForWindowExposed(&plot));
  plot.replot(QCustomPlot::rpImmediateRefresh);
  QToolTip::hideText();
  QTest::mouseMove(&plot, map->coordsToPixels(0, 0).toPoint());
  QVERIFY(QTest::qWaitFor([] { return QToolTip::isVisible(); }, 5000));
  QVERIFY2(QToolTip::text().endsWith(QStringLiteral(": relative RMS error 0.0255")),
           qPrintable(QToolTip::text()));
}

QTEST_MAIN(SweepHeatmapTest)
#include "sweep_heatmap_test.moc"
