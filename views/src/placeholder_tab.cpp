#include "fp8wb/views/placeholder_tab.h"

#include <QLabel>
#include <QVBoxLayout>

namespace fp8wb {

PlaceholderTab::PlaceholderTab(const QString& title, const QString& description, QWidget* parent)
    : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* heading = new QLabel(QStringLiteral("<h2>%1</h2>").arg(title.toHtmlEscaped()), this);
  auto* text = new QLabel(description, this);
  text->setWordWrap(true);
  text->setTextFormat(Qt::RichText);
  auto* soon = new QLabel(tr("<i>Not built yet in this version.</i>"), this);
  layout->addStretch(1);
  for (QLabel* l : {heading, text, soon}) {
    l->setAlignment(Qt::AlignCenter);
    layout->addWidget(l);
  }
  layout->addStretch(2);
  text->setMaximumWidth(720);
  layout->setAlignment(text, Qt::AlignHCenter);
}

}  // namespace fp8wb
