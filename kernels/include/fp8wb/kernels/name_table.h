// defines: names_cover_enum(), table_name(), parse_table_name(), table_names(): the one
// pattern for the workbench's vocabularies (formats, scaling kinds, amax algorithms, roles,
// recipes, format pairings, config words, run statuses, sweep metrics). Each is an enum
// with one table of entries {value, name, ...}, one entry per value in the enum's order:
// text is parsed against the table once, where it comes in (a config, the command line,
// the database), and everything else names values from it.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fp8wb {

// True when entry i of the table holds the enum's value i and the table ends at `last`:
// beside each table, static_assert(names_cover_enum(table, last)) keeps every value named.
template <class T, size_t N, class E>
constexpr bool names_cover_enum(const T (&table)[N], E last) {
  if (static_cast<size_t>(last) + 1 != N) return false;
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(table[i].value) != i) return false;
  }
  return true;
}

// The entry of a value. Throws std::out_of_range for a value outside the enum (a cast
// from a number no table holds).
template <class T, size_t N, class E>
constexpr const T& table_entry(const T (&table)[N], E value) {
  const auto i = static_cast<size_t>(value);
  if (i >= N) throw std::out_of_range("no name for value " + std::to_string(i));
  return table[i];
}

template <class T, size_t N, class E>
constexpr std::string_view table_name(const T (&table)[N], E value) {
  return table_entry(table, value).name;
}

// Exactly as the table spells it (names are case-sensitive, as config values are).
template <class T, size_t N>
std::optional<decltype(T::value)> parse_table_name(const T (&table)[N], std::string_view name) {
  for (const T& e : table) {
    if (e.name == name) return e.value;
  }
  return std::nullopt;
}

// "input, weight, grad_output": the allowed names, for messages.
template <class T, size_t N>
std::string table_names(const T (&table)[N]) {
  std::string out;
  for (const T& e : table) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

}  // namespace fp8wb
