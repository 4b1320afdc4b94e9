// defines: name_text(), fill_choices(), chosen(), choose(): a combo box whose items are a
// vocabulary's table (kernels/include/fp8wb/kernels/name_table.h), in the table's order, so that
// the item's index is the entry's and nothing is parsed back from text.
#pragma once

#include <QComboBox>
#include <QString>
#include <cstddef>
#include <string_view>

namespace fp8wb {

inline QString name_text(std::string_view name) {
  return QString::fromLatin1(name.data(), static_cast<qsizetype>(name.size()));
}

// Items: each entry's name (or, with `label`, what that member says).
template <class T, size_t N>
void fill_choices(QComboBox* box, const T (&table)[N]) {
  for (const T& e : table) box->addItem(name_text(e.name));
}
template <class T, size_t N, class L>
void fill_choices(QComboBox* box, const T (&table)[N], L T::*label) {
  for (const T& e : table) box->addItem(name_text(e.*label));
}

// The chosen entry's value (the first entry while nothing is chosen).
template <class T, size_t N>
decltype(T::value) chosen(const QComboBox* box, const T (&table)[N]) {
  const int i = box->currentIndex();
  return table[i >= 0 && static_cast<size_t>(i) < N ? static_cast<size_t>(i) : 0].value;
}

template <class T, size_t N, class E>
void choose(QComboBox* box, const T (&)[N], E value) {
  box->setCurrentIndex(static_cast<int>(value));  // entry i holds value i (names_cover_enum)
}

}  // namespace fp8wb
