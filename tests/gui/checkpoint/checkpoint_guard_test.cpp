// The run database is never opened as a checkpoint, offscreen: the database
// file, its -wal and -shm files, a symbolic link and a hard link to it, and a
// sharded index naming it are refused before they are opened, by every way the
// window opens a checkpoint (File > Open checkpoint, the tab's recent files,
// File > Recent files, a drop, --checkpoint); the POSIX locks this process
// holds on those files stay. After a checkpoint that fails to open, the recent
// files' box names no checkpoint and the failure names the file.
// Exports (a run as CSV, a plot) never write over the run database either.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QAction>
#include <QComboBox>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QMenu>
#include <QMimeData>
#include <QProcess>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QUrl>
#include <QtTest>
#include <cstring>

#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/checkpoint/checkpoint_tab.h"
#include "fp8wb/views/common/background_job.h"
#include "fp8wb/views/common/exportable_plot.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"
#include "main_window.h"
#include "screenshot.h"

using namespace fp8wb;

namespace {

// A write lock this process holds on one byte of a file (away from the bytes
// SQLite locks), on a descriptor kept open until the end.
struct HeldLock {
  QByteArray path;
  int fd = -1;
  explicit HeldLock(const QString& file) : path(QFile::encodeName(file)) {
    fd = ::open(path.constData(), O_RDWR);
    if (fd < 0) return;
    struct flock l {};
    l.l_type = F_WRLCK;
    l.l_whence = SEEK_SET;
    l.l_start = 4000;
    l.l_len = 1;
    if (::fcntl(fd, F_SETLK, &l) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ~HeldLock() {
    if (fd >= 0) ::close(fd);
  }
  // Whether another process sees the lock (a process sees none of its own).
  bool held() const {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int f = ::open(path.constData(), O_RDWR);
      struct flock l {};
      l.l_type = F_WRLCK;
      l.l_whence = SEEK_SET;
      l.l_start = 4000;
      l.l_len = 1;
      const bool locked = f >= 0 && ::fcntl(f, F_GETLK, &l) == 0 && l.l_type != F_UNLCK;
      ::_exit(locked ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
};

void write_checkpoint(const QString& path) {
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 97);
  std::vector<uint8_t> b(w.size() * 4);
  std::memcpy(b.data(), w.data(), b.size());
  write_safetensors(path.toStdString(), {{"a.weight", StDtype::F32, {64, 64}, b}});
}

}  // namespace

namespace {

// Until every read the views started in the background has ended, and no new one starts:
// a read's connection closed after this test takes its locks would drop them (a process's
// POSIX locks on a file go with any close of it), and the views start reads of their own
// (the sweeps list, the replay panel's runs, the run it replays...).
void settle_background_reads() {
  for (int quiet = 0; quiet < 3;) {
    const bool idle = background_pool()->activeThreadCount() == 0;
    background_pool()->waitForDone();
    QTest::qWait(20);  // results delivered: a delivery may start the next read
    quiet = idle ? quiet + 1 : 0;
  }
}

}  // namespace

class CheckpointGuardTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
    qputenv("XDG_CONFIG_HOME",
            dir_.path().toUtf8());  // recent files: not the user's
  }
  void theRunDatabaseIsRefusedByEveryPath();
  void aFailedOpenKeepsTheShownCheckpoint();
  void exportsNeverWriteOverTheRunDatabase();
  void aCheckpointOptionThatFailsOpensTheWindowAnyway();
  void exportsNeverWriteOverAnotherDatabase();
  void aScreenshotNeverWritesOverADatabase();

