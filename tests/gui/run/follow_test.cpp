// Following runs that another process writes, offscreen: a real writer (the CLI, as a
// child process) and the GUI's reader on one database at once. The Runs tab finds the run
// by itself and marks it live; opening it makes the tabs follow it step by step; the end
// (finished, or a writer killed with SIGKILL) is said; the writer is never blocked or its
// database corrupted. Also the run panel's device list and --set style overrides, and the
// memory figure a run records.
#include <QComboBox>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"
#include "fp8wb/views/run_tabs/run_tabs.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "main_window.h"

using namespace fp8wb;

class FollowTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase();
  void followsAWriterProcessToItsEnd();
  void aKilledWriterIsInterrupted();
  void deviceListAndOverrides();

 private:
  QString db(const QString& name) const { return dir_.filePath(name); }
  // Starts `fp8wb train` writing into `path`.
  void startWriter(QProcess& p, const QString& path, int steps);
  // The Runs tab's row of the run named `name` once its background refresh shows it.
  const RunInfo* waitForRun(MainWindow& w, const QString& name);
  // Starts a writer of `steps` steps into `path`, shows `w` on that database, and returns
  // the writer's row once the Runs tab lists it (null if it never does).
  const RunInfo* startWriterAndFindIt(QProcess& writer, MainWindow& w, const QString& path,
                                      int steps);
  QTemporaryDir dir_;
};

void FollowTest::initTestCase() {
  QVERIFY(dir_.isValid());
  qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
}

void FollowTest::startWriter(QProcess& p, const QString& path, int steps) {
  p.setProgram(QStringLiteral(FP8WB_BINARY));
  p.setArguments({QStringLiteral("train"), QStringLiteral("--db"), path, QStringLiteral("--quiet"),
                  QStringLiteral("--set"), QStringLiteral("name=writer"), QStringLiteral("--set"),
                  QStringLiteral("steps=%1").arg(steps), QStringLiteral("--set"),
                  QStringLiteral("d_model=32"), QStringLiteral("--set"),
                  QStringLiteral("context=32"), QStringLiteral("--set"), QStringLiteral("batch=4"),
                  QStringLiteral("--set"), QStringLiteral("stats_interval=5")});
  p.setProcessChannelMode(QProcess::ForwardedChannels);
  p.start();
}

const RunInfo* FollowTest::waitForRun(MainWindow& w, const QString& name) {
  RunListModel* m = w.runsTab()->model();
  w.runsTab()->show();
  for (int i = 0; i < 300; ++i) {
    w.runsTab()->refreshInBackground();
    QTest::qWait(100);
    for (int r = 0; r < m->rowCount(); ++r) {
      const RunInfo* info = m->runAt(r);
      if (info && QString::fromStdString(info->name) == name) return info;
    }
  }
  return nullptr;
}

const RunInfo* FollowTest::startWriterAndFindIt(QProcess& writer, MainWindow& w,
                                                const QString& path, int steps) {
  startWriter(writer, path, steps);
  if (!writer.waitForStarted()) return nullptr;
  w.engine()->setDatabasePath(path);
  w.show();
  return waitForRun(w, QStringLiteral("writer"));
}

void FollowTest::followsAWriterProcessToItsEnd() {
  const QString path = db(QStringLiteral("follow.sqlite"));
  QProcess writer;
  MainWindow w(false);
  const RunInfo* info = startWriterAndFindIt(writer, w, path, 100);
  QVERIFY(info);
  const int64_t id = info->id;
  QVERIFY(info->live);
  // The list shows it as live, by itself.
  const QModelIndex status = w.runsTab()->model()->index(0, RunListModel::Status);
  QVERIFY(w.runsTab()
              ->model()
              ->data(status, Qt::DisplayRole)
              .toString()
              .contains(QStringLiteral("live")));

  QSignalSpy finished(w.engine(), &EngineController::finished);
  QSignalSpy opened(w.engine(), &EngineController::opened);
  Q_EMIT w.runsTab()->openRequested(id);
  QVERIFY(opened.wait(30000));  // read on a pool thread
  QVERIFY(w.engine()->isFollowing());
  QCOMPARE(w.engine()->followedRun(), id);
  // Steps arrive while the writer is still writing.
  const size_t first = w.engine()->data().steps().size();
  QTRY_VERIFY_WITH_TIMEOUT(
      w.engine()->data().steps().size() > first + 10 || writer.state() != QProcess::Running, 60000);
  const bool seen_growing = writer.state() == QProcess::Running;
  QVERIFY2(seen_growing,
           "the writer ended before the follower saw steps arrive: a slower run is needed");
  QVERIFY(w.overviewTab()->summaryText().contains(QStringLiteral("running")));

  QVERIFY(writer.waitForFinished(300000));
  QCOMPARE(writer.exitStatus(), QProcess::NormalExit);
  QCOMPARE(writer.exitCode(), 0);  // never blocked, never failed by the reader
  QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 20000);
  QCOMPARE(qvariant_cast<RunStatus>(finished.at(0).at(0)), RunStatus::Finished);
  QVERIFY(!w.engine()->isFollowing());
  // Every stored step arrived, once.
  const auto store = RunStore::open_read_only(path.toStdString());
  QCOMPARE(store->integrity_check(), std::string("ok"));
  const auto loss = store->series(id, "loss");
  const auto& steps = w.engine()->data().steps();
  QCOMPARE(steps.size(), loss.size());
  for (size_t i = 0; i < steps.size(); ++i) QCOMPARE(steps[i].step, loss[i].step);
  QVERIFY(!w.engine()->data().tensors().empty());
  QCOMPARE(w.engine()->data().status(), RunStatus::Finished);
  // A CPU run records the resident memory it added to its process, and the Overview
  // shows it.
  const auto bars = w.overviewTab()->memoryBars();
  QCOMPARE(bars.size(), size_t{1});
  QVERIFY(bars[0].first.contains(QStringLiteral("the run added")));
  QVERIFY(bars[0].second > 0);
}

