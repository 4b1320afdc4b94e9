// The Sweeps tab's "Collect from folder…": a sweep submitted with the real `fp8wb sweep
// --slurm` (sbatch and sacct stand-ins on PATH say what a cluster would), one trial's
// database written, the other's task failed; the button collects the folder in the
// background with its progress: the finished trial's run carries the loss it was written
// with, the failed task is a failed run with Slurm's state, the list shows both. A folder
// that is not a sweep's is refused naming it, and the button works again. A folder whose
// sweep the open database lacks is said in the workbench's terms, over the sweep still
// shown.
#include <QFile>
#include <QLabel>
#include <QListWidget>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <string>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/sweep.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"

using namespace fp8wb;

class SweepsCollectTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void collectsAFolderInTheBackground();
  void aFailedCollectionSaysWhatIsShown();

 private:
  QTemporaryDir dir_;
};

namespace {

void write_script(const QString& path, const QByteArray& text) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(text);
  f.close();
  QVERIFY(f.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
}

double loss_at(int64_t step) {
  return 2.0 + 1.0 / static_cast<double>(step + 1);
}

}  // namespace

void SweepsCollectTest::initTestCase() {
  QVERIFY(dir_.isValid());
  qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
  qputenv("XDG_CONFIG_HOME", dir_.path().toUtf8());
  // What a cluster would say: the job taken, task 0 completed, task 1 failed.
  QDir().mkpath(dir_.filePath(QStringLiteral("bin")));
  write_script(dir_.filePath(QStringLiteral("bin/sbatch")), "#!/bin/sh\necho 4242\n");
  write_script(dir_.filePath(QStringLiteral("bin/sacct")),
               "#!/bin/sh\nprintf '4242_0|COMPLETED|0:0|None\\n4242_1|FAILED|1:0|"
               "NonZeroExitCode\\n'\n");
  qputenv("PATH", dir_.filePath(QStringLiteral("bin")).toUtf8() + ":" + qgetenv("PATH"));
}

void SweepsCollectTest::collectsAFolderInTheBackground() {
  const QString db = dir_.filePath(QStringLiteral("s.sqlite"));
  const QString folder = dir_.filePath(QStringLiteral("sw"));
  QProcess submit;
  submit.start(QStringLiteral(FP8WB_BINARY),
               {QStringLiteral("sweep"), QStringLiteral("--db"), db, QStringLiteral("--set"),
                QStringLiteral("model=mlp"), QStringLiteral("--grid"), QStringLiteral("margin=0,1"),
                QStringLiteral("--name"), QStringLiteral("cluster"), QStringLiteral("--slurm"),
                QStringLiteral("--slurm-dir"), folder});
  QVERIFY(submit.waitForFinished(60000));
  QVERIFY2(submit.exitCode() == 0, submit.readAllStandardError().constData());

  // Trial 0's task wrote its run (three steps, then finished); trial 1's never did.
  std::string uuid;
  {
    QFile u(folder + QStringLiteral("/trials/0.uuid"));
    QVERIFY(u.open(QIODevice::ReadOnly));
    uuid = u.readAll().trimmed().toStdString();
    auto trial = RunStore::open((folder + QStringLiteral("/trials/0.sqlite")).toStdString());
    const int64_t id = trial->create_run("trial 0", fp8wb::RunKind::Train, "{}", "cpu", 0, uuid);
    MetricBatch b;
    b.run_id = id;
    for (int64_t s = 0; s < 3; ++s) {
      StepMetrics m;
      m.step = s;
      m.loss = loss_at(s);
      b.steps.push_back(m);
    }
    trial->write(b);
    trial->set_status(id, RunStatus::Finished);
    trial->flush();
  }

  EngineController engine;
  engine.setDatabasePath(db);
  SweepsTab tab(&engine);
  tab.resize(1200, 800);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QString asked_for;
  tab.setFolderChooser([&](QWidget*) { return asked_for; });
  auto* button = tab.findChild<QPushButton*>(QStringLiteral("collect-folder"));
  auto* progress = tab.findChild<QProgressBar*>(QStringLiteral("collect-progress"));
  auto* list = tab.findChild<QListWidget*>();
  QVERIFY(button && progress && list);
  QCOMPARE(button->text(), QStringLiteral("Collect from folder…"));

  QSignalSpy collected(&tab, &SweepsTab::collected);
  QSignalSpy failed(&tab, &SweepsTab::failed);
  asked_for = folder;
  QTest::mouseClick(button, Qt::LeftButton);
  QVERIFY(collected.count() > 0 || collected.wait(60000));
  QCOMPARE(failed.count(), 0);
  QCOMPARE(collected.at(0).at(1).toInt(), 2);  // both trials recorded now
  QCOMPARE(collected.at(0).at(2).toInt(), 0);  // none to come
  QCOMPARE(progress->maximum(), 2);
  QCOMPARE(progress->value(), 2);
  QVERIFY(!progress->isVisible());
  QVERIFY(button->isEnabled());

  const qint64 sweep_id = collected.at(0).at(0).toLongLong();
  auto store = RunStore::open_read_only(db.toStdString());
  const auto sweep = store->sweep(sweep_id);
  QVERIFY(sweep);
  QCOMPARE(QString::fromStdString(sweep->name), QStringLiteral("cluster"));
  QCOMPARE(sweep->status, SweepStatus::Finished);
  int finished = 0, failed_runs = 0;
  for (const RunInfo& r : store->runs()) {
    if (r.parent_sweep != sweep_id) continue;
    if (r.uuid == uuid) {
      ++finished;
      QCOMPARE(r.status, RunStatus::Finished);
      const auto loss = store->series(r.id, "loss");
      QCOMPARE(loss.size(), size_t{3});
      for (const SeriesPoint& p : loss) QCOMPARE(p.value, loss_at(p.step));
    } else {
      ++failed_runs;
      QCOMPARE(r.status, RunStatus::Failed);
      QVERIFY2(QString::fromStdString(r.message).contains(QStringLiteral("Slurm: FAILED")),
               r.message.c_str());
    }
  }
  QCOMPARE(finished, 1);
  QCOMPARE(failed_runs, 1);
  QCOMPARE(list->count(), 2);
  QVERIFY2(list->item(0)->text().contains(QStringLiteral("finished")),
           qPrintable(list->item(0)->text()));
  QVERIFY2(list->item(1)->text().contains(QStringLiteral("failed")),
           qPrintable(list->item(1)->text()));

  // A folder that is not a sweep's: refused by name; the button works again.
  asked_for = dir_.filePath(QStringLiteral("bin"));
  QTest::mouseClick(button, Qt::LeftButton);
  QVERIFY(failed.count() > 0 || failed.wait(30000));
  const QString message = failed.at(0).at(0).toString();
  QVERIFY2(message.contains(asked_for) && message.contains(QStringLiteral("sweep.json")),
           qPrintable(message));
  QTRY_VERIFY(button->isEnabled());
  QCOMPARE(collected.count(), 1);
}

