#include "fp8wb/views/formats/bit_field_widget.h"

#include <QGridLayout>
#include <QLabel>

namespace fp8wb {
namespace {

// One bit's box: as wide as two digits of its font and a margin, at any font size (a
// width fixed once would cut the digit when the font grows).
class BitBox : public QLabel {
 public:
  BitBox(const QString& text, QWidget* parent) : QLabel(text, parent) {
    setAlignment(Qt::AlignCenter);
    setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Preferred);
  }
  QSize sizeHint() const override {
    return {fontMetrics().horizontalAdvance(QStringLiteral("0")) * 2 + 12,
            QLabel::sizeHint().height()};
  }
  QSize minimumSizeHint() const override { return sizeHint(); }
};

}  // namespace

QColor BitFieldWidget::signColor() {
  return QColor(0xE5, 0x73, 0x73);
}
QColor BitFieldWidget::exponentColor() {
  return QColor(0x64, 0x95, 0xED);
}
QColor BitFieldWidget::mantissaColor() {
  return QColor(0x66, 0xBB, 0x6A);
}

BitFieldWidget::BitFieldWidget(QWidget* parent) : QWidget(parent), grid_(new QGridLayout(this)) {
  grid_->setHorizontalSpacing(2);
  grid_->setVerticalSpacing(1);
  grid_->setContentsMargins(0, 0, 0, 0);
}

void BitFieldWidget::setBits(const BitFields& bits) {
  bits_ = bits;
  while (QLayoutItem* item = grid_->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  int col = 0;
  auto add_field = [&](const std::string& field, const QColor& color, const QString& name) {
    if (field.empty()) return;
    for (char b : field) {
      auto* box = new BitBox(QString(QChar(b)), this);
      box->setStyleSheet(
          QStringLiteral("QLabel { background: %1; color: black; border: 1px solid "
                         "#444; font-family: monospace; font-weight: bold; padding: 2px; }")
              .arg(color.name()));
      grid_->addWidget(box, 0, col++);
    }
    auto* caption = new QLabel(name, this);
    caption->setAlignment(Qt::AlignCenter);
    grid_->addWidget(caption, 1, col - static_cast<int>(field.size()), 1,
                     static_cast<int>(field.size()));
    grid_->setColumnMinimumWidth(col++, 6);  // a gap between fields
  };
  add_field(bits.sign, signColor(), tr("S"));
  add_field(bits.exponent, exponentColor(), tr("exponent"));
  add_field(bits.mantissa, mantissaColor(), tr("mantissa"));
  grid_->setColumnStretch(col, 1);
}

QString BitFieldWidget::bitsText() const {
  return QString::fromStdString(bits_.joined(' '));
}

}  // namespace fp8wb
