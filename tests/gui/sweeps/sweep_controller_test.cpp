// SweepController without any widget (a QCoreApplication): a tiny sweep started through
// it says started, each trial's end and the progress, then finished with its points;
// stop() ends a sweep whose trial runs on, "stopped"; a spec the grid refuses is said by
// failed(), naming the field and what it takes, and stores nothing.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/sweep.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/sweeps/sweep_controller.h"

using namespace fp8wb;

class SweepControllerTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void tinySweepSaysEachStep();
  void stopEndsTheSweep();
  void aBadSpecIsRefused();

 private:
  QTemporaryDir dir_;
};

namespace {

SweepSpec spec_of(const std::string& base, const std::vector<std::string>& grid) {
  SweepSpec spec;
  spec.name = "controller test";
  for (const std::string& line : {std::string("model=mlp"), std::string("reference=false"), base})
    apply_override(spec.base, line);
  for (const std::string& axis : grid) spec.axes.push_back(parse_grid(axis));
  return spec;
}

}  // namespace

void SweepControllerTest::tinySweepSaysEachStep() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("tiny.sqlite")));
  SweepController sweeps(&engine);
  QSignalSpy started(&sweeps, &SweepController::started);
  QSignalSpy trial(&sweeps, &SweepController::trialFinished);
  QSignalSpy progress(&sweeps, &SweepController::progress);
  QSignalSpy finished(&sweeps, &SweepController::finished);
  QSignalSpy failed(&sweeps, &SweepController::failed);
  QCOMPARE(sweeps.start(spec_of("steps=3", {"margin=0,1"}), 1), QString());
  QVERIFY(sweeps.busy());
  QCOMPARE(started.count(), 1);
  const qint64 id = started.at(0).at(0).toLongLong();
  QVERIFY(id > 0);
  QCOMPARE(id, sweeps.sweepId());
  QCOMPARE(started.at(0).at(1).toInt(), 2);
  QCOMPARE(sweeps.trials().size(), size_t{2});
  QVERIFY(finished.wait(120000));
  QCOMPARE(failed.count(), 0);
  QVERIFY(!sweeps.busy());
  // Each trial's end, then the count so far, all before finished().
  QCOMPARE(trial.count(), 2);
  for (const QList<QVariant>& t : trial) {
    QCOMPARE(t.at(0).toLongLong(), id);
    QCOMPARE(t.at(2).value<RunStatus>(), RunStatus::Finished);
  }
  QCOMPARE(progress.count(), 2);
  QCOMPARE(progress.at(1).at(1).toInt(), 2);
  QCOMPARE(progress.at(1).at(2).toInt(), 2);
  const auto o = finished.at(0).at(0).value<SweepOutcome>();
  QCOMPARE(o.sweep_id, id);
  QVERIFY(o.status == fp8wb::SweepStatus::Finished);
  QVERIFY(o.error.empty());
  QCOMPARE(o.spec.axes.size(), size_t{1});
  QCOMPARE(o.points.size(), size_t{2});
  for (const SweepPoint& p : o.points) QVERIFY(p.complete());
  int children = 0;
  for (const RunInfo& r : engine.store().runs()) children += r.parent_sweep == id ? 1 : 0;
  QCOMPARE(children, 2);
}

// A short trial, then one far too long to wait for: stop() after the first ends stops
// the second, and the sweep ends "stopped". A second start meanwhile is refused.
void SweepControllerTest::stopEndsTheSweep() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("stop.sqlite")));
  SweepController sweeps(&engine);
  QSignalSpy trial(&sweeps, &SweepController::trialFinished);
  QSignalSpy finished(&sweeps, &SweepController::finished);
  QSignalSpy failed(&sweeps, &SweepController::failed);
  QCOMPARE(sweeps.start(spec_of("stats_interval=100", {"steps=2,100000"}), 1), QString());
  QVERIFY(trial.wait(120000));
  QCOMPARE(trial.at(0).at(1).toInt(), 0);
  QCOMPARE(trial.at(0).at(2).value<RunStatus>(), RunStatus::Finished);
  QVERIFY(sweeps.busy());
  const QString again = sweeps.start(spec_of("steps=2", {"margin=0"}), 1);
  QVERIFY2(again.contains(QStringLiteral("a sweep is running")), qPrintable(again));
  QCOMPARE(failed.count(), 1);
  sweeps.stop();
  QVERIFY(finished.wait(60000));
  const auto o = finished.at(0).at(0).value<SweepOutcome>();
  QVERIFY(o.status == fp8wb::SweepStatus::Stopped);
  for (int i = 1; i < trial.count(); ++i)
    QCOMPARE(trial.at(i).at(2).value<RunStatus>(), RunStatus::Stopped);
  QVERIFY(engine.store().sweep(o.sweep_id)->status == fp8wb::SweepStatus::Stopped);
  QCOMPARE(engine.store().sweeps().size(), size_t{1});  // the refused start stored nothing
}

void SweepControllerTest::aBadSpecIsRefused() {
  EngineController engine;
  engine.setDatabasePath(dir_.filePath(QStringLiteral("bad.sqlite")));
  SweepController sweeps(&engine);
  QSignalSpy started(&sweeps, &SweepController::started);
  QSignalSpy failed(&sweeps, &SweepController::failed);
  const QString error = sweeps.start(spec_of("steps=2", {"window=1,-3"}));
  QVERIFY2(error.contains(QStringLiteral("'window'")) && error.contains(QStringLiteral("[1, ")),
           qPrintable(error));
  QCOMPARE(failed.count(), 1);
  QCOMPARE(failed.at(0).at(0).toString(), error);
  SweepSpec unknown = spec_of("steps=2", {});
  unknown.axes.push_back(SweepAxis{"no_such_field", {"1"}, {}});
  const QString error2 = sweeps.start(unknown);
  QVERIFY2(error2.contains(QStringLiteral("no_such_field")), qPrintable(error2));
  QCOMPARE(failed.count(), 2);
  QCOMPARE(started.count(), 0);
  QVERIFY(!sweeps.busy());
  QCOMPARE(sweeps.sweepId(), int64_t{0});
  QVERIFY(engine.store().sweeps().empty());
}

QTEST_GUILESS_MAIN(SweepControllerTest)
#include "sweep_controller_test.moc"
