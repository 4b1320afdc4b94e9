// A run database the user cannot write (the file 0444, or its folder read-only), offscreen:
// opened with --db or File > Open database, it is said at once to be read-only (its runs
// can be viewed, not started), Start, the Runs tab's Rename and Delete and the Sweeps
// tab's Start sweep and Collect are disabled with that reason as their tooltip, its runs
// are listed, and no -wal or -shm file is left beside it. A writable database enables
// them again. The default database (no --db) read-only is said at start-up the same way;
// a default whose folder is not made yet is no failure, one where no database can be made
// (a folder not writable) is. A --db that is no database at all (a folder, a text file):
// said at start-up, and Start, Rename, Delete and Start sweep disabled with the reason as
// their tooltip, until a database that opens is chosen, or the file is mended and the
// failure's message closed. A default database that cannot be made disables them the same
// way, until its folder can be written. Run as root, the program first
// becomes nobody: root may write any file.
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QMessageBox>
#include <QPushButton>
#include <QTemporaryDir>
#include <QtTest>
#include <memory>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/run_panel/engine_controller.h"
#include "fp8wb/views/run_panel/run_panel.h"
#include "fp8wb/views/runs/run_list_model.h"
#include "fp8wb/views/runs/runs_tab.h"
#include "fp8wb/views/sweeps/sweeps_tab.h"
#include "main_window.h"
#include "screenshot.h"

using namespace fp8wb;

namespace {

void write_db(const QString& path) {
  auto store = RunStore::open(path.toStdString());
  const int64_t id = store->create_run("stored", fp8wb::RunKind::Train, "{}", "cpu");
  MetricBatch b;
  b.run_id = id;
  StepMetrics m;
  m.step = 0;
  m.loss = 1.0;
  b.steps.push_back(m);
  b.final = true;
  b.status = RunStatus::Finished;
  store->write(std::move(b));
  store->flush();
}

bool sqlite_files_beside(const QString& db) {
  return QFile::exists(db + QStringLiteral("-wal")) || QFile::exists(db + QStringLiteral("-shm"));
}

// The button of `parent` showing `text`, or nullptr.
QPushButton* button_named(QWidget* parent, const QString& text) {
  for (QPushButton* b : parent->findChildren<QPushButton*>()) {
    if (b->text() == text) return b;
  }
  return nullptr;
}

// The buttons that write the database: the Runs tab's Rename and Delete, the Sweeps
// tab's Start sweep and Collect from folder.
QList<QPushButton*> write_buttons(MainWindow& w) {
  return {w.runsTab()->findChild<QPushButton*>(QStringLiteral("rename")),
          w.runsTab()->findChild<QPushButton*>(QStringLiteral("delete")),
          button_named(w.sweepsTab(), QStringLiteral("Start sweep")),
          w.sweepsTab()->findChild<QPushButton*>(QStringLiteral("collect-folder"))};
}

// Start, Rename and Delete all disabled, each saying read-only in its tooltip.
void verify_writes_disabled(MainWindow& w) {
  auto* start = w.runPanel()->findChild<QPushButton*>(QStringLiteral("start"));
  QVERIFY(start);
  QList<QPushButton*> buttons = write_buttons(w);
  buttons << start;
  for (QPushButton* b : buttons) {
    QVERIFY(b);
    QVERIFY2(!b->isEnabled(), qPrintable(b->text() + QStringLiteral(" enabled")));
    QVERIFY2(b->toolTip().contains(QLatin1String("read-only")),
             qPrintable(b->text() + QStringLiteral(": ") + b->toolTip()));
  }
}

}  // namespace

class ReadOnlyDatabaseTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    qputenv("XDG_DATA_HOME", dir_.path().toUtf8());
    qputenv("XDG_CONFIG_HOME", dir_.path().toUtf8());
  }
  void readOnlyFile() { check(QStringLiteral("file"), false); }
  void readOnlyFolder() { check(QStringLiteral("folder"), true); }
  void readOnlyDefaultSaidAtStartUp();
  void defaultNotMadeYetIsNoFailure();
  void notMadeYetInAFolderNotWritableSaidAtStartUp();
  void noDatabaseAtAllDisablesStart();
  void mendedDatabaseIsCheckedAgain();
  void unmadeDefaultDisablesStart();

 private:
  void check(const QString& name, bool folder_read_only);
  QTemporaryDir dir_;
};