 private:
  QString file(const QString& name) const { return dir_.filePath(name); }
  QTemporaryDir dir_;
};

void CheckpointGuardTest::theRunDatabaseIsRefusedByEveryPath() {
  const QString db = file(QStringLiteral("runs.sqlite"));
  {
    auto store = RunStore::open(db.toStdString());
    store->create_run("one", fp8wb::RunKind::Train, "{}", "cpu");
    store->flush();
  }
  const QString good = file(QStringLiteral("good.safetensors"));
  write_checkpoint(good);
  const QString sym = file(QStringLiteral("link.safetensors"));
  const QString hard = file(QStringLiteral("hard.safetensors"));
  const QString index = file(QStringLiteral("model.safetensors.index.json"));
  {
    QFile f(index);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"weight_map": {"a.weight": "good.safetensors", "b.weight": "runs.sqlite"}})");
  }
  QVERIFY(QFile::link(db, sym));
  QVERIFY(::link(QFile::encodeName(db).constData(), QFile::encodeName(hard).constData()) == 0);

  MainWindow w(false);
  // The Sweeps tab lists the database's sweeps on a connection of its own,
  // closed after: SQLite's close of that file would take this test's locks too
  // (not SQLite's own).
  QSignalSpy listed(w.sweepsTab(), &SweepsTab::sweepsListed);
  w.engine()->setDatabasePath(db);
  QVERIFY(listed.wait(30000));
  w.engine()->store();  // open, as while the window shows its runs
  settle_background_reads();
  QVERIFY(QFile::exists(db + QStringLiteral("-wal")));
  QVERIFY(QFile::exists(db + QStringLiteral("-shm")));
  HeldLock db_lock(db);
  HeldLock shm_lock(db + QStringLiteral("-shm"));
  HeldLock wal_lock(db + QStringLiteral("-wal"));
  QVERIFY(db_lock.fd >= 0 && shm_lock.fd >= 0 && wal_lock.fd >= 0);
  QVERIFY(db_lock.held() && shm_lock.held() && wal_lock.held());

  CheckpointTab* tab = w.checkpointTab();
  auto* recent = tab->findChild<QComboBox*>(QStringLiteral("checkpointRecent"));
  QVERIFY(recent);
  QSignalSpy failed(tab, &CheckpointTab::failed);
  QSignalSpy loaded(tab, &CheckpointTab::checkpointLoaded);
  // A checkpoint shown first: a refusal leaves it shown, and the box names it.
  tab->openCheckpoint(good);
  QVERIFY(loaded.wait(60000));
  QCOMPARE(recent->currentText(), good);

  auto refused = [&](const QString& path, const QString& how) {
    QTRY_VERIFY_WITH_TIMEOUT(!tab->busy(), 60000);
    QVERIFY2(db_lock.held() && shm_lock.held() && wal_lock.held(), qPrintable(how));
    QVERIFY2(failed.count() > 0, qPrintable(how));
    const QString m = failed.takeLast().at(0).toString();
    QVERIFY2(m.contains(path) && m.contains(QLatin1String("was not opened")) &&
                 m.contains(QLatin1String("run database file")),
             qPrintable(how + QStringLiteral(": ") + m));
    QVERIFY2(w.failures().last() == m, qPrintable(how));
    QCOMPARE(loaded.count(), 1);
    QVERIFY2(!tab->showsPlaceholder(), qPrintable(how));
    QVERIFY2(recent->currentText() == good,
             qPrintable(how + QStringLiteral(": ") + recent->currentText()));
    QVERIFY(tab->statusText().startsWith(good));
  };

  // File > Open checkpoint.
  QString chosen = db;
  w.setFileDialogs(
      [&](QWidget*, const QString&, const QString&, const QString&) { return chosen; },
      [](QWidget*, const QString&, const QString&, const QString&) { return QString(); });
  auto* open_action = w.findChild<QAction*>(QStringLiteral("open-checkpoint"));
  QVERIFY(open_action);
  open_action->trigger();
  refused(db, QStringLiteral("File > Open checkpoint"));
  chosen = db + QStringLiteral("-shm");
  open_action->trigger();
  refused(chosen, QStringLiteral("File > Open checkpoint, -shm"));

  // The tab's recent files (as another window may have listed them).
  QSettings().setValue(QStringLiteral("checkpoint/recent"),
                       QStringList{good, db + QStringLiteral("-wal"), sym, hard, index});
  tab->refreshRecent();
  QCOMPARE(recent->currentText(), good);
  const int wal_item = recent->findText(db + QStringLiteral("-wal"));
  QVERIFY(wal_item > 0);
  recent->setCurrentIndex(wal_item);
  Q_EMIT recent->activated(wal_item);
  refused(db + QStringLiteral("-wal"), QStringLiteral("recent box, -wal"));

  // File > Recent files: a hard link.
  auto* menu = w.findChild<QMenu*>(QStringLiteral("recent-files"));
  QVERIFY(menu);
  Q_EMIT menu->aboutToShow();
  QAction* hard_action = nullptr;
  for (QAction* a : menu->actions())
    if (a->data().toString() == hard) hard_action = a;
  QVERIFY(hard_action);
  hard_action->trigger();
  refused(hard, QStringLiteral("File > Recent files, hard link"));

  // A drop: a symbolic link.
  {
    QMimeData mime;
    mime.setUrls({QUrl::fromLocalFile(sym)});
    // As a drag arrives: the tab takes it on entering (Qt delivers the drop to
    // it then).
    QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QCoreApplication::sendEvent(tab, &enter);
    QVERIFY(enter.isAccepted());
    QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QCoreApplication::sendEvent(tab, &drop);
  }
  refused(sym, QStringLiteral("drop, symbolic link"));

  // --checkpoint: a sharded checkpoint with the database as a shard.
  GuiOptions o;
  o.checkpoint = index;
  const QString err = open_checkpoint(w, o);
  QVERIFY2(err.contains(index), qPrintable(err));
  refused(index, QStringLiteral("--checkpoint, index naming the database"));

  // An index that is a FIFO is not read here to look for shards (that would wait for a
  // writer, with the window frozen): the reader refuses it.
  const QString fifo = file(QStringLiteral("fifo.index.json"));
  QCOMPARE(::mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
  tab->openCheckpoint(fifo);
  QVERIFY(failed.wait(30000));
  QVERIFY2(failed.takeLast().at(0).toString().contains(fifo), "the FIFO not named");
  QTRY_VERIFY_WITH_TIMEOUT(!tab->busy(), 30000);
  QVERIFY(db_lock.held() && shm_lock.held() && wal_lock.held());

  // Another checkpoint still opens.
  tab->openCheckpoint(good);
  QVERIFY(loaded.wait(60000));
  QVERIFY(db_lock.held() && shm_lock.held() && wal_lock.held());
}

