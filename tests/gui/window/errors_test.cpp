// One channel for what goes wrong, offscreen: each controller (the engine, the sweeps,
// the checkpoint analysis, the runs list) says a failure once through failed() (the runs
// list, read again on each visit and every second: once a database), the engine's
// notices (the core's, a run's events) come through notice(), the main window shows both in one
// place, finished() carries the RunStatus (also queued), and opening a large stored run
// leaves the GUI thread free.
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QMessageBox>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>
#include <thread>

#include "fp8wb/core/backend/notices.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/checkpoint/checkpoint_tab.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"
#include "fp8wb/views/run_tabs/run_tabs.h"
#include "fp8wb/views/runs/run_list_model.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"
#include "main_window.h"

using namespace fp8wb;

class ErrorsTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase();
  void engineFailuresArriveOnce();
  void checkpointFailureArrivesOnce();
  void sweepOnACorruptDatabaseFailsOnce();
  void noticesArriveThroughNotice();
  void finishedCarriesTheRunStatus();
  void openingALargeRunLeavesTheGuiThreadFree();
  void aFailureSaidBeforeTheWindowShowsIsNotDrawnOverTheLabels();
  void aLongMessageIsCutBeforeTheDatabaseLabel();
  void aFailureIsTakenDownWhenARunStarts();
  void anUnreadableRunListIsSaidOncePerDatabase();
  void aRunWithAnUnknownStatusLeavesTheOthersListed();
  void aFolderGivenAsTheDatabaseIsSaidToBeAFolder();
  void theFailureMessageIsWindowModal();

 private:
  QString db(const QString& name) const { return dir_.filePath(name); }
  QTemporaryDir dir_;
};

namespace {

// A stored run of `steps` steps, with tensor statistics (histograms, error maps) every
// `every` steps for `layers` layers: large enough that reading it takes a while.
int64_t write_run(const QString& path, int64_t steps, int64_t every, int layers) {
  auto store = RunStore::open(path.toStdString());
  const int64_t id = store->create_run("large", fp8wb::RunKind::Train, "{}", "cpu");
  for (int64_t s = 0; s < steps; s += every) {
    MetricBatch b;
    b.run_id = id;
    for (int64_t k = s; k < s + every && k < steps; ++k) {
      StepMetrics m;
      m.step = k;
      m.loss = 4.0 / static_cast<double>(k + 1);
      m.ref_loss = m.loss;
      b.steps.push_back(m);
    }
    for (int l = 0; l < layers; ++l) {
      for (const Role role : {Role::Input, Role::Weight, Role::GradOutput}) {
        TensorMetrics t;
        t.step = s;
        t.layer = "layers." + std::to_string(l);
        t.role = role;
        t.amax = 1.0f + static_cast<float>(l);
        t.scale = 2.0f;
        t.map_grid.rows = 16;
        t.map_grid.cols = 16;
        t.map_rel_error.assign(256, 0.01f * static_cast<float>(l + 1));
        b.tensors.push_back(std::move(t));
      }
    }
    store->write(b);
  }
  MetricBatch end;
  end.run_id = id;
  end.final = true;
  end.status = RunStatus::Finished;
  store->write(end);
  store->flush();
  return id;
}

}  // namespace

void ErrorsTest::initTestCase() {
  QVERIFY(dir_.isValid());
  qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
  qputenv("XDG_CONFIG_HOME", dir_.path().toUtf8());
}

