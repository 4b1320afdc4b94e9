#include "fp8wb/views/run_panel/run_presets.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QObject>
#include <QSet>
#include <stdexcept>
#include <string>

namespace fp8wb {
namespace {

const char* const kResource = ":/presets/run_presets.json";

[[noreturn]] void fail(const QString& why) {
  throw std::runtime_error(std::string(kResource) + ": " + why.toStdString());
}

// A JSON value as its JSON text: 16, true, "delayed".
QString json_text(const QJsonValue& v) {
  const QByteArray a = QJsonDocument(QJsonArray{v}).toJson(QJsonDocument::Compact);
  return QString::fromUtf8(a.mid(1, a.size() - 2));  // without the array's brackets
}

std::vector<RunPreset> read_presets() {
  QFile f(QString::fromLatin1(kResource));
  if (!f.open(QIODevice::ReadOnly)) fail(f.errorString());
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &error);
  if (error.error != QJsonParseError::NoError)
    fail(QStringLiteral("%1 at byte %2").arg(error.errorString()).arg(error.offset));
  if (!doc.isArray()) fail(QStringLiteral("expected a list of presets"));
  std::vector<RunPreset> out;
  QSet<QString> names;
  for (const QJsonValue& entry : doc.array()) {
    const QJsonObject o = entry.toObject();
    RunPreset p;
    p.name = o.value(QLatin1String("name")).toString();
    if (p.name.isEmpty()) fail(QStringLiteral("preset %1 has no name").arg(out.size() + 1));
    if (names.contains(p.name)) fail(QStringLiteral("'%1' is given twice").arg(p.name));
    names.insert(p.name);
    const QJsonValue fields = o.value(QLatin1String("fields"));
    if (!fields.isObject()) fail(QStringLiteral("'%1' has no \"fields\" object").arg(p.name));
    const QJsonObject fo = fields.toObject();
    for (auto it = fo.begin(); it != fo.end(); ++it)
      p.overrides << it.key() + QLatin1Char('=') + json_text(it.value());
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

namespace {

// "margin=2, window=1024" (four at most, then how many more); empty where none differs.
QString changed_text(const std::string& was_json, const std::string& now_json) {
  const QJsonObject was = QJsonDocument::fromJson(QByteArray::fromStdString(was_json)).object();
  const QJsonObject now = QJsonDocument::fromJson(QByteArray::fromStdString(now_json)).object();
  QStringList changed;
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (it.key() == QLatin1String("name") || it.key() == QLatin1String("device")) continue;
    if (was.value(it.key()) == it.value()) continue;
    QString v = json_text(it.value());
    if (it.value().isString()) v = it.value().toString();  // margin=2, scaling=current
    changed << it.key() + QLatin1Char('=') + v;
  }
  constexpr qsizetype kNamed = 4;
  QString fields = QStringList(changed.mid(0, kNamed)).join(QStringLiteral(", "));
  if (changed.size() > kNamed) fields += QObject::tr(" and %1 more").arg(changed.size() - kNamed);
  return fields;
}

QString stem_of(const QString& name) {
  const qsizetype colon = name.indexOf(QLatin1Char(':'));
  return colon > 0 ? name.left(colon) : name;
}

}  // namespace

QString run_name_after(const QString& preset_name, const std::string& preset_json,
                       const std::string& now_json) {
  const QString fields = changed_text(preset_json, now_json);
  if (fields.isEmpty()) return preset_name;
  return stem_of(preset_name) + QStringLiteral(": ") + fields;
}

bool preset_stem_of(const QString& name) {
  const QString stem = stem_of(name);
  for (const RunPreset& p : run_presets())
    if (stem_of(p.name) == stem) return true;
  return false;
}

QString run_name_from_run(const QString& run_name, const std::string& run_json,
                          const std::string& now_json) {
  const QString fields = changed_text(run_json, now_json);
  return fields.isEmpty() ? run_name : run_name + QStringLiteral(", ") + fields;
}

QStringList changed_fields(const std::string& was_json, const std::string& now_json) {
  const QJsonObject was = QJsonDocument::fromJson(QByteArray::fromStdString(was_json)).object();
  const QJsonObject now = QJsonDocument::fromJson(QByteArray::fromStdString(now_json)).object();
  auto text = [](const QJsonValue& v) { return v.isString() ? v.toString() : json_text(v); };
  QStringList changed;
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (it.key() == QLatin1String("name") || it.key() == QLatin1String("device")) continue;
    const QJsonValue before = was.value(it.key());
    if (before == it.value()) continue;
    changed << QObject::tr("%1=%2 (was %3)")
                   .arg(it.key(), text(it.value()),
                        before.isUndefined() ? QObject::tr("unset") : text(before));
  }
  return changed;
}

const std::vector<RunPreset>& run_presets() {
  static const std::vector<RunPreset> presets = read_presets();
  return presets;
}

}  // namespace fp8wb