void ReadOnlyDatabaseTest::check(const QString& name, bool folder_read_only) {
  const QString folder = dir_.filePath(name);
  QVERIFY(QDir().mkpath(folder));
  const QString db = folder + QStringLiteral("/runs.sqlite");
  write_db(db);
  QVERIFY(!sqlite_files_beside(db));  // closed: the log is checkpointed into the file
  const QString writable_db = dir_.filePath(name + QStringLiteral("-writable.sqlite"));
  write_db(writable_db);
  // The folder writable again at the end, whatever happens, for the temporary folder to go.
  const QByteArray folder_name = QFile::encodeName(folder);
  const std::unique_ptr<const char, void (*)(const char*)> restore(
      folder_name.constData(), [](const char* f) { ::chmod(f, 0755); });
  if (folder_read_only) {
    QCOMPARE(::chmod(QFile::encodeName(folder).constData(), 0555), 0);
  } else {
    QCOMPARE(::chmod(QFile::encodeName(db).constData(), 0444), 0);
  }
  {
    MainWindow w(false);
    auto* start = w.runPanel()->findChild<QPushButton*>(QStringLiteral("start"));
    QVERIFY(start);
    QVERIFY(start->isEnabled());
    // --db: said at start-up, before anything is started.
    w.engine()->setDatabasePath(db);
    w.checkDatabase();
    QVERIFY2(!w.notices().isEmpty(), "nothing said at open");
    const QString said = w.notices().last();
    QVERIFY2(said.contains(db) && said.contains(QLatin1String("read-only")) &&
                 said.contains(QLatin1String("viewed")) &&
                 said.contains(QLatin1String("not started")),
             qPrintable(said));
    QVERIFY(w.failures().isEmpty());
    verify_writes_disabled(w);
    if (QTest::currentTestFailed()) return;
    // Its runs are listed.
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(w.selectTab(QStringLiteral("Runs")));
    QTRY_COMPARE_WITH_TIMEOUT(w.runsTab()->model()->rowCount(), 1, 30000);
    QVERIFY(!start->isEnabled());  // the form validated again stays so
    // A writable database enables Start again; File > Open database on the read-only one
    // disables it again.
    QVERIFY(w.openDatabaseFile(writable_db));
    QVERIFY(start->isEnabled());
    QVERIFY(!start->toolTip().contains(QLatin1String("read-only")));
    for (QPushButton* b : write_buttons(w)) {
      QVERIFY2(b && b->isEnabled(), qPrintable(b ? b->text() : QStringLiteral("no button")));
      QVERIFY2(!b->toolTip().contains(QLatin1String("read-only")), qPrintable(b->toolTip()));
    }
    QVERIFY(w.openDatabaseFile(db));
    verify_writes_disabled(w);
    if (QTest::currentTestFailed()) return;
    QVERIFY2(w.notices().last().contains(QLatin1String("read-only")),
             qPrintable(w.notices().last()));
    QVERIFY2(!sqlite_files_beside(db), "-wal or -shm while open");
    QTRY_VERIFY_WITH_TIMEOUT(!w.runsTab()->isReading(), 30000);
  }
  QVERIFY2(!sqlite_files_beside(db), "-wal or -shm left behind");
}

// No --db: the default database (in XDG_DATA_HOME) read-only is said as the window
// starts, as a chosen one is, not first when Start is pressed.
void ReadOnlyDatabaseTest::readOnlyDefaultSaidAtStartUp() {
  const QString data = dir_.filePath(QStringLiteral("default-data"));
  const QString folder = data + QStringLiteral("/fp8-workbench");
  QVERIFY(QDir().mkpath(folder));
  const QString db = folder + QStringLiteral("/runs.sqlite");
  write_db(db);
  QCOMPARE(::chmod(QFile::encodeName(db).constData(), 0444), 0);
  const QByteArray old_data = qgetenv("XDG_DATA_HOME");
  qputenv("XDG_DATA_HOME", data.toUtf8());
  const std::unique_ptr<const QByteArray, void (*)(const QByteArray*)> restore(
      &old_data, [](const QByteArray* v) { qputenv("XDG_DATA_HOME", *v); });
  MainWindow w(false);
  QCOMPARE(w.engine()->databasePath(), db);                 // the default is the one read-only
  QCOMPARE(apply_gui_options(w, GuiOptions{}), QString());  // start-up without --db
  QVERIFY2(!w.notices().isEmpty(), "nothing said at start-up");
  const QString said = w.notices().last();
  QVERIFY2(said.contains(db) && said.contains(QLatin1String("read-only")) &&
               said.contains(QLatin1String("not started")),
           qPrintable(said));
  QVERIFY2(w.failures().isEmpty(), qPrintable(w.failures().join(QLatin1Char('\n'))));
  verify_writes_disabled(w);
  QVERIFY2(!sqlite_files_beside(db), "-wal or -shm while open");
}

