// The run panel's "Python script…", offscreen, with Debian's python3 and python3-torch: a
// user's script that calls fp8wb.watch() is started with FP8WB_DB and FP8WB_RUN_NAME, the
// run it creates is listed (live, source "python") and followed step by step, its stderr
// shows in the panel, and Stop ends it 'stopped' (SIGINT); a script that ignores SIGINT is
// ended by SIGTERM after the grace time; bad launches are refused naming the file.
#include <signal.h>

#include <QFile>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"
#include "fp8wb/views/run_panel/script_runner.h"
#include "fp8wb/views/runs/run_list_model.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "main_window.h"

using namespace fp8wb;

class ScriptRunnerTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase();
  void aScriptsRunIsListedFollowedAndStopped();
  void aScriptIgnoringSigintIsTerminated();
  void badLaunchesAreRefusedByName();
  void aScriptWithoutWatchIsSaidSo();
  void aScriptNamingItsRunIsFollowed();

 private:
  QString writeScript(const QString& name, const QString& body);
  QTemporaryDir dir_;
};

namespace {
constexpr char kPython[] = "/usr/bin/python3";

// A small model trained until stopped, a step every 50 ms, under fp8wb.watch() with no db=
// or name= (the environment's), printing its arguments to stderr first.
constexpr char kTrainForever[] = R"(import sys, time, torch, fp8wb
print("hello from the script, args:", sys.argv[1:], file=sys.stderr, flush=True)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
with fp8wb.watch(model, stats_interval=2) as w:
    while True:
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        w.step(loss=loss)
        time.sleep(0.05)
)";

bool wait_for(const std::function<bool()>& done, int ms) {
  for (int waited = 0; waited < ms; waited += 50) {
    if (done()) return true;
    QTest::qWait(50);
  }
  return done();
}

RunInfo stored_run(const QString& db, int64_t id) {
  const auto store = RunStore::open_read_only(db.toStdString());
  return store->run(id).value_or(RunInfo{});
}
}  // namespace

void ScriptRunnerTest::initTestCase() {
  QVERIFY(dir_.isValid());
  qputenv("XDG_DATA_HOME", dir_.filePath(QStringLiteral("data")).toUtf8());
  qputenv("XDG_CONFIG_HOME", dir_.filePath(QStringLiteral("config")).toUtf8());
  // The build tree's fp8wb package, for the scripts the panel starts.
  qputenv("PYTHONPATH", FP8WB_PYTHON_PATH);
  QVERIFY2(QFile::exists(QString::fromLatin1(kPython)), "Debian's python3 is needed");
}

QString ScriptRunnerTest::writeScript(const QString& name, const QString& body) {
  const QString path = dir_.filePath(name);
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return {};
  f.write(body.toUtf8());
  return path;
}

