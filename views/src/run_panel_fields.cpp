// defines: the run panel's field labels and help (the config's field table), the config
// messages in their words (readable()) and the number boxes' free functions
// (run_panel_fields.h).
#include "run_panel_fields.h"

#include <QRegularExpression>
#include <algorithm>
#include <cstdint>

#include "fp8wb/core/run_config_fields.h"
#include "fp8wb/views/run_panel.h"

namespace fp8wb::detail {
namespace {

const QRegularExpression& field_pattern() {
  static const QRegularExpression re(QStringLiteral("^config field '([^']*)': "));
  return re;
}

}  // namespace

QString field_label(const QString& key) {
  const RunConfigField* f = find_run_config_field(key.toStdString());
  return f ? RunPanel::tr(std::string(f->label).c_str()) : key;
}

QString field_help(const QString& key) {
  const RunConfigField* f = find_run_config_field(key.toStdString());
  return f ? key + QStringLiteral(": ") + RunPanel::tr(std::string(f->help).c_str()) : key;
}

// The key a config message names ("config field 'heads': ..."), or empty.
QString field_key(const QString& message) {
  return field_pattern().match(message).captured(1);
}

// A config message with the field as the form labels it: "Attention heads (GPT): must be
// >= 1, not -5".
QString readable(const std::exception& e) {
  QString m = QString::fromStdString(e.what());
  const QRegularExpressionMatch match = field_pattern().match(m);
  if (!match.hasMatch()) return m;
  QString why = m.mid(match.capturedLength());
  // Other fields the reason names, in words too ("5 does not divide model width (GPT) 64").
  for (const RunConfigField& f : run_config_fields()) {
    const QString key = QString::fromLatin1(f.key.data(), static_cast<int>(f.key.size()));
    if (!key.contains(QLatin1Char('_'))) continue;
    QString label = field_label(key);
    if (label.size() > 1 && label[1].isLower()) label[0] = label[0].toLower();
    why.replace(QRegularExpression(QStringLiteral("\\b%1\\b").arg(key)), label);
  }
  return field_label(match.captured(1)) + QStringLiteral(": ") + why;
}

bool box_refused(const QAbstractSpinBox* b) {
  if (auto* i = dynamic_cast<const IntBox*>(b)) return i->refused();
  if (auto* r = dynamic_cast<const RealBox*>(b)) return r->refused();
  return false;
}

QString box_bounds(const QAbstractSpinBox* b) {
  if (auto* i = dynamic_cast<const IntBox*>(b)) return i->bounds();
  if (auto* r = dynamic_cast<const RealBox*>(b)) return r->bounds();
  return {};
}

void set_field_bounds(QAbstractSpinBox* box, const QString& key) {
  const RunConfigField* f = find_run_config_field(key.toStdString());
  if (!f || !f->has_min() || !f->has_max()) return;
  if (auto* i = dynamic_cast<IntBox*>(box)) {
    i->setRange(static_cast<int>(std::max<double>(f->min, INT32_MIN)),
                static_cast<int>(std::min<double>(f->max, INT32_MAX)));
  } else if (auto* r = dynamic_cast<RealBox*>(box)) {
    r->setRange(f->min, f->max);
    r->setMinimumExcluded(f->min_excluded);
  }
}

void show_value(QAbstractSpinBox* b, double v) {
  if (auto* i = dynamic_cast<IntBox*>(b)) i->showValue(v);
  if (auto* r = dynamic_cast<RealBox*>(b)) r->showValue(v);
}

}  // namespace fp8wb::detail