void ErrorsTest::engineFailuresArriveOnce() {
  const QString path = db(QStringLiteral("failures.sqlite"));
  write_run(path, 10, 5, 1);
  MainWindow w(false);
  w.engine()->setDatabasePath(path);
  QSignalSpy failed(w.engine(), &EngineController::failed);
  QSignalSpy opened(w.engine(), &EngineController::opened);
  // A run id the database does not hold.
  w.engine()->openRun(99);
  QVERIFY(w.engine()->isOpening());
  QVERIFY(failed.wait(30000));
  QTest::qWait(50);
  QCOMPARE(failed.count(), 1);
  QVERIFY(failed.at(0).at(0).toString().contains(QStringLiteral("no run 99")));
  QCOMPARE(opened.count(), 0);
  QVERIFY(!w.engine()->isOpening());
  // The window shows it in its one place: the status bar and the failures' message.
  QCOMPARE(w.failures().size(), 1);
  QVERIFY(w.statusBar()->currentMessage().contains(QStringLiteral("no run 99")));
  // A run that cannot start: the caller gets the message, failed() says it once too.
  RunConfig c = w.runPanel()->config();
  c.device = "cuda:7";
  c.steps = 3;
  QVERIFY(w.engine()->start(c).contains(QStringLiteral("cuda:7")));
  QCOMPARE(failed.count(), 2);
  QVERIFY(failed.at(1).at(0).toString().contains(QStringLiteral("cuda:7")));
  // A stored run that is there opens.
  w.engine()->openRun(1);
  QVERIFY(opened.wait(30000));
  QCOMPARE(opened.at(0).at(0).toLongLong(), 1);
  QCOMPARE(failed.count(), 2);
  QCOMPARE(w.engine()->data().steps().size(), size_t{10});
}

void ErrorsTest::checkpointFailureArrivesOnce() {
  const QString path = db(QStringLiteral("corrupt.safetensors"));
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("\xff\xff\xff\xff\xff\xff\xff\x7f{not json at all");
  f.close();
  MainWindow w(false);
  CheckpointTab* tab = w.checkpointTab();
  QSignalSpy failed(tab, &CheckpointTab::failed);
  QSignalSpy loaded(tab, &CheckpointTab::checkpointLoaded);
  tab->openCheckpoint(path);  // returns at once: the file is opened on a pool thread
  QVERIFY(failed.wait(30000));
  QTest::qWait(50);
  QCOMPARE(failed.count(), 1);
  QVERIFY(failed.at(0).at(0).toString().contains(QStringLiteral("corrupt.safetensors")));
  QCOMPARE(loaded.count(), 0);
  QVERIFY(!tab->busy());
  QCOMPARE(w.failures().size(), 1);
  QCOMPARE(w.failures().front(), failed.at(0).at(0).toString());

  // Opened from the window (the Checkpoint tab shown), by a path relative to the working
  // folder: the tab's status line says it, naming the file once, with no message box on
  // top saying it again.
  const QString text = db(QStringLiteral("text.safetensors"));
  QFile t(text);
  QVERIFY(t.open(QIODevice::WriteOnly));
  t.write("just some text, no checkpoint at all\n");
  t.close();
  for (QMessageBox* b : w.findChildren<QMessageBox*>()) b->close();  // the first one's
  const QString cwd = QDir::currentPath();
  QVERIFY(QDir::setCurrent(QFileInfo(text).absolutePath()));
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.openCheckpointFile(QStringLiteral("text.safetensors"));
  QVERIFY(failed.wait(30000));
  QVERIFY(QDir::setCurrent(cwd));
  QCOMPARE(w.failures().size(), 2);
  for (QMessageBox* b : w.findChildren<QMessageBox*>()) QVERIFY(!b->isVisible());
  const QString status = tab->statusText();
  const QString absolute = QFileInfo(text).absoluteFilePath();
  QVERIFY2(status.count(absolute) == 1, qPrintable(status));
  QVERIFY2(w.failures().back().contains(absolute), qPrintable(w.failures().back()));
  // On another tab, the failure comes in a box (the tab's line is out of sight).
  QVERIFY(w.selectTab(QStringLiteral("Formats")));
  tab->openCheckpoint(path);
  QVERIFY(failed.wait(30000));
  bool box = false;
  for (QMessageBox* b : w.findChildren<QMessageBox*>()) box = box || b->isVisible();
  QVERIFY(box);
  for (QMessageBox* b : w.findChildren<QMessageBox*>()) b->close();
}

