// defines: the run panel's fields as people read them (field_label(), field_help(),
// set_field_bounds(): from the config's field table; readable(): a config
// error naming the field by its label) and its number boxes (IntBox, RealBox: what was
// typed stays, a value outside the config's bounds refused, never clamped). Shared by
// run_panel.cpp, run_panel_form.cpp and run_panel_validation.cpp.
#pragma once

#include <QAbstractSpinBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QLocale>
#include <QSpinBox>
#include <QString>
#include <cmath>
#include <exception>
#include <optional>
#include <type_traits>

namespace fp8wb::detail {

// The label the form gives a config key ("Attention heads (GPT)" for heads); the key where
// the form has none.
QString field_label(const QString& key);
// Its tooltip: "key: what it means" (the key as a config file or --set spells it).
QString field_help(const QString& key);
// Sets a number box's bounds to its field's (run_config_fields.h): an int box's at most
// INT32_MAX (the seed's 2^53 does not fit a QSpinBox).
void set_field_bounds(QAbstractSpinBox* box, const QString& key);
// The key of the field a config error names (ConfigError::field), or empty.
QString error_field(const std::exception& e);
// A config error with the field as the form labels it: "Attention heads (GPT): must be
// >= 1, not -5"; another error's message as it is.
QString readable(const std::exception& e);

// A number box that never rewrites what was typed: text that is not a number within the
// box's bounds (the config's) stays as typed and the box is refused, so that the panel
// names it and keeps Start disabled, instead of being clamped, cut or dropped.
template <class Box>
class NumberBox : public Box {
 public:
  explicit NumberBox(QWidget* parent) : Box(parent) {
    // Once left, a value reads as the box writes it ("never" for 0 where 0 means that).
    QObject::connect(this, &QAbstractSpinBox::editingFinished, this, [this] {
      if (!refused()) this->lineEdit()->setText(shown(this->value()));
    });
  }
  bool refused() const { return !refused_.isNull(); }
  // What 0 means, shown for it and read back as 0 ("never").
  void setZeroText(const QString& text) { zero_text_ = text; }
  // Above the minimum, not at it (a learning rate).
  void setMinimumExcluded(bool excluded) { minimum_excluded_ = excluded; }
  void showValue(double v) {
    refused_ = QString();
    this->setValue(static_cast<decltype(this->value())>(v));
    this->lineEdit()->setText(shown(this->value()));
  }
  QString bounds() const {
    return QStringLiteral("%1%2, %3]")
        .arg(minimum_excluded_ ? QLatin1Char('(') : QLatin1Char('['))
        .arg(QLocale::c().toString(static_cast<double>(this->minimum()), 'g', 12))
        .arg(QLocale::c().toString(static_cast<double>(this->maximum()), 'g', 12));
  }

 protected:
  QValidator::State validate(QString& text, int&) const override {
    const bool ok = parse(text).has_value();
    refused_ = ok ? QString() : text;
    return ok ? QValidator::Acceptable : QValidator::Intermediate;
  }
  void fixup(QString&) const override {}  // what was typed stays
  void stepBy(int steps) override {
    refused_ = QString();
    Box::stepBy(steps);
  }
  std::optional<double> parse(const QString& text) const {
    const QString t = text.trimmed();
    if (!zero_text_.isEmpty() && t.compare(zero_text_, Qt::CaseInsensitive) == 0) return 0.0;
    bool ok = false;
    const double v = QLocale::c().toDouble(t, &ok);
    if (!ok || !(v >= this->minimum() && v <= this->maximum())) return std::nullopt;
    if (minimum_excluded_ && v == this->minimum()) return std::nullopt;
    if (std::is_integral_v<decltype(this->value())> && v != std::floor(v)) return std::nullopt;
    return v;
  }
  QString shown(double v) const {
    if (!refused_.isNull()) return refused_;
    if (v == 0 && !zero_text_.isEmpty()) return zero_text_;
    return QLocale::c().toString(v, 'g', QLocale::FloatingPointShortest);
  }
  mutable QString refused_;  // the text typed, while it is not a value
  QString zero_text_;
  bool minimum_excluded_ = false;
};

class IntBox : public NumberBox<QSpinBox> {
 public:
  using NumberBox::NumberBox;

 protected:
  int valueFromText(const QString& text) const override {
    return static_cast<int>(parse(text).value_or(value()));
  }
  QString textFromValue(int v) const override { return shown(v); }
};

class RealBox : public NumberBox<QDoubleSpinBox> {
 public:
  explicit RealBox(QWidget* parent) : NumberBox(parent) {
    setDecimals(15);  // the value as typed, not rounded to the box's decimals
  }

 protected:
  double valueFromText(const QString& text) const override { return parse(text).value_or(value()); }
  QString textFromValue(double v) const override { return shown(v); }
  void stepBy(int steps) override {
    refused_ = QString();
    // 0.003 - 0.0001 reads 0.0029, not 0.0029000000000000002.
    const QLocale c = QLocale::c();
    setValue(c.toDouble(c.toString(value() + steps * singleStep(), 'g', 12)));
  }
};

// Whether the box holds text that is no value within its bounds; its bounds ("[1, 64]");
// shows a value (IntBox and RealBox; other boxes: false, empty, nothing).
bool box_refused(const QAbstractSpinBox* b);
QString box_bounds(const QAbstractSpinBox* b);
void show_value(QAbstractSpinBox* b, double v);

}  // namespace fp8wb::detail