// No --db and no default database yet, its folder not made either (a first start): nothing
// is said and nothing is made; Start stays enabled.
void ReadOnlyDatabaseTest::defaultNotMadeYetIsNoFailure() {
  const QString data = dir_.filePath(QStringLiteral("first-start"));
  const QByteArray old_data = qgetenv("XDG_DATA_HOME");
  qputenv("XDG_DATA_HOME", data.toUtf8());
  const std::unique_ptr<const QByteArray, void (*)(const QByteArray*)> restore(
      &old_data, [](const QByteArray* v) { qputenv("XDG_DATA_HOME", *v); });
  MainWindow w(false);
  QCOMPARE(apply_gui_options(w, GuiOptions{}), QString());
  QVERIFY2(w.failures().isEmpty(), qPrintable(w.failures().join(QLatin1Char('\n'))));
  QVERIFY(!QFileInfo::exists(data));
  auto* start = w.runPanel()->findChild<QPushButton*>(QStringLiteral("start"));
  QVERIFY(start && start->isEnabled());
}

// A database not made yet where it cannot be made (its folder, or the nearest folder
// above it that is there, cannot be written): said at start-up, by --db or by default;
// nothing is made.
void ReadOnlyDatabaseTest::notMadeYetInAFolderNotWritableSaidAtStartUp() {
  const QString folder = dir_.filePath(QStringLiteral("not-writable"));
  QVERIFY(QDir().mkpath(folder));
  const QByteArray folder_name = QFile::encodeName(folder);
  const std::unique_ptr<const char, void (*)(const char*)> restore_mode(
      folder_name.constData(), [](const char* f) { ::chmod(f, 0755); });
  QCOMPARE(::chmod(folder_name.constData(), 0555), 0);
  const QByteArray old_data = qgetenv("XDG_DATA_HOME");
  const std::unique_ptr<const QByteArray, void (*)(const QByteArray*)> restore(
      &old_data, [](const QByteArray* v) { qputenv("XDG_DATA_HOME", *v); });
  struct Case {
    QString data;  // XDG_DATA_HOME
    QString db;    // --db, or empty for the default
  };
  const Case cases[] = {{dir_.path(), folder + QStringLiteral("/new.sqlite")}, {folder, QString()}};
  for (const Case& c : cases) {
    qputenv("XDG_DATA_HOME", c.data.toUtf8());
    MainWindow w(false);
    GuiOptions o;
    o.db = c.db;
    QCOMPARE(apply_gui_options(w, o), QString());
    const QString path = w.engine()->databasePath();
    QVERIFY2(!w.failures().isEmpty(), qPrintable(QStringLiteral("nothing said of ") + path));
    const QString said = w.failures().last();
    QVERIFY2(said.contains(path) && said.contains(folder) &&
                 said.contains(QLatin1String("cannot be written")),
             qPrintable(said));
  }
  QCOMPARE(QDir(folder).entryList(QDir::NoDotAndDotDot | QDir::AllEntries), QStringList());
}

// --db naming a folder, or a text file: the failure is said at start-up, and every button
// that writes the database is disabled with it as the tooltip (pressing Start would only
// say it again); File > Open database on a database enables them.
void ReadOnlyDatabaseTest::noDatabaseAtAllDisablesStart() {
  const QString folder = dir_.filePath(QStringLiteral("a-folder"));
  QVERIFY(QDir().mkpath(folder));
  const QString text = dir_.filePath(QStringLiteral("notes.txt"));
  QFile f(text);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(QByteArray("These are notes, not a run database.\n").repeated(200));
  f.close();
  const QString good = dir_.filePath(QStringLiteral("good.sqlite"));
  write_db(good);
  for (const QString& db : {folder, text}) {
    MainWindow w(false);
    GuiOptions o;
    o.db = db;
    QCOMPARE(apply_gui_options(w, o), QString());
    QVERIFY2(!w.failures().isEmpty(), qPrintable(QStringLiteral("nothing said of ") + db));
    auto* start = w.runPanel()->findChild<QPushButton*>(QStringLiteral("start"));
    QList<QPushButton*> buttons = write_buttons(w);
    buttons << start;
    for (QPushButton* b : buttons) {
      QVERIFY(b);
      QVERIFY2(!b->isEnabled(),
               qPrintable(db + QStringLiteral(": ") + b->text() + QStringLiteral(" enabled")));
      QVERIFY2(b->toolTip().contains(db),
               qPrintable(b->text() + QStringLiteral(": ") + b->toolTip()));
    }
    QVERIFY(w.openDatabaseFile(good));
    for (QPushButton* b : buttons) {
      QVERIFY2(b->isEnabled(), qPrintable(b->text()));
      QVERIFY2(!b->toolTip().contains(db), qPrintable(b->toolTip()));
    }
  }
}