void ErrorsTest::sweepOnACorruptDatabaseFailsOnce() {
  const QString path = db(QStringLiteral("corrupt.sqlite"));
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(QByteArray(8192, 'x'));
  f.close();
  MainWindow w(false);
  w.engine()->setDatabasePath(path);
  SweepsTab* tab = w.sweepsTab();
  tab->setBaseOverrides(QStringLiteral("model=mlp\nsteps=4"));
  tab->setGridText(QStringLiteral("window=1,4"));
  QSignalSpy failed(tab, &SweepsTab::failed);
  QSignalSpy engine_failed(w.engine(), &EngineController::failed);
  const QString err = tab->start();
  QVERIFY(!err.isEmpty());
  QCOMPARE(failed.count(), 1);
  QCOMPARE(failed.at(0).at(0).toString(), err);
  QVERIFY(!tab->busy());
  QTest::qWait(50);
  QCOMPARE(failed.count(), 1);
  QCOMPARE(engine_failed.count(), 0);  // said once, by the controller that failed
  QCOMPARE(w.failures(), QStringList{err});
  // Reading a sweep's points from it fails the same way, off the GUI thread.
  tab->showSweep(1);
  QVERIFY(tab->isReading());
  QVERIFY(failed.wait(30000));
  QCOMPARE(failed.count(), 2);
  QVERIFY(!tab->isReading());
  // So does the Runs tab's list.
  QSignalSpy runs_failed(w.runsTab(), &RunsTab::failed);
  w.runsTab()->reload();
  QVERIFY(w.runsTab()->isReading());
  QVERIFY(runs_failed.wait(30000));
  QTest::qWait(50);
  QCOMPARE(runs_failed.count(), 1);
  QCOMPARE(w.failures().size(), 3);
}

void ErrorsTest::noticesArriveThroughNotice() {
  MainWindow w(false);
  w.engine()->setDatabasePath(db(QStringLiteral("notices.sqlite")));
  QSignalSpy notices(w.engine(), &EngineController::notice);
  // The core's notices, from any thread, arrive on the GUI thread.
  std::thread([] { notice("a notice from the engine's thread"); }).join();
  QTRY_COMPARE_WITH_TIMEOUT(notices.count(), 1, 10000);
  QCOMPARE(notices.at(0).at(0).toString(), QStringLiteral("a notice from the engine's thread"));
  QVERIFY(w.notices().contains(QStringLiteral("a notice from the engine's thread")));
  // A run's notice events: where it runs, its FP8 layers.
  QVERIFY(w.runPanel()->applyPreset(QStringLiteral("Outliers: tensorwise")));
  RunConfig c = w.runPanel()->config();
  c.device = "cpu";
  c.steps = 3;
  QSignalSpy finished(w.engine(), &EngineController::finished);
  QCOMPARE(w.engine()->start(c), QString());
  QVERIFY(finished.wait(120000));
  bool said_layers = false;
  for (const auto& n : notices) said_layers |= n.at(0).toString().contains("FP8 linear layers");
  QVERIFY(said_layers);
  QVERIFY(w.statusBar()->currentMessage().size() > 0);
  QVERIFY(w.failures().isEmpty());
}

