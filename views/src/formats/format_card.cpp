#include "fp8wb/views/formats/format_card.h"

#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPalette>
#include <QVBoxLayout>
#include <cmath>

#include "fp8wb/views/formats/bit_field_widget.h"

namespace fp8wb {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}
QString qs(std::string_view s) {
  return QString::fromLatin1(s.data(), static_cast<int>(s.size()));
}

QString percent(double rel) {
  if (std::isnan(rel)) return QStringLiteral("nan");
  if (std::isinf(rel)) return QStringLiteral("inf");
  return QString::number(rel * 100, 'g', 4) + QLatin1Char('%');
}

}  // namespace

FormatCard::FormatCard(Format format, QWidget* parent)
    : QGroupBox(qs(format_info(format).name), parent),
      format_(format),
      bits_(new BitFieldWidget(this)),
      code_(new QLabel(this)),
      decoded_(new QLabel(this)),
      error_(new QLabel(this)),
      neighbours_(new QLabel(this)),
      flags_(new QLabel(this)),
      note_(new QLabel(this)) {
  setToolTip(qs(format_info(format).description));
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(bits_);
  auto* form = new QFormLayout;
  // The flags (exact, subnormal, saturated, ...) follow the code on its line: a card is a
  // line shorter, and the explorer fits a projector's 1280x720 at presentation size.
  auto* code_line = new QHBoxLayout;
  code_line->setContentsMargins(0, 0, 0, 0);
  code_line->addWidget(code_);
  code_line->addWidget(flags_);
  code_line->addStretch(1);
  form->addRow(tr("code"), code_line);
  form->addRow(tr("decoded"), decoded_);
  form->addRow(tr("error"), error_);
  form->addRow(tr("neighbours"), neighbours_);
  layout->addLayout(form);
  note_->setWordWrap(true);
  note_->setObjectName(QStringLiteral("cardNote"));
  // Orange while it is of the value typed; the card disabled (text that is no value), the
  // greyed text of the rest of the card, not a bright note of a value no longer there.
  QPalette orange = note_->palette();
  for (QPalette::ColorGroup g : {QPalette::Active, QPalette::Inactive})
    orange.setColor(g, QPalette::WindowText, QColor(0x8a, 0x4b, 0x00));
  note_->setPalette(orange);
  layout->addWidget(note_);
  layout->addStretch(1);
  for (QLabel* l : {code_, decoded_, error_, neighbours_}) {
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
  }
  // Only the weight is its own: the size and family follow the card's (presentation mode).
  QFont bold;
  bold.setResolveMask(0);
  bold.setBold(true);
  decoded_->setFont(bold);
}

void FormatCard::showReport(const ValueReport& r) {
  report_ = r;
  bits_->setBits(r.bits);
  code_->setText(QStringLiteral("0x%1  (%2)")
                     .arg(r.code, 2, 16, QLatin1Char('0'))
                     .arg(qs(code_kind_name(r.kind))));
  decoded_->setText(qs(format_number(r.decoded)));
  error_->setText(
      tr("%1 absolute, %2 relative").arg(qs(format_short(r.abs_error)), percent(r.rel_error)));
  neighbours_->setText(QStringLiteral("%1  <  ·  <  %2")
                           .arg(r.below ? qs(format_number(*r.below)) : QStringLiteral("—"),
                                r.above ? qs(format_number(*r.above)) : QStringLiteral("—")));
  const QString flags = flagsText();
  flags_->setText(QStringLiteral("<b>%1</b>").arg(flags.toHtmlEscaped()));
  flags_->setVisible(flags != QStringLiteral("—"));
  note_->setText(qs(r.note));
  note_->setVisible(!r.note.empty());
}

QString FormatCard::bitsText() const {
  return bits_->bitsText();
}
QString FormatCard::decodedText() const {
  return decoded_->text();
}

QString FormatCard::flagsText() const {
  QStringList f;
  if (report_.exact) f << tr("exact");
  if (report_.subnormal) f << tr("subnormal");
  if (report_.saturated) f << tr("saturated");
  if (report_.overflowed) f << tr("overflow");
  if (report_.underflow) f << tr("underflow");
  if (report_.is_nan) f << tr("NaN");
  if (report_.kind == CodeKind::Infinity) f << tr("Inf");
  return f.isEmpty() ? QStringLiteral("—") : f.join(QStringLiteral(", "));
}

}  // namespace fp8wb
