#include "fp8wb/views/run_panel/run_presets.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QObject>
#include <QRegularExpression>
#include <QSet>
#include <algorithm>
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

// A field of now_json that differs from was_json: "margin=2", and the value it had.
struct Changed {
  QString key, text;
  QJsonValue was;
};

std::vector<Changed> changed_of(const std::string& was_json, const std::string& now_json) {
  const QJsonObject was = QJsonDocument::fromJson(QByteArray::fromStdString(was_json)).object();
  const QJsonObject now = QJsonDocument::fromJson(QByteArray::fromStdString(now_json)).object();
  std::vector<Changed> changed;
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (it.key() == QLatin1String("name") || it.key() == QLatin1String("device")) continue;
    if (was.value(it.key()) == it.value()) continue;
    QString v = json_text(it.value());
    if (it.value().isString()) v = it.value().toString();  // margin=2, scaling=current
    changed.push_back({it.key(), it.key() + QLatin1Char('=') + v, was.value(it.key())});
  }
  return changed;
}

// "margin=2, window=1024" (four at most, then how many more); empty where none is given.
QString fields_text(const QStringList& changed) {
  constexpr qsizetype kNamed = 4;
  QString fields = QStringList(changed.mid(0, kNamed)).join(QStringLiteral(", "));
  if (changed.size() > kNamed) fields += QObject::tr(" and %1 more").arg(changed.size() - kNamed);
  return fields;
}

QString changed_text(const std::string& was_json, const std::string& now_json) {
  QStringList texts;
  for (const Changed& c : changed_of(was_json, now_json)) texts << c.text;
  return fields_text(texts);
}

QString stem_of(const QString& name) {
  const qsizetype colon = name.indexOf(QLatin1Char(':'));
  return colon > 0 ? name.left(colon) : name;
}

// The words of a name as a field's key or value reads: "Smooth-SwiGLU" -> smooth_swiglu,
// "window 1024" -> window, 1024, "margin=2" -> margin, 2.
QSet<QString> words_of(const QString& text) {
  QString t = text.toLower();
  t.replace(QLatin1Char('-'), QLatin1Char('_'));
  static const QRegularExpression split(QStringLiteral("[^a-z0-9_.]+"));
  const QStringList w = t.split(split, Qt::SkipEmptyParts);
  return {w.begin(), w.end()};
}

// Whether `text` names the field `c` changed: its key, or the (text) value it had.
bool names_field(const QString& text, const Changed& c) {
  const QSet<QString> words = words_of(text);
  return words.contains(c.key) || (c.was.isString() && words.contains(c.was.toString().toLower()));
}

QString model_title(const QString& model) {
  if (model == QLatin1String("gpt")) return QStringLiteral("GPT");
  if (model == QLatin1String("mlp")) return QStringLiteral("MLP");
  if (model == QLatin1String("llama")) return QStringLiteral("Llama");
  return model;
}

}  // namespace

QString run_name_after(const QString& preset_name, const std::string& preset_json,
                       const std::string& now_json) {
  std::vector<Changed> changed = changed_of(preset_json, now_json);
  if (changed.empty()) return preset_name;
  QString stem = stem_of(preset_name);
  const qsizetype colon = preset_name.indexOf(QLatin1Char(':'));
  // What the preset's name says after its stem, a part a setting: "window 1024",
  // "FP8 vs BF16", "margin=2, window=1024" (a run named after a preset, opened again).
  QStringList kept;
  if (colon > 0)
    for (const QString& part : preset_name.mid(colon + 1).split(QLatin1Char(',')))
      if (!part.trimmed().isEmpty()) kept << part.trimmed();
  // Another model than the one the preset's name names: that name is no more ("Tiny GPT"
  // made a Llama is no Tiny GPT); the new model names the run.
  const auto model = std::find_if(changed.begin(), changed.end(),
                                  [](const Changed& c) { return c.key == QLatin1String("model"); });
  if (model != changed.end() && names_field(preset_name, *model)) {
    stem = model_title(model->text.section(QLatin1Char('='), 1));
    kept.removeIf([&](const QString& part) { return names_field(part, *model); });
    changed.erase(model);
  }
  // A part that names a field changed gives way to the field's new value ("window 1" to
  // "window=1024"); the others stay, then the fields changed.
  QStringList parts;
  for (const QString& part : kept) {
    const bool stale = std::any_of(changed.begin(), changed.end(),
                                   [&](const Changed& c) { return names_field(part, c); });
    if (!stale) parts << part;
  }
  QStringList fields;
  for (const Changed& c : changed) fields << c.text;
  QString rest = fields_text(fields);
  if (!rest.isEmpty()) parts << rest;
  return parts.isEmpty() ? stem : stem + QStringLiteral(": ") + parts.join(QStringLiteral(", "));
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