void ErrorsTest::finishedCarriesTheRunStatus() {
  EngineController engine;
  engine.setDatabasePath(db(QStringLiteral("status.sqlite")));
  RunConfig c;
  c.model = ModelKind::Mlp;
  c.steps = 3;
  c.device = "cpu";
  QSignalSpy finished(&engine, &EngineController::finished);
  RunStatus queued = RunStatus::Running;
  QString queued_message = QStringLiteral("-");
  QObject receiver;
  QObject::connect(
      &engine, &EngineController::finished, &receiver,
      [&](RunStatus s, const QString& m) {
        queued = s;
        queued_message = m;
      },
      Qt::QueuedConnection);
  QCOMPARE(engine.start(c), QString());
  QVERIFY(finished.wait(120000));
  QCOMPARE(finished.count(), 1);
  QCOMPARE(qvariant_cast<RunStatus>(finished.at(0).at(0)), RunStatus::Finished);
  QTRY_COMPARE(queued, RunStatus::Finished);
  QCOMPARE(queued_message, finished.at(0).at(1).toString());
  // Stopped is said as such.
  c.steps = 1000000;
  QCOMPARE(engine.start(c), QString());
  QTRY_VERIFY_WITH_TIMEOUT(engine.data().steps().size() >= 2, 60000);
  engine.stop();
  QVERIFY(finished.wait(60000));
  QCOMPARE(qvariant_cast<RunStatus>(finished.at(1).at(0)), RunStatus::Stopped);
}

void ErrorsTest::openingALargeRunLeavesTheGuiThreadFree() {
  const QString path = db(QStringLiteral("large.sqlite"));
  const int64_t id = write_run(path, 60000, 50, 6);
  MainWindow w(false);
  w.engine()->setDatabasePath(path);
  QSignalSpy opened(w.engine(), &EngineController::opened);
  int ticks = 0, ticks_when_opened = -1;
  QTimer timer;
  timer.setInterval(1);
  QObject::connect(&timer, &QTimer::timeout, [&] { ++ticks; });
  QObject::connect(w.engine(), &EngineController::opened, [&] { ticks_when_opened = ticks; });
  timer.start();
  QElapsedTimer took;
  took.start();
  Q_EMIT w.runsTab()->openRequested(id);
  const qint64 call_ms = took.elapsed();
  // openRun has returned and the read goes on.
  QVERIFY(w.engine()->isOpening());
  QCOMPARE(opened.count(), 0);
  QVERIFY(w.statusText().contains(QStringLiteral("opening")));
  QVERIFY(opened.wait(60000));
  const qint64 read_ms = took.elapsed();
  qInfo(
      "openRun returned after %lld ms; the run was shown after %lld ms, %d timer ticks "
      "meanwhile",
      call_ms, read_ms, ticks_when_opened);
  QVERIFY2(ticks_when_opened > 0, "the event loop did not run while the run was read");
  QCOMPARE(w.engine()->data().steps().size(), size_t{60000});
  QVERIFY(!w.engine()->data().tensors().empty());
  QVERIFY(w.statusText().contains(QStringLiteral("opened")));
}

QTEST_MAIN(ErrorsTest)
#include "errors_test.moc"

// A failure said before the window shows (a --db that cannot be opened is said at
// start-up) hides the status bar's labels once it shows, instead of being drawn over them.
void ErrorsTest::aFailureSaidBeforeTheWindowShowsIsNotDrawnOverTheLabels() {
  MainWindow w(false);
  const QString message = QStringLiteral("run database /x/garbage.db: file is not a database");
  w.showFailure(message);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QCOMPARE(w.statusBar()->currentMessage(), message);
  QLabel* device = nullptr;
  for (QLabel* l : w.statusBar()->findChildren<QLabel*>())
    if (l->text().startsWith(QStringLiteral("Device:"))) device = l;
  QVERIFY(device);
  QVERIFY(!device->isVisible());
  w.statusBar()->clearMessage();
  QVERIFY(device->isVisible());
}