// A folder whose sweep was submitted from another database than the one open: the
// failure names the folder and both databases and says what to do in the workbench's
// terms (the File menu, not a command-line option); over the heatmap, which still shows
// the sweep shown before, a line says nothing was collected and that what is shown is that
// sweep, unchanged. With the sweep's own database open, the folder is collected and the
// line goes.
void SweepsCollectTest::aFailedCollectionSaysWhatIsShown() {
  const QString submitted_from = dir_.filePath(QStringLiteral("submitted.sqlite"));
  const QString other = dir_.filePath(QStringLiteral("other.sqlite"));
  const QString folder = dir_.filePath(QStringLiteral("elsewhere"));
  QProcess submit;
  submit.start(QStringLiteral(FP8WB_BINARY),
               {QStringLiteral("sweep"), QStringLiteral("--db"), submitted_from,
                QStringLiteral("--set"), QStringLiteral("model=mlp"), QStringLiteral("--grid"),
                QStringLiteral("margin=0,1"), QStringLiteral("--name"), QStringLiteral("submitted"),
                QStringLiteral("--slurm"), QStringLiteral("--slurm-dir"), folder});
  QVERIFY(submit.waitForFinished(60000));
  QVERIFY2(submit.exitCode() == 0, submit.readAllStandardError().constData());
  // The database open here holds another sweep, shown in the tab.
  int64_t shown_id = 0;
  {
    SweepSpec spec;
    spec.name = "before";
    spec.axes = {parse_grid("window=1,16,128")};
    auto store = RunStore::open(other.toStdString());
    shown_id = store->create_sweep(spec.name, sweep_json(spec));
    store->flush();
  }
  EngineController engine;
  engine.setDatabasePath(other);
  SweepsTab tab(&engine);
  tab.resize(1200, 800);
  tab.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tab));
  QSignalSpy shown(&tab, &SweepsTab::sweepShown);
  tab.showSweep(shown_id);
  QVERIFY(shown.count() > 0 || shown.wait(30000));
  auto* failure = tab.findChild<QLabel*>(QStringLiteral("collect-failure"));
  QVERIFY(failure);
  QVERIFY(!failure->isVisible());

  tab.setFolderChooser([&](QWidget*) { return folder; });
  auto* button = tab.findChild<QPushButton*>(QStringLiteral("collect-folder"));
  QVERIFY(button);
  QSignalSpy failed(&tab, &SweepsTab::failed);
  QSignalSpy collected(&tab, &SweepsTab::collected);
  QTest::mouseClick(button, Qt::LeftButton);
  QVERIFY(failed.count() > 0 || failed.wait(30000));
  QTRY_VERIFY(button->isEnabled());
  const QString message = failed.at(0).at(0).toString();
  for (const QString& part :
       {folder, submitted_from, other, QStringLiteral("File > Open database")})
    QVERIFY2(message.contains(part), qPrintable(part + QStringLiteral(" | ") + message));
  QVERIFY2(!message.contains(QStringLiteral("--db")), qPrintable(message));
  QVERIFY(failure->isVisible());
  const QString said = failure->text();
  QVERIFY2(said.contains(QStringLiteral("Nothing was collected")) && said.contains(folder),
           qPrintable(said));
  QVERIFY2(said.contains(QStringLiteral("sweep %1 (\"before\"), unchanged").arg(shown_id)),
           qPrintable(said));
  QCOMPARE(collected.count(), 0);

  // The database the sweep came from: collected, and the line is gone.
  engine.setDatabasePath(submitted_from);
  QTest::mouseClick(button, Qt::LeftButton);
  QVERIFY(collected.count() > 0 || collected.wait(60000));
  QVERIFY(!failure->isVisible());
  QCOMPARE(failed.count(), 1);
}

QTEST_MAIN(SweepsCollectTest)
#include "sweeps_collect_test.moc"