void CheckpointGuardTest::aFailedOpenKeepsTheShownCheckpoint() {
  const QString good = file(QStringLiteral("shown.safetensors"));
  write_checkpoint(good);
  const QString bad = file(QStringLiteral("bad.safetensors"));
  {
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("this is not a checkpoint");
  }
  MainWindow w(false);
  CheckpointTab* tab = w.checkpointTab();
  auto* recent = tab->findChild<QComboBox*>(QStringLiteral("checkpointRecent"));
  QVERIFY(recent);
  QSignalSpy failed(tab, &CheckpointTab::failed);
  QSignalSpy loaded(tab, &CheckpointTab::checkpointLoaded);
  tab->openCheckpoint(good);
  QVERIFY(loaded.wait(60000));
  QCOMPARE(recent->currentText(), good);
  QVERIFY(!tab->showsPlaceholder());

  tab->openCheckpoint(bad);
  QVERIFY(failed.wait(60000));
  QVERIFY2(failed.at(0).at(0).toString().contains(bad), qPrintable(failed.at(0).at(0).toString()));
  QVERIFY(w.failures().last().contains(bad));
  // The good analysis stays on screen, and the box names it, not the bad file.
  QVERIFY(!tab->showsPlaceholder());
  QCOMPARE(recent->currentText(), good);
  QVERIFY(tab->statusText().contains(bad));
  QVERIFY(tab->statusText().contains(good));
  // It stays so when the box is read again (shown, clicked).
  tab->refreshRecent();
  QCOMPARE(recent->currentText(), good);
}

