// defines: the run panel's field labels and help (the config's field table), the config
// errors in their words (readable(), error_field()) and the number boxes' free functions
// (run_panel_fields.h).
#include "run_panel/run_panel_fields.h"

#include <QRegularExpression>
#include <algorithm>
#include <cstdint>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/config/run_config_fields.h"
#include "fp8wb/views/run_panel/run_panel.h"

namespace fp8wb::detail {

QString field_label(const QString& key) {
  const RunConfigField* f = find_run_config_field(key.toStdString());
  return f ? RunPanel::tr(std::string(f->label).c_str()) : key;
}

QString field_help(const QString& key) {
  const RunConfigField* f = find_run_config_field(key.toStdString());
  return f ? key + QStringLiteral(": ") + RunPanel::tr(std::string(f->help).c_str()) : key;
}

QString error_field(const std::exception& e) {
  const auto* c = dynamic_cast<const ConfigError*>(&e);
  return c ? QString::fromStdString(c->field) : QString();
}

QString readable(const std::exception& e) {
  const auto* c = dynamic_cast<const ConfigError*>(&e);
  if (!c || c->field.empty()) return QString::fromStdString(e.what());
  QString why = QString::fromStdString(c->reason);
  // Other fields the reason names, in words too ("5 does not divide model width (GPT) 64").
  for (const RunConfigField& f : run_config_fields()) {
    const QString key = QString::fromLatin1(f.key.data(), static_cast<int>(f.key.size()));
    if (!key.contains(QLatin1Char('_'))) continue;
    QString label = field_label(key);
    if (label.size() > 1 && label[1].isLower()) label[0] = label[0].toLower();
    why.replace(QRegularExpression(QStringLiteral("\\b%1\\b").arg(key)), label);
  }
  return field_label(QString::fromStdString(c->field)) + QStringLiteral(": ") + why;
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