namespace {

// The failure's message, closed as the user closes it.
bool close_failure(MainWindow& w) {
  auto* box = w.findChild<QMessageBox*>();
  if (!box || !box->isVisible() || !box->button(QMessageBox::Close)) return false;
  QTest::mouseClick(box->button(QMessageBox::Close), Qt::LeftButton);
  return true;
}

}  // namespace

// A --db that is no database, mended while the workbench is open (the file replaced by a
// database): closing the failure's message looks again, and the buttons are enabled.
void ReadOnlyDatabaseTest::mendedDatabaseIsCheckedAgain() {
  const QString db = dir_.filePath(QStringLiteral("mended.sqlite"));
  {
    QFile f(db);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray("not yet a run database\n").repeated(100));
  }
  MainWindow w(false);
  GuiOptions o;
  o.db = db;
  QCOMPARE(apply_gui_options(w, o), QString());
  QVERIFY(!w.failures().isEmpty());
  auto* start = w.runPanel()->findChild<QPushButton*>(QStringLiteral("start"));
  QList<QPushButton*> buttons = write_buttons(w);
  buttons << start;
  for (QPushButton* b : buttons) QVERIFY2(!b->isEnabled(), qPrintable(b->text()));
  QVERIFY(QFile::remove(db));
  write_db(db);
  QVERIFY(close_failure(w));
  for (QPushButton* b : buttons) QTRY_VERIFY2(b->isEnabled(), qPrintable(b->text()));
}

// No --db, and the default database's folder cannot be made (XDG_DATA_HOME not
// writable): Start, Rename, Delete and Start sweep are disabled with the reason as their
// tooltip, as for a --db that is no database; once the folder can be written, enabled.
void ReadOnlyDatabaseTest::unmadeDefaultDisablesStart() {
  const QString folder = dir_.filePath(QStringLiteral("locked-data"));
  QVERIFY(QDir().mkpath(folder));
  const QByteArray folder_name = QFile::encodeName(folder);
  const std::unique_ptr<const char, void (*)(const char*)> restore(
      folder_name.constData(), [](const char* f) { ::chmod(f, 0755); });
  QCOMPARE(::chmod(folder_name.constData(), 0555), 0);
  const QByteArray data_home = qgetenv("XDG_DATA_HOME");
  qputenv("XDG_DATA_HOME", folder.toUtf8());
  {
    MainWindow w(false);
    QCOMPARE(apply_gui_options(w, GuiOptions{}), QString());
    QVERIFY(!w.failures().isEmpty());
    auto* start = w.runPanel()->findChild<QPushButton*>(QStringLiteral("start"));
    QList<QPushButton*> buttons = write_buttons(w);
    buttons << start;
    for (QPushButton* b : buttons) {
      QVERIFY2(!b->isEnabled(), qPrintable(b->text()));
      QVERIFY2(b->toolTip().contains(QLatin1String("cannot be written")),
               qPrintable(b->text() + QStringLiteral(": ") + b->toolTip()));
    }
    QCOMPARE(::chmod(folder_name.constData(), 0755), 0);
    QVERIFY(close_failure(w));
    for (QPushButton* b : buttons) QTRY_VERIFY2(b->isEnabled(), qPrintable(b->text()));
  }
  qputenv("XDG_DATA_HOME", data_home);
}

int main(int argc, char** argv) {
  // Root writes files whatever their mode: the test runs as nobody.
  if (::geteuid() == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
      std::perror("cannot become nobody");
      return 1;
    }
  }
  QApplication app(argc, argv);
  ReadOnlyDatabaseTest t;
  return QTest::qExec(&t, argc, argv);
}

#include "read_only_database_test.moc"
