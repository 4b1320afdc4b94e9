// The workbench's file dialogs read none of the files they list: shown in the folder of
// the open run database, they leave SQLite's locks on it in place, so that another process
// never takes the database for its own alone and removes its write-ahead log.
#include <sys/stat.h>
#include <unistd.h>

#include <QFile>
#include <QFileDialog>
#include <QFileSystemModel>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTextStream>
#include <QtTest>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/common/file_dialogs.h"

using namespace fp8wb;

namespace {

// Whether this process holds a POSIX lock on the file (/proc/locks: "1: POSIX ADVISORY
// READ <pid> <major>:<minor>:<inode> <start> <end>").
bool holds_lock(const QString& path) {
  struct stat st {};
  if (::stat(QFile::encodeName(path).constData(), &st) != 0) return false;
  QFile f(QStringLiteral("/proc/locks"));
  if (!f.open(QIODevice::ReadOnly)) return false;
  const QString pid = QString::number(::getpid());
  const QString inode = QLatin1Char(':') + QString::number(st.st_ino);
  for (const QString& line : QTextStream(&f).readAll().split(QLatin1Char('\n'))) {
    const QStringList f5 = line.simplified().split(QLatin1Char(' '));
    if (f5.size() >= 6 && f5[1] == QLatin1String("POSIX") && f5[4] == pid && f5[5].endsWith(inode))
      return true;
  }
  return false;
}

}  // namespace

class FileDialogsTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void theDatabaseKeepsItsLocks();
};

void FileDialogsTest::theDatabaseKeepsItsLocks() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString db = dir.filePath(QStringLiteral("runs.db"));
  std::unique_ptr<RunStore> store = RunStore::open(db.toStdString());
  store->create_run("one", fp8wb::RunKind::Train, "{}", "cpu");
  (void)store->runs();
  QVERIFY2(holds_lock(db), "SQLite holds no lock on the database to begin with");

  QFileDialog d(nullptr, QStringLiteral("Open database"), dir.path(),
                QStringLiteral("All files (*)"));
  prepare_file_dialog(d);
  d.setViewMode(QFileDialog::Detail);
  auto* model = d.findChild<QFileSystemModel*>();
  QVERIFY(model);
  QSignalSpy loaded(model, &QFileSystemModel::directoryLoaded);
  d.resize(900, 600);
  d.show();
  QVERIFY(QTest::qWaitForWindowExposed(&d));
  QVERIFY(loaded.count() > 0 || loaded.wait(10000));
  // The listed files' types and icons are fetched as the view shows them.
  QTest::qWait(1500);
  d.close();
  QTest::qWait(200);
  QVERIFY2(holds_lock(db), "the dialog ended SQLite's lock on the database");
}

QTEST_MAIN(FileDialogsTest)
#include "file_dialogs_test.moc"
