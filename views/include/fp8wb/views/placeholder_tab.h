// defines: PlaceholderTab: a tab not built yet, saying what it will hold.
#pragma once

#include <QWidget>

namespace fp8wb {

class PlaceholderTab : public QWidget {
  Q_OBJECT
 public:
  PlaceholderTab(const QString& title, const QString& description, QWidget* parent = nullptr);
};

}  // namespace fp8wb
