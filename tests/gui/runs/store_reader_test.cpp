// The views' one reader of the run store (store_reader.h): a missing, damaged or foreign
// file, a folder and an empty path are StoreErrors naming the path and the problem; a
// database not made yet reads as none where the views list what is stored; the views'
// reads (here the overlaid loss curves) fail with the reader's message.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <string>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/views/common/loss_curves.h"
#include "fp8wb/views/common/store_reader.h"

using namespace fp8wb;

class StoreReaderTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void aMissingFileIsNamed();
  void aDamagedFileIsNamed();
  void aFolderOrNoPathIsNamed();
  void aStoredDatabaseIsRead();

 private:
  // What open_store_reader(path) throws ("" where it opens).
  static std::string error_of(const std::string& path);
  QTemporaryDir dir_;
};

std::string StoreReaderTest::error_of(const std::string& path) {
  try {
    open_store_reader(path);
  } catch (const StoreError& e) {
    return e.what();
  }
  return {};
}

void StoreReaderTest::aMissingFileIsNamed() {
  const std::string path = dir_.filePath(QStringLiteral("none.sqlite")).toStdString();
  QCOMPARE(error_of(path), "no run database at " + path);
  // Where the views list what is stored: none yet, nothing made.
  QVERIFY(open_store_reader_if_made(path) == nullptr);
  QVERIFY(!QFile::exists(QString::fromStdString(path)));
  // A view's read says the same.
  try {
    read_loss_curves(path, {LossCurve{}});
    QFAIL("read_loss_curves() read a database that is not there");
  } catch (const StoreError& e) {
    QCOMPARE(std::string(e.what()), "no run database at " + path);
  }
}

void StoreReaderTest::aDamagedFileIsNamed() {
  const QString file = dir_.filePath(QStringLiteral("damaged.sqlite"));
  QFile f(file);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(QByteArray(8192, 'x'));
  f.close();
  const std::string path = file.toStdString();
  const std::string error = error_of(path);
  QVERIFY2(error.find(path) != std::string::npos, error.c_str());
  QVERIFY2(
      error.find("file is not a database (not an SQLite database, or its first page is damaged)") !=
          std::string::npos,
      error.c_str());
  // A file that is there is no database not made yet: it fails, not reads as empty.
  QVERIFY_THROWS_EXCEPTION(StoreError, open_store_reader_if_made(path));
  QCOMPARE(QFile(file).size(), qint64{8192});  // read only: left as it was
}

void StoreReaderTest::aFolderOrNoPathIsNamed() {
  const std::string folder = dir_.path().toStdString();
  const std::string error = error_of(folder);
  QVERIFY2(error.find(folder) != std::string::npos && error.find("folder") != std::string::npos,
           error.c_str());
  // No path at all: said as such, not as a database at "" that is not there.
  QCOMPARE(error_of(""), std::string("no run database chosen (its path is empty)"));
  QVERIFY(open_store_reader_if_made("") == nullptr);
}

void StoreReaderTest::aStoredDatabaseIsRead() {
  const std::string path = dir_.filePath(QStringLiteral("runs.sqlite")).toStdString();
  RunStore::open(path).reset();  // made, no runs
  const auto store = open_store_reader(path);
  QVERIFY(store->read_only());
  QVERIFY(store->runs().empty());
  QVERIFY(open_store_reader_if_made(path) != nullptr);
}

QTEST_GUILESS_MAIN(StoreReaderTest)
#include "store_reader_test.moc"
