// defines: BitFieldWidget: a code's bits as coloured boxes (sign red, exponent blue,
// mantissa green) with the field names underneath.
#pragma once

#include <QWidget>

#include "fp8wb/core/formats/value_report.h"

class QLabel;
class QGridLayout;

namespace fp8wb {

class BitFieldWidget : public QWidget {
  Q_OBJECT
 public:
  explicit BitFieldWidget(QWidget* parent = nullptr);
  void setBits(const BitFields& bits);
  // "0 0111 000": the fields as shown, separated by spaces.
  QString bitsText() const;

  static QColor signColor();
  static QColor exponentColor();
  static QColor mantissaColor();

 private:
  QGridLayout* grid_;
  BitFields bits_;
};

}  // namespace fp8wb
