// defines: FormatCard: one format's view of a value: coloured bits, code, decoded value,
// errors, neighbours and flags.
#pragma once

#include <QGroupBox>

#include "fp8wb/core/formats/value_report.h"

class QLabel;

namespace fp8wb {

class BitFieldWidget;

class FormatCard : public QGroupBox {
  Q_OBJECT
 public:
  explicit FormatCard(Format format, QWidget* parent = nullptr);
  Format format() const { return format_; }
  void showReport(const ValueReport& r);
  const ValueReport& report() const { return report_; }

  QString bitsText() const;
  QString decodedText() const;
  QString flagsText() const;

 private:
  Format format_;
  ValueReport report_{};
  BitFieldWidget* bits_;
  QLabel* code_;
  QLabel* decoded_;
  QLabel* error_;
  QLabel* neighbours_;
  QLabel* flags_;
  QLabel* note_;
};

}  // namespace fp8wb
