#include "fp8wb/views/common/run_database_guard.h"

#include <sys/stat.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QObject>
#include <QSet>
#include <map>
#include <mutex>
#include <ostream>
#include <vector>

#include "fp8wb/core/checkpoint/file_io.h"

namespace fp8wb {
namespace {

bool same_file(const QString& a, const QString& b) {
  struct stat sa {};
  struct stat sb {};
  if (::stat(QFile::encodeName(a).constData(), &sa) != 0) return false;
  if (::stat(QFile::encodeName(b).constData(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

QString run_database_file_of(const QString& chosen, const QString& database) {
  if (chosen.isEmpty() || database.isEmpty()) return {};
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const QString file = database + QLatin1String(suffix);
    if (same_file(chosen, file)) return file;
  }
  return {};
}

namespace {

std::mutex open_databases_mutex;
std::map<const void*, QString>& open_databases() {
  static std::map<const void*, QString> m;
  return m;
}

}  // namespace

void set_open_run_database(const void* owner, const QString& path) {
  const std::lock_guard<std::mutex> lock(open_databases_mutex);
  if (path.isEmpty()) {
    open_databases().erase(owner);
  } else {
    open_databases()[owner] = path;
  }
}

QString open_run_database_file_of(const QString& chosen) {
  std::vector<QString> paths;
  {
    const std::lock_guard<std::mutex> lock(open_databases_mutex);
    for (const auto& [owner, path] : open_databases()) paths.push_back(path);
  }
  for (const QString& db : paths) {
    if (QString file = run_database_file_of(chosen, db); !file.isEmpty()) return file;
  }
  return {};
}

QString output_refusal(const QString& path, const QStringList& inputs) {
  if (path.isEmpty()) return QObject::tr("a file without a name cannot be written");
  // First by inode alone: reading the first bytes of a database this process has open
  // would end its locks on the file.
  if (const QString db = open_run_database_file_of(path); !db.isEmpty()) {
    return QObject::tr(
               "%1 was not written: it is the run database file %2, which writing "
               "would destroy; give another path")
        .arg(path, db);
  }
  for (const QString& in : inputs) {
    if (!in.isEmpty() && same_file(path, in)) {
      return QObject::tr(
                 "%1 was not written: it is the same file as %2, which this window "
                 "reads; give another path")
          .arg(path, in);
    }
  }
  const std::string db = sqlite_database_at(QFile::encodeName(path).toStdString());
  if (!db.empty()) {
    QString name = QFile::decodeName(QByteArray::fromStdString(db));
    const bool itself = name == path;
    if (QFileInfo(name).isSymLink()) name = QFileInfo(name).canonicalFilePath();
    QString what = QObject::tr("belongs to the SQLite database %1").arg(name);
    if (itself) {
      what = name == path ? QObject::tr("is an SQLite database")
                          : QObject::tr("is a link to the SQLite database %1").arg(name);
    }
    return QObject::tr(
               "%1 was not written: it %2 (a run database, perhaps), which writing "
               "would destroy; give another path")
        .arg(path, what);
  }
  return {};
}

QString write_output_file(const QString& path, const QByteArray& bytes, const QStringList& inputs) {
  if (const QString no = output_refusal(path, inputs); !no.isEmpty()) return no;
  try {
    write_file_atomically(QFile::encodeName(path).toStdString(), [&](std::ostream& out) {
      out.write(bytes.constData(), static_cast<std::streamsize>(bytes.size()));
    });
  } catch (const std::exception& e) {
    return QObject::tr("%1 was not written: %2").arg(path, QString::fromStdString(e.what()));
  }
  return {};
}

QStringList checkpoint_shards(const QString& index) {
  if (!index.endsWith(QLatin1String(".index.json"), Qt::CaseInsensitive)) return {};
  // Only a regular file of at most the 100 MB the reader takes for an index: a FIFO would
  // block here, and the reader says what is wrong with anything else.
  const QFileInfo info(index);
  if (!info.isFile() || info.size() > (qint64{100} << 20)) return {};
  QFile f(index);
  if (!f.open(QIODevice::ReadOnly)) return {};
  const QJsonObject map =
      QJsonDocument::fromJson(f.readAll()).object().value(QLatin1String("weight_map")).toObject();
  const QDir folder = QFileInfo(index).dir();
  QSet<QString> seen;
  QStringList shards;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const QString shard = it.value().toString();
    if (shard.isEmpty() || seen.contains(shard)) continue;
    seen.insert(shard);
    shards << folder.filePath(shard);
  }
  return shards;
}

}  // namespace fp8wb