void ScriptRunnerTest::aScriptsRunIsListedFollowedAndStopped() {
  const QString db = dir_.filePath(QStringLiteral("scripts.sqlite"));
  // As a GUI started in a shell's background: SIGINT ignored, which its children would
  // inherit (and then never stop on Stop's SIGINT).
  const auto before = ::signal(SIGINT, SIG_IGN);
  MainWindow w(false);
  w.engine()->setDatabasePath(db);
  w.show();
  RunPanel* p = w.runPanel();
  ScriptRunner* runner = p->scriptRunner();
  QSignalSpy created(runner, &ScriptRunner::runCreated);
  QSignalSpy ended(runner, &ScriptRunner::finished);
  const QString script =
      writeScript(QStringLiteral("train.py"), QString::fromLatin1(kTrainForever));
  ScriptLaunch l{QString::fromLatin1(kPython), script,
                 ScriptRunner::splitArguments(QStringLiteral("--flag 'x y'")),
                 QStringLiteral("from the panel")};
  QCOMPARE(p->startScript(l), QString());
  auto* stop = p->findChild<QPushButton*>(QStringLiteral("stop"));
  auto* start = p->findChild<QPushButton*>(QStringLiteral("start"));
  auto* again = p->findChild<QPushButton*>(QStringLiteral("python-script"));
  QVERIFY(stop && start && again);
  QVERIFY(stop->isEnabled());
  QVERIFY(!start->isEnabled());
  QVERIFY(!again->isEnabled());
  // The run the script's watch creates, found and followed.
  QVERIFY2(created.wait(60000), qPrintable(runner->stderrText()));
  const qint64 id = created.at(0).at(0).toLongLong();
  QVERIFY(wait_for([&] { return w.engine()->followedRun() == id; }, 20000));
  QVERIFY(wait_for([&] { return w.engine()->data().steps().size() >= 4; }, 60000));
  QCOMPARE(QString::fromStdString(w.engine()->data().name()), QStringLiteral("from the panel"));
  QVERIFY(w.engine()->data().watched());
  QVERIFY(!w.engine()->data().tensors().empty());  // the statistics of its sampled steps
  // Its stderr, with the arguments as given.
  auto* log = p->findChild<QPlainTextEdit*>(QStringLiteral("script-stderr"));
  QVERIFY(log && log->isVisible());
  QVERIFY(wait_for(
      [&] { return log->toPlainText().contains(QStringLiteral("hello from the script")); }, 10000));
  QVERIFY2(log->toPlainText().contains(QStringLiteral("['--flag', 'x y']")),
           qPrintable(log->toPlainText()));
  // The Runs tab lists it, live, with its source.
  RunListModel* m = w.runsTab()->model();
  w.runsTab()->refreshInBackground();
  QVERIFY(wait_for([&] { return m->rowCount() == 1; }, 10000));
  QCOMPARE(m->data(m->index(0, RunListModel::Source), Qt::DisplayRole).toString(),
           QStringLiteral("python"));
  QVERIFY(m->data(m->index(0, RunListModel::Status), Qt::DisplayRole)
              .toString()
              .contains(QStringLiteral("live")));
  // Stop: SIGINT, which fp8wb.watch() takes as a stop.
  QSignalSpy run_end(w.engine(), &EngineController::finished);
  QTest::mouseClick(stop, Qt::LeftButton);
  QVERIFY(ended.wait(30000) || ended.count() == 1);
  QCOMPARE(ended.at(0).at(2).toBool(), true);
  QVERIFY(wait_for([&] { return run_end.count() == 1; }, 10000));
  QCOMPARE(run_end.at(0).at(0).value<RunStatus>(), RunStatus::Stopped);
  const RunInfo r = stored_run(db, id);
  QCOMPARE(r.status, RunStatus::Stopped);
  QVERIFY2(QString::fromStdString(r.message).contains(QStringLiteral("KeyboardInterrupt")),
           r.message.c_str());
  QVERIFY(r.last_step >= 3);
  ::signal(SIGINT, before);
  QVERIFY(wait_for([&] { return again->isEnabled() && start->isEnabled(); }, 5000));
  QVERIFY(!stop->isEnabled());
  // What the dialog offers next time: the same script, arguments and interpreter.
  const ScriptLaunch kept = ScriptRunner::remembered();
  QCOMPARE(kept.script, script);
  QCOMPARE(kept.interpreter, QString::fromLatin1(kPython));
  QCOMPARE(kept.arguments, (QStringList{QStringLiteral("--flag"), QStringLiteral("x y")}));
}

void ScriptRunnerTest::aScriptIgnoringSigintIsTerminated() {
  const QString db = dir_.filePath(QStringLiteral("stubborn.sqlite"));
  const QString script =
      writeScript(QStringLiteral("stubborn.py"),
                  QStringLiteral("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n") +
                      QString::fromLatin1(kTrainForever));
  ScriptRunner runner;
  QSignalSpy created(&runner, &ScriptRunner::runCreated);
  QSignalSpy ended(&runner, &ScriptRunner::finished);
  QCOMPARE(runner.start({QString::fromLatin1(kPython), script, {}, {}}, db), QString());
  QVERIFY2(created.wait(60000), qPrintable(runner.stderrText()));
  QElapsedTimer t;
  t.start();
  runner.stop(1500);  // the panel's grace is 10 s
  QVERIFY(ended.wait(30000));
  QVERIFY(t.elapsed() >= 1400);  // SIGINT did nothing; SIGTERM ended it
  QVERIFY(!runner.isRunning());
  // The run is named after the script, and ended with its writer.
  const RunInfo r = stored_run(db, created.at(0).at(0).toLongLong());
  QCOMPARE(QString::fromStdString(r.name), QStringLiteral("stubborn"));
  QCOMPARE(r.status, RunStatus::Interrupted);
}

