// The Sweeps tab's "Replay a run", offscreen, on a run written by hand: one tensor whose
// amax is 1 at every step but step 100 (4), stored scales from the kernels' DelayedScaler
// under the run's own setting (margin 2, window 200). The heatmap fills with the figures
// worked out by hand (step 100 saturates under margins 0 and 1, not 2), the best cell is
// named by the rule, the own setting reproduces the stored scales, the assumption is said,
// a click draws the tensor's amax with the replayed ceiling and its one saturating step,
// and "Train these cells" runs a real sweep of the selected cells.
#include <QLabel>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_tabs/run_data.h"
#include "fp8wb/views/run_tabs/run_tabs.h"
#include "fp8wb/views/sweeps/replay_panel.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"

using namespace fp8wb;

class ReplayPanelTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void heatmapFillsWithTheHandWorkedFigures();
  void scalingTabWhatIfRedrawsTheCeiling();

 private:
  QTemporaryDir dir_;
};

namespace {

// The hand-made run: 300 steps, one tensor (fc1's input, E4M3).
int64_t write_run(RunStore& store) {
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.steps = 8;  // what "Train these cells" trains: small
  c.reference = false;
  c.stats_interval = 4;
  c.margin = 2;
  c.window = 200;
  const int64_t id =
      store.create_run("hand-made", fp8wb::RunKind::Train, run_config_json(c), "cpu");
  MetricBatch b;
  b.run_id = id;
  b.amax_tensors = {{"fc1", Role::Input, Format::E4M3FN}};
  DelayedScaler ref(Format::E4M3FN, {200, 2, AmaxAlgo::Max, InitialScale::One});
  for (int64_t s = 0; s < 300; ++s) {
    const float a = s == 100 ? 4.0f : 1.0f;
    b.step_amax.push_back({s, {a}});
    if (s % 10 == 0) {
      TensorMetrics t;
      t.step = s;
      t.layer = "fc1";
      t.role = Role::Input;
      t.amax = a;
      t.scale = stored_scale_of(ref.scale());
      t.raw.hist[0 - kHistMinExp] = 100;
      b.tensors.push_back(t);
    }
    ref.update(a);
  }
  b.final = true;
  b.status = RunStatus::Finished;
  store.write(std::move(b));
  store.flush();
  return id;
}

}  // namespace

void ReplayPanelTest::heatmapFillsWithTheHandWorkedFigures() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("r.sqlite")));
  const int64_t id = write_run(engine.store());
  SweepsTab tab(&engine);
  tab.resize(1300, 900);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  ReplayPanel* p = tab.replayPanel();
  QVERIFY(p);
  QSignalSpy listed(p, &ReplayPanel::runsListed);
  tab.showReplay();
  QVERIFY(listed.count() > 0 || listed.wait(10000));
  QVERIFY2(p->runEntries().size() == 1, qPrintable(p->runEntries().join(QStringLiteral("; "))));
  p->setAxes(QStringLiteral("0,1,2"), QStringLiteral("1,200"), true, false);
  QVERIFY(p->selectRun(id));
  QSignalSpy replayed(p, &ReplayPanel::replayed);
  p->replay();
  QVERIFY(replayed.wait(30000));
  // x: window (1, 200), y: margin (0, 1, 2).
  p->setFigure(ReplayPanel::SaturatingSteps);
  QCOMPARE(p->cellValue(0, 0), 1.0);
  QCOMPARE(p->cellValue(1, 1), 1.0);
  QCOMPARE(p->cellValue(0, 2), 0.0);
  QCOMPARE(p->cellValue(1, 2), 0.0);
  p->setFigure(ReplayPanel::MedianHeadroom);
  QCOMPARE(p->cellValue(0, 2), 2.0);
  QCOMPARE(p->cellValue(1, 2), 4.0);
  // Margin 2 takes the spike at step 100 with no room left (4 x 448/4 = 448): no cell is
  // safe, and the verdict says so rather than calling it best.
  p->setFigure(ReplayPanel::ClosestHeadroom);
  QCOMPARE(p->cellValue(0, 2), 0.0);
  QCOMPARE(p->cellValue(1, 0), -2.0);
  QVERIFY2(p->bestText().contains(QStringLiteral(
               "No cell keeps 0.5 binade of headroom at its closest approach; the most: margin "
               "2, window 1, max")),
           qPrintable(p->bestText()));
  QVERIFY2(!p->bestText().contains(QStringLiteral("Best:")), qPrintable(p->bestText()));
  // Margin 2 is the largest margin given: the verdict says the grid ends there.
  QVERIFY2(p->bestText().contains(QStringLiteral(
               "at the edge of the grid (margin 2, the largest given): try beyond it")),
           qPrintable(p->bestText()));
  QVERIFY2(p->checkText().contains(QStringLiteral("reproduced bit for bit (30 sampled")),
           qPrintable(p->checkText()));
  QVERIFY2(p->assumptionText().contains(QStringLiteral("does not depend on the setting")),
           qPrintable(p->assumptionText()));
  QVERIFY(p->findChild<QLabel*>(QStringLiteral("replayAssumption"))->isVisible());
  // A click: the amax, the replayed ceiling (448 / scale), the run's own, the one step
  // that saturates.
  QSignalSpy shown(p, &ReplayPanel::cellShown);
  p->showCell(0, 0);
  QCOMPARE(shown.count(), 1);
  ExportablePlot* curves = p->trajectory();
  QCOMPARE(curves->graphCount(), 4);
  QCOMPARE(curves->graph(0)->dataCount(), 300);
  QCOMPARE(curves->graph(3)->dataCount(), 1);
  QCOMPARE(curves->graph(3)->data()->at(0)->key, 100.0);
  // Window 1, margin 0: step 101's scale is 448 / 4, its ceiling 4.
  QCOMPARE(curves->graph(1)->data()->at(101)->value, 4.0);
  QVERIFY2(p->trajectoryTitle().contains(QStringLiteral("fc1/input under margin 0, window 1")),
           qPrintable(p->trajectoryTitle()));
  // Train these cells: (window 1, margin 0) and (window 1, margin 2) in a real sweep.
  p->toggleSelected(0, 0);
  p->toggleSelected(0, 2);
  QCOMPARE(p->selectedGridText(), QStringLiteral("margin=0,2\nwindow=1\namax_algo=max"));
  QCOMPARE(p->trainedCellCount(), 2);
  // Two cells on a diagonal span four: the count says so before anything trains.
  p->toggleSelected(1, 1);
  QCOMPARE(p->trainedCellCount(), 2 * 3);
  p->toggleSelected(1, 1);
  QSignalSpy requested(p, &ReplayPanel::trainRequested);
  QSignalSpy done(&tab, &SweepsTab::sweepFinished);
  p->trainSelected();
  QCOMPARE(requested.count(), 1);
  QVERIFY(requested.at(0).at(0).toString().contains(QStringLiteral("scaling=delayed")));
  QVERIFY(done.wait(120000));
  QCOMPARE(done.at(0).at(1).toString(), QStringLiteral("finished"));
  int children = 0;
  for (const RunInfo& r : engine.store().runs())
    children += r.parent_sweep == done.at(0).at(0).toLongLong() ? 1 : 0;
  QCOMPARE(children, 2);
}