void FollowTest::aKilledWriterIsInterrupted() {
  const QString path = db(QStringLiteral("killed.sqlite"));
  QProcess writer;
  MainWindow w(false);
  const RunInfo* info = startWriterAndFindIt(writer, w, path, 1000000);
  QVERIFY(info);
  const int64_t id = info->id;
  QSignalSpy finished(w.engine(), &EngineController::finished);
  QSignalSpy opened(w.engine(), &EngineController::opened);
  Q_EMIT w.runsTab()->openRequested(id);
  QVERIFY(opened.wait(30000));
  QVERIFY(w.engine()->isFollowing());
  QTRY_VERIFY_WITH_TIMEOUT(w.engine()->data().steps().size() >= 3, 60000);
  writer.kill();                            // SIGKILL
  QVERIFY(writer.waitForFinished(300000));  // a generous bound: a busy machine reaps late
  QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 20000);
  QCOMPARE(qvariant_cast<RunStatus>(finished.at(0).at(0)), RunStatus::Interrupted);
  QVERIFY(w.engine()->data().steps().size() >= 3);  // what was stored stays shown
  // The list says so too, and the GUI can start a run of its own now.
  QSignalSpy reloaded(w.runsTab(), &RunsTab::reloaded);
  w.runsTab()->reload();
  QVERIFY(reloaded.wait(30000));
  QCOMPARE(w.runsTab()->model()->runAt(0)->status, RunStatus::Interrupted);
  QVERIFY(!w.runsTab()->model()->runAt(0)->live);
}

void FollowTest::deviceListAndOverrides() {
  MainWindow w(false);
  RunPanel* p = w.runPanel();
  const BackendInfo b = probe_backend();
  const auto combo = p->findChildren<QComboBox*>();
  QComboBox* device = nullptr;
  for (QComboBox* c : combo) {
    if (c->findText(QStringLiteral("cpu")) >= 0) device = c;
  }
  QVERIFY(device);
  QCOMPARE(device->count(), 1 + static_cast<int>(b.cuda_device_names.size()));
  for (size_t i = 0; i < b.cuda_device_names.size(); ++i) {
    const QString text = device->itemText(static_cast<int>(i) + 1);
    QVERIFY(text.startsWith(QStringLiteral("cuda:%1").arg(i)));
    QVERIFY(text.contains(QString::fromStdString(b.cuda_device_names[i])));
  }
  // Runs go to the first GPU where there is one.
  QCOMPARE(QString::fromStdString(p->config().device),
           b.cuda_device_names.empty() ? QStringLiteral("cpu") : QStringLiteral("cuda:0"));
  QVERIFY(p->applyOverrides({QStringLiteral("device=cpu"), QStringLiteral("d_model=96"),
                             QStringLiteral("heads=3")})
              .isEmpty());
  QCOMPARE(p->config().device, std::string("cpu"));
  QCOMPARE(p->config().d_model, 96);
  QCOMPARE(p->config().heads, 3);
  const QString err = p->applyOverrides({QStringLiteral("d_model=-4")});
  QVERIFY(err.contains(QStringLiteral("d_model")));
  QCOMPARE(p->config().d_model, 96);  // a refused override changes nothing
  // A device that does not exist is refused at Start with its name.
  QVERIFY(p->applyOverrides({QStringLiteral("device=cuda:7")}).isEmpty());
  const QString start = p->start();
  QVERIFY2(start.contains(QStringLiteral("cuda:7")), qPrintable(start));
  QVERIFY(!w.engine()->isRunning());
}

QTEST_MAIN(FollowTest)
#include "follow_test.moc"