// A run exported as CSV, or a plot, to the run database's file (chosen by its name, as
// its -wal, or through a link named *.csv) is not written: the file would be truncated
// under SQLite and the process's locks on it dropped. The database and the locks stay.
void CheckpointGuardTest::exportsNeverWriteOverTheRunDatabase() {
  const QString db = file(QStringLiteral("exports.sqlite"));
  {
    auto store = RunStore::open(db.toStdString());
    store->create_run("kept", fp8wb::RunKind::Train, "{}", "cpu");
    store->flush();
  }
  const QString sym = file(QStringLiteral("plot.csv"));
  QVERIFY(QFile::link(db, sym));
  MainWindow w(false);
  QSignalSpy listed(w.sweepsTab(), &SweepsTab::sweepsListed);
  w.engine()->setDatabasePath(db);
  QVERIFY(listed.wait(30000));
  w.engine()->store();
  settle_background_reads();
  HeldLock db_lock(db);
  HeldLock wal_lock(db + QStringLiteral("-wal"));
  QVERIFY(db_lock.fd >= 0 && wal_lock.fd >= 0);
  const qint64 size = QFileInfo(db).size();
  QVERIFY(size > 0);

  for (const QString& path : {db, db + QStringLiteral("-wal"), sym}) {
    const QString m = w.runsTab()->exportCsv(1, path);
    QVERIFY2(m.contains(QLatin1String("was not written")) && m.contains(path), qPrintable(m));
  }
  ExportablePlot plot;
  const QString m = plot.exportTo(sym);
  QVERIFY2(m.contains(QLatin1String("was not written")), qPrintable(m));
  QVERIFY(db_lock.held() && wal_lock.held());
  QCOMPARE(QFileInfo(db).size(), size);
  auto reader = RunStore::open_read_only(db.toStdString());
  QVERIFY(reader->run(1).has_value());
  // Elsewhere, exports are written.
  QVERIFY(w.runsTab()->exportCsv(1, file(QStringLiteral("run1.csv"))).startsWith("wrote"));
}

// `fp8-workbench --checkpoint FILE` with a file that cannot be read: the window opens on
// the Checkpoint tab with the error (the program had ended at once, the error on stderr
// alone); with --screenshot, the error ends the program.
void CheckpointGuardTest::aCheckpointOptionThatFailsOpensTheWindowAnyway() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString bad = dir.filePath(QStringLiteral("cut.safetensors"));
  {
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("\x82\x02\0\0\0\0\0\0", 8);  // a header length, then nothing
  }
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  env.insert(QStringLiteral("DISPLAY"), QStringLiteral(":0"));  // "a display" for main()
  env.insert(QStringLiteral("XDG_CONFIG_HOME"), dir.filePath(QStringLiteral("config")));
  env.insert(QStringLiteral("XDG_DATA_HOME"), dir.filePath(QStringLiteral("data")));
  const QStringList args{QStringLiteral("--db"), dir.filePath(QStringLiteral("runs.sqlite")),
                         QStringLiteral("--checkpoint"), bad};
  QProcess gui;
  gui.setProcessEnvironment(env);
  gui.start(QStringLiteral(FP8WB_GUI_BINARY), args);
  QVERIFY(gui.waitForStarted());
  // Waits for what it waits for, the error said, however long a busy machine takes to start
  // the program (a fixed 8 s failed there); then the program must still be running, where it
  // had ended at once.
  const QByteArray want =
      bad.toUtf8() + " could not be analysed: header length 642 runs past the end of the file";
  QByteArray said;
  QElapsedTimer waited;
  waited.start();
  while (!said.contains(want) && gui.state() != QProcess::NotRunning && waited.elapsed() < 300000) {
    gui.waitForFinished(200);
    said += gui.readAllStandardError();
  }
  QVERIFY2(said.contains(want), said.constData());
  QVERIFY2(!gui.waitForFinished(3000), said.constData());
  gui.kill();
  gui.waitForFinished();
  QProcess shot;
  shot.setProcessEnvironment(env);
  shot.start(QStringLiteral(FP8WB_GUI_BINARY),
             args + QStringList{QStringLiteral("--screenshot"), dir.filePath("x.png")});
  QVERIFY(shot.waitForFinished(60000));
  QCOMPARE(shot.exitCode(), 1);
  QVERIFY(!QFile::exists(dir.filePath("x.png")));
}