// A message longer than the status bar's room ends in "..." before the database label
// (QStatusBar clips it there mid-word, running into the label's text), its whole text in
// the status bar's tooltip; cut again to the room a resized window gives; one that fits
// is shown whole, without a tooltip.
void ErrorsTest::aLongMessageIsCutBeforeTheDatabaseLabel() {
  MainWindow w(false);
  w.engine()->setDatabasePath(db(QStringLiteral("long_message.sqlite")));
  w.resize(900, 600);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QLabel* label = nullptr;
  for (QLabel* l : w.statusBar()->findChildren<QLabel*>())
    if (l->text().startsWith(QStringLiteral("database "))) label = l;
  QVERIFY(label && label->isVisible());
  QString message = QStringLiteral("The run database could not be written:");
  for (int i = 0; i < 12; ++i) message += QStringLiteral(" /a/rather/long/folder/name");
  w.showFailure(message);
  const QFontMetrics fm(w.statusBar()->font());
  auto check = [&] {
    const QString shown = w.statusBar()->currentMessage();
    QVERIFY2(shown.endsWith(QChar(0x2026)), qPrintable(shown));
    QVERIFY(message.startsWith(shown.chopped(1)));
    QVERIFY2(fm.horizontalAdvance(shown) <= label->geometry().left() - 12,
             qPrintable(QStringLiteral("%1 px of text, the label at %2")
                            .arg(fm.horizontalAdvance(shown))
                            .arg(label->geometry().left())));
    QCOMPARE(w.statusBar()->toolTip(), message);
  };
  check();
  const qsizetype narrow = w.statusBar()->currentMessage().size();
  w.resize(1400, 600);
  QTRY_VERIFY(w.statusBar()->currentMessage().size() > narrow);
  check();
  const QString short_one = QStringLiteral("config field 'window': must be >= 1, not 0");
  w.showFailure(short_one);
  QCOMPARE(w.statusBar()->currentMessage(), short_one);
  QVERIFY(w.statusBar()->toolTip().isEmpty());
}

// A failure stays in the status bar until what failed works: a run that starts takes it
// down (a notice or another failure would replace it anyway).
void ErrorsTest::aFailureIsTakenDownWhenARunStarts() {
  MainWindow w(false);
  w.engine()->setDatabasePath(db(QStringLiteral("taken_down.sqlite")));
  const QString message = QStringLiteral("config field 'window': must be >= 1, not 0");
  w.showFailure(message);
  QCOMPARE(w.statusBar()->currentMessage(), message);
  QSignalSpy started(w.engine(), &EngineController::started);
  QSignalSpy finished(w.engine(), &EngineController::finished);
  RunConfig c = w.runPanel()->config();
  c.model = ModelKind::Mlp;
  c.steps = 3;
  QVERIFY(w.engine()->start(c).isEmpty());
  QVERIFY(started.count() > 0 || started.wait(30000));
  QVERIFY(w.statusBar()->currentMessage() != message);
  QVERIFY(finished.wait(120000));
}

// A file that is not a database: the Runs tab, shown again and again (closing the
// failure's message, going to another tab and back) and polling while shown, says so
// once, and shows an empty list with the reason.
void ErrorsTest::anUnreadableRunListIsSaidOncePerDatabase() {
  const QString path = db(QStringLiteral("notdb.sqlite"));
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
  f.write("hello");
  f.close();
  MainWindow w(false);
  w.engine()->setDatabasePath(path);
  w.checkDatabase();  // said at start-up
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  const qsizetype said_at_start = w.failures().size();
  RunsTab* runs = w.runsTab();
  runs->setPollInterval(20);  // polls waited for below, not slept through
  QSignalSpy runs_failed(runs, &RunsTab::failed);
  for (int k = 0; k < 4; ++k) {
    QVERIFY(w.selectTab(QStringLiteral("Runs")));
    QTRY_VERIFY_WITH_TIMEOUT(!runs->isReading(), 30000);
    const int polls = runs->pollReads();
    QTRY_VERIFY_WITH_TIMEOUT(runs->pollReads() > polls && !runs->isReading(), 30000);
    for (QMessageBox* box : w.findChildren<QMessageBox*>())
      if (box->isVisible()) box->close();
    QVERIFY(w.selectTab(QStringLiteral("Formats")));
    QTest::qWait(50);
  }
  QCOMPARE(runs_failed.count(), 1);
  QCOMPARE(w.failures().size(), said_at_start + 1);
  QCOMPARE(runs->model()->rowCount(), 0);
  QVERIFY2(runs->statusText().contains(QLatin1String("could not be read")),
           qPrintable(runs->statusText()));
}