// The Scaling tab's what-if on the same hand-made run, read as a follower reads it: margin
// 0, window 1 puts the ceiling at 4 on step 101 (448 / (448 / 4)) and saturates step 100
// alone; margin 2 saturates none; off, nothing is drawn.
void ReplayPanelTest::scalingTabWhatIfRedrawsTheCeiling() {
  auto store = RunStore::open(dir_.filePath(QStringLiteral("w.sqlite")).toStdString());
  const int64_t id = write_run(*store);
  RunData data;
  RunCursor cursor;
  data.load(*store, id, &cursor);
  QCOMPARE(data.stepAmax().step_count(), size_t{300});
  QCOMPARE(data.stepAmax().tensor_count(), size_t{1});
  ScalingTab tab(&data);
  tab.resize(1200, 900);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  tab.refresh(true);
  QVERIFY(tab.select(QStringLiteral("fc1"), QStringLiteral("input")));
  // The run's own amax and ceiling at every step it recorded, not the samples' joined:
  // margin 2, window 200: 1 x 2^2 until step 100's amax of 4 enters the window, 16 after.
  QCPGraph* blue = tab.amaxPlot()->graph(0);
  QCPGraph* orange = tab.amaxPlot()->graph(1);
  QCOMPARE(blue->dataCount(), 299);
  QCOMPARE(blue->data()->at(99)->key, 100.0);
  QCOMPARE(blue->data()->at(99)->value, 4.0);
  QCOMPARE(blue->data()->at(100)->value, 1.0);
  QCOMPARE(orange->dataCount(), 300);              // and one past the newest step, to give it width
  QCOMPARE(orange->data()->at(98)->value, 4.0);    // step 99
  QCOMPARE(orange->data()->at(99)->value, 4.0);    // step 100: its scale from steps before
  QCOMPARE(orange->data()->at(100)->value, 16.0);  // step 101
  QCOMPARE(orange->data()->at(104)->value, 16.0);  // step 105, between samples
  QCPGraph* what_if = tab.amaxPlot()->graph(2);
  QVERIFY(!what_if->visible());
  tab.setWhatIf(true, 0, 1, AmaxAlgo::Max);
  QVERIFY(what_if->visible());
  QCOMPARE(what_if->dataCount(), 299);  // "Include step 0" unticked: steps 1-299
  QCOMPARE(what_if->data()->at(100)->key, 101.0);
  QCOMPARE(what_if->data()->at(100)->value, 4.0);
  QCOMPARE(what_if->data()->at(0)->value, 1.0);  // step 1: scale 448 / 1, from step 0's amax
  QVERIFY2(tab.whatIfText().startsWith(QStringLiteral("1 saturating step ")),
           qPrintable(tab.whatIfText()));
  tab.setWhatIf(true, 2, 1, AmaxAlgo::Max);
  QVERIFY2(tab.whatIfText().startsWith(QStringLiteral("0 saturating steps")),
           qPrintable(tab.whatIfText()));
  QCOMPARE(what_if->data()->at(0)->value, 4.0);  // margin 2: the ceiling 2^2 above
  tab.setWhatIf(false, 2, 1, AmaxAlgo::Max);
  QVERIFY(!what_if->visible());
  QCOMPARE(what_if->dataCount(), 0);
}

QTEST_MAIN(ReplayPanelTest)
#include "replay_panel_test.moc"