namespace {

QByteArray file_bytes(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

// A plot or a run exported through a link to an SQLite database this window does not
// have open (another run database, its -wal), as PNG, PDF or CSV: refused, naming the
// database, and the file stays as it was. Elsewhere, through a link to a plain file, the
// export replaces that file whole.
void CheckpointGuardTest::exportsNeverWriteOverAnotherDatabase() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString other = dir.filePath(QStringLiteral("other.sqlite"));
  {
    auto store = RunStore::open(other.toStdString());
    store->create_run("theirs", fp8wb::RunKind::Train, "{}", "cpu");
    store->flush();
  }
  const QByteArray before = file_bytes(other);
  QVERIFY(before.startsWith("SQLite format 3"));
  ExportablePlot plot;
  plot.addGraph();
  plot.graph(0)->setData({0, 1, 2}, {1, 2, 3});
  for (const char* name : {"x.png", "x.pdf", "x.csv"}) {
    const QString link = dir.filePath(QLatin1String(name));
    QVERIFY(QFile::link(other, link));
    const QString m = plot.exportTo(link);
    QVERIFY2(m.contains(QLatin1String("was not written")) && m.contains(link) &&
                 m.contains(QLatin1String("SQLite database")),
             qPrintable(m));
  }
  QCOMPARE(file_bytes(other), before);
  const QString plain = dir.filePath(QStringLiteral("plain.txt"));
  {
    QFile f(plain);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("old");
  }
  const QString to_plain = dir.filePath(QStringLiteral("plain.csv"));
  QVERIFY(QFile::link(plain, to_plain));
  QCOMPARE(plot.exportTo(to_plain), QString());
  QVERIFY(file_bytes(plain).startsWith("series,x,y"));
  QVERIFY(QFileInfo(to_plain).isSymLink());
}

// `fp8-workbench --screenshot PATH` where PATH is a link to a run database that another
// process (this test) is writing: refused with a message naming the database, the
// program ends with status 1, and the database is byte for byte as it was.
void CheckpointGuardTest::aScreenshotNeverWritesOverADatabase() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString db = dir.filePath(QStringLiteral("live.sqlite"));
  auto store = RunStore::open(db.toStdString());
  const int64_t run = store->create_run("live", fp8wb::RunKind::Train, "{}", "cpu");
  store->flush();
  QVERIFY(run > 0);
  const QByteArray before = file_bytes(db);
  QVERIFY(before.startsWith("SQLite format 3"));
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  env.insert(QStringLiteral("XDG_CONFIG_HOME"), dir.filePath(QStringLiteral("config")));
  env.insert(QStringLiteral("XDG_DATA_HOME"), dir.filePath(QStringLiteral("data")));
  for (const QString& name : {QStringLiteral("shot.png"), QStringLiteral("wal.png")}) {
    const QString link = dir.filePath(name);
    QVERIFY(QFile::link(name == QLatin1String("wal.png") ? db + QStringLiteral("-wal") : db, link));
    QProcess shot;
    shot.setProcessEnvironment(env);
    shot.start(
        QStringLiteral(FP8WB_GUI_BINARY),
        {QStringLiteral("--screenshot"), link, QStringLiteral("--tab"), QStringLiteral("formats")});
    QVERIFY(shot.waitForFinished(300000));
    const QString said = QString::fromUtf8(shot.readAllStandardError());
    QCOMPARE(shot.exitCode(), 1);
    QVERIFY2(
        said.contains(QLatin1String("was not written")) && said.contains(link) && said.contains(db),
        qPrintable(said));
    QVERIFY(QFileInfo(link).isSymLink());
  }
  QCOMPARE(file_bytes(db), before);
  // The writer goes on.
  store->set_status(run, RunStatus::Finished, "");
  store->flush();
  QCOMPARE(store->run(run)->status, RunStatus::Finished);
}

QTEST_MAIN(CheckpointGuardTest)
#include "checkpoint_guard_test.moc"