void ScriptRunnerTest::badLaunchesAreRefusedByName() {
  ScriptRunner runner;
  const QString db = dir_.filePath(QStringLiteral("bad.sqlite"));
  const QString missing = dir_.filePath(QStringLiteral("missing.py"));
  QVERIFY(runner.start({QString::fromLatin1(kPython), missing, {}, {}}, db).contains(missing));
  const QString script = writeScript(QStringLiteral("ok.py"), QStringLiteral("print(1)\n"));
  QVERIFY(runner.start({QStringLiteral("no-such-python-here"), script, {}, {}}, db)
              .contains(QStringLiteral("no-such-python-here is not on PATH")));
  QVERIFY(runner.start({dir_.path(), script, {}, {}}, db)
              .contains(QStringLiteral("not an executable")));
  QVERIFY(!runner.isRunning());
  QString err;
  ScriptRunner::splitArguments(QStringLiteral("--a 'open"), &err);
  QVERIFY(err.contains(QStringLiteral("quote")));
}

void ScriptRunnerTest::aScriptWithoutWatchIsSaidSo() {
  MainWindow w(false);
  w.engine()->setDatabasePath(dir_.filePath(QStringLiteral("nowatch.sqlite")));
  w.show();
  RunPanel* p = w.runPanel();
  QSignalSpy ended(p->scriptRunner(), &ScriptRunner::finished);
  const QString script = writeScript(QStringLiteral("plain.py"),
                                     QStringLiteral("import sys\nsys.exit('no watch here')\n"));
  QCOMPARE(p->startScript({QString::fromLatin1(kPython), script, {}, {}}), QString());
  QVERIFY(ended.wait(30000));
  QCOMPARE(ended.at(0).at(0).toInt(), 1);
  QCOMPARE(ended.at(0).at(2).toBool(), false);
  QVERIFY2(p->statusText().contains(QStringLiteral("without creating a run")),
           qPrintable(p->statusText()));
  auto* log = p->findChild<QPlainTextEdit*>(QStringLiteral("script-stderr"));
  QVERIFY(
      wait_for([&] { return log->toPlainText().contains(QStringLiteral("no watch here")); }, 5000));
}

// README's snippet names its run (name="my-run"): the run is the script's all the same.
void ScriptRunnerTest::aScriptNamingItsRunIsFollowed() {
  MainWindow w(false);
  const QString db = dir_.filePath(QStringLiteral("named.sqlite"));
  w.engine()->setDatabasePath(db);
  w.show();
  RunPanel* p = w.runPanel();
  QSignalSpy created(p->scriptRunner(), &ScriptRunner::runCreated);
  QSignalSpy ended(p->scriptRunner(), &ScriptRunner::finished);
  const QString script =
      writeScript(QStringLiteral("named.py"), QStringLiteral(R"(import torch, fp8wb
model = torch.nn.Linear(8, 4)
with fp8wb.watch(model, name="my-own-name", stats_interval=2) as w:
    for _ in range(5):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        loss.backward()
        w.step(loss=loss)
)"));
  QCOMPARE(
      p->startScript({QString::fromLatin1(kPython), script, {}, QStringLiteral("the panel's")}),
      QString());
  const RunConfig form = p->config();
  QVERIFY2(created.wait(60000), qPrintable(p->scriptRunner()->stderrText()));
  const qint64 id = created.at(0).at(0).toLongLong();
  QVERIFY(ended.count() > 0 || ended.wait(60000));
  QVERIFY(wait_for([&] { return w.engine()->data().runId() == id; }, 20000));
  QVERIFY(wait_for([&] { return w.engine()->data().steps().size() == 5; }, 20000));
  // Followed, the script's run leaves the form as it was: its settings are no engine run's.
  QCOMPARE(QString::fromStdString(p->config().name), QString::fromStdString(form.name));
  QCOMPARE(p->config().model, form.model);
  QCOMPARE(ended.at(0).at(0).toInt(), 0);
  QCOMPARE(ended.at(0).at(2).toBool(), true);
  const RunInfo r = stored_run(db, id);
  QCOMPARE(QString::fromStdString(r.name), QStringLiteral("my-own-name"));
  QVERIFY2(!p->statusText().contains(QStringLiteral("without creating a run")),
           qPrintable(p->statusText()));
}

QTEST_MAIN(ScriptRunnerTest)
#include "script_runner_test.moc"