// One run whose stored status this fp8wb does not know: listed as unknown, the others as
// ever, and no failure said.
void ErrorsTest::aRunWithAnUnknownStatusLeavesTheOthersListed() {
  const QString path = db(QStringLiteral("bogus.sqlite"));
  write_run(path, 4, 2, 1);
  write_run(path, 4, 2, 1);
  {
    auto store = RunStore::open(path.toStdString());
    store->exec_on_writer_for_testing("UPDATE runs SET status = 'bogus' WHERE id = 1");
    store->flush();
  }
  MainWindow w(false);
  w.engine()->setDatabasePath(path);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  RunsTab* runs = w.runsTab();
  QSignalSpy runs_failed(runs, &RunsTab::failed);
  QVERIFY(w.selectTab(QStringLiteral("Runs")));
  QTRY_COMPARE_WITH_TIMEOUT(runs->model()->rowCount(), 2, 30000);
  QTRY_VERIFY_WITH_TIMEOUT(!runs->isReading(), 30000);
  const QAbstractItemModel* m = runs->model();
  // Newest first: run 2, then run 1.
  QCOMPARE(m->data(m->index(1, RunListModel::Status)).toString(),
           QStringLiteral("unknown (bogus)"));
  QCOMPARE(m->data(m->index(0, RunListModel::Status)).toString(), QStringLiteral("finished"));
  QCOMPARE(runs_failed.count(), 0);
}

// A folder given as the run database (--db, File > Open database): every message says it
// is a folder, none that there is no database there.
void ErrorsTest::aFolderGivenAsTheDatabaseIsSaidToBeAFolder() {
  const QString folder = db(QStringLiteral("a-folder.sqlite"));
  QVERIFY(QDir().mkpath(folder));
  MainWindow w(false);
  QSignalSpy listed(w.sweepsTab(), &SweepsTab::sweepsListed);
  w.engine()->setDatabasePath(folder);
  w.checkDatabase();  // said at start-up
  QVERIFY(listed.count() > 0 || listed.wait(30000));
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  RunsTab* runs = w.runsTab();
  QVERIFY(w.selectTab(QStringLiteral("Runs")));
  QTRY_VERIFY_WITH_TIMEOUT(!runs->isReading(), 30000);
  QTest::qWait(50);
  // File > Open database, the same folder.
  QVERIFY(!w.openDatabaseFile(folder));
  QVERIFY(w.failures().size() >= 2);
  QStringList said = w.failures();
  said << runs->statusText();
  for (const QString& m : said) {
    QVERIFY2(!m.contains(QLatin1String("no run database")), qPrintable(m));
    QVERIFY2(m.contains(folder) && m.contains(QLatin1String("is a folder")), qPrintable(m));
  }
}

// The failure's message is modal to the window (a click behind it does nothing until it
// is closed), while the event loop and so runs and sweeps go on.
void ErrorsTest::theFailureMessageIsWindowModal() {
  MainWindow w(false);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.showFailure(QStringLiteral("something failed"));
  QMessageBox* box = nullptr;
  for (QMessageBox* b : w.findChildren<QMessageBox*>())
    if (b->isVisible()) box = b;
  QVERIFY(box);
  QCOMPARE(box->text(), QStringLiteral("something failed"));
  QCOMPARE(box->windowModality(), Qt::WindowModal);
  QCOMPARE(QApplication::activeModalWidget(), box);
  // The window behind takes no input while it shows.
  QVERIFY(QApplication::activeModalWidget() != &w);
  bool ticked = false;
  QTimer::singleShot(10, [&ticked] { ticked = true; });
  QTRY_VERIFY(ticked);  // showing it blocks nothing
  box->close();
  QVERIFY(QApplication::activeModalWidget() == nullptr);
}
