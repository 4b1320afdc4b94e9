// The Sweeps tab, offscreen: a small grid runs from the tab, every trial lands in the
// store as a child run, the heatmap cells equal the grid points' figures, slicers pick
// the third axis, an invalid grid is refused naming the field, numerically equal grid
// values run once and are said.
#include <QComboBox>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/sweep.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"

using namespace fp8wb;

class SweepsTabTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void smallSweepFromTheTab();
  void invalidGridIsRefused();
  void equalSpellingsRunOnceAndAreSaid();
  void aFormThatMatchesAPresetShowsIt();

 private:
  QTemporaryDir dir_;
};

void SweepsTabTest::smallSweepFromTheTab() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("s.sqlite")));
  SweepsTab tab(&engine);
  tab.resize(1200, 800);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  // Before any sweep, the trials' list is no blank box: a grey line says what it holds.
  auto* list = tab.findChild<QListWidget*>();
  auto* hint = tab.findChild<QLabel*>(QStringLiteral("noTrials"));
  QVERIFY(list && hint);
  QVERIFY(!list->isVisible());
  QVERIFY(hint->isVisible());
  QVERIFY2(hint->text().contains(QStringLiteral("lists its trials here")),
           qPrintable(hint->text()));
  tab.setBaseOverrides(QStringLiteral("model=mlp\nsteps=8\nstats_interval=4\nreference=false"));
  tab.setGridText(QStringLiteral("margin=0,2\nwindow=1,4\namax_algo=max,most_recent"));
  QSignalSpy done(&tab, &SweepsTab::sweepFinished);
  QCOMPARE(tab.start(), QString());
  QSignalSpy failed(&tab, &SweepsTab::failed);
  QVERIFY(done.wait(120000));
  QCOMPARE(done.at(0).at(1).toString(), QStringLiteral("finished"));
  QCOMPARE(failed.count(), 0);
  const qint64 id = done.at(0).at(0).toLongLong();
  int children = 0;
  for (const RunInfo& r : engine.store().runs()) children += r.parent_sweep == id ? 1 : 0;
  QCOMPARE(children, 8);
  QVERIFY(list->isVisible() && list->count() == 8);  // the trials, in place of the line
  QVERIFY(!hint->isVisible());
  // x = window (axis 1), y = margin (axis 0); amax_algo sliced at its first value.
  tab.setAxes(1, 0);
  tab.setMetric(SweepMetric::UnderflowPct);
  const auto points = sweep_points(engine.store(), id);
  for (const SweepPoint& p : points) {
    if (p.values[2] != "max") continue;
    const int x = p.values[1] == "1" ? 0 : 1;
    const int y = p.values[0] == "0" ? 0 : 1;
    QCOMPARE(tab.cellValue(x, y), p.underflow_pct);
    QCOMPARE(tab.runsAt(x, y), p.run_ids);
  }
  // A verdict, and the rule it follows.
  QVERIFY2(tab.bestText().contains(QStringLiteral("best")), qPrintable(tab.bestText()));
  QVERIFY2(tab.bestText().contains(QStringLiteral("passing over spiked or diverged ones")),
           qPrintable(tab.bestText()));
  // A row overlays its two windows' runs, a column its two margins'.
  QSignalSpy curves(&tab, &SweepsTab::curvesShown);
  tab.overlayLine(0, 1, false);
  QVERIFY(curves.wait(30000));
  QCOMPARE(tab.plots()[1]->graphCount(), 2);
  QVERIFY(tab.plots()[1]->graph(0)->name().startsWith(QStringLiteral("window=")));
  tab.overlayLine(1, 0, true);
  QVERIFY(curves.wait(30000));
  QCOMPARE(tab.plots()[1]->graphCount(), 2);
  QVERIFY(tab.plots()[1]->graph(0)->name().startsWith(QStringLiteral("margin=")));
}

void SweepsTabTest::invalidGridIsRefused() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("bad.sqlite")));
  SweepsTab tab(&engine);
  tab.setBaseOverrides(QStringLiteral("model=mlp\nsteps=4"));
  tab.setGridText(QStringLiteral("window=1,-3"));
  QSignalSpy failed(&tab, &SweepsTab::failed);
  QVERIFY(tab.start().contains(QStringLiteral("window")));
  QCOMPARE(failed.count(), 1);
  QVERIFY(failed.at(0).at(0).toString().contains(QStringLiteral("window")));
  QVERIFY(!tab.busy());
  QVERIFY(engine.store().sweeps().empty());
}

// lr=0.1,1e-1,0.10 is one value spelled three ways: the sweep runs it once, as 0.1, and
// the tab says which spellings it dropped (its line and a notice), as fp8wb sweep does.
void SweepsTabTest::equalSpellingsRunOnceAndAreSaid() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("spellings.sqlite")));
  SweepsTab tab(&engine);
  tab.setBaseOverrides(QStringLiteral("model=mlp\nsteps=2\nreference=false"));
  tab.setGridText(QStringLiteral("lr=0.1,1e-1,0.10"));
  QSignalSpy notices(&tab, &SweepsTab::notice);
  QSignalSpy done(&tab, &SweepsTab::sweepFinished);
  QCOMPARE(tab.start(), QString());
  const QString said = QStringLiteral(
      "grid 'lr': 1e-1 and 0.10 are the number 0.1 again: dropped, so that its trials run "
      "once (as 0.1)");
  QVERIFY(!notices.isEmpty());
  QCOMPARE(notices.at(0).at(0).toString(), said);
  QVERIFY(done.wait(120000));
  QCOMPARE(done.at(0).at(1).toString(), QStringLiteral("finished"));
  int children = 0;
  for (const RunInfo& r : engine.store().runs())
    children += r.parent_sweep == done.at(0).at(0).toLongLong() ? 1 : 0;
  QCOMPARE(children, 1);
}

// The preset box names the preset whose settings the form holds, however they got
// there (typed back after an edit, blanks around the lines), and "custom" otherwise.
void SweepsTabTest::aFormThatMatchesAPresetShowsIt() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("p.sqlite")));
  SweepsTab tab(&engine);
  auto* box = tab.findChild<QComboBox*>(QStringLiteral("sweepPreset"));
  QVERIFY(box);
  QVERIFY(box->count() >= 2);
  const QString second = box->itemText(1);
  QVERIFY(tab.applyPreset(second));
  const QString base = tab.findChild<QPlainTextEdit*>(QStringLiteral("baseText"))->toPlainText();
  const QString grid = tab.findChild<QPlainTextEdit*>(QStringLiteral("gridText"))->toPlainText();
  tab.setGridText(grid + QStringLiteral("\nseed=1,2"));
  QCOMPARE(box->currentIndex(), -1);  // custom
  tab.setGridText(QStringLiteral("  ") + grid + QStringLiteral("\n"));
  QCOMPARE(box->currentText(), second);
  tab.setBaseOverrides(QStringLiteral("steps=3"));
  QCOMPARE(box->currentIndex(), -1);
  tab.setBaseOverrides(base);
  QCOMPARE(box->currentText(), second);
}

QTEST_MAIN(SweepsTabTest)
#include "sweeps_tab_test.moc"
