// defines: text_width(), cut_text(), fit_column(): text in the CLI's tables, counted in
// characters (UTF-8 code points, never split) and cut with a visible "…".
#pragma once

#include <cstddef>
#include <string>

namespace fp8wb::cli {

// The characters of UTF-8 text (its bytes less continuation bytes).
inline size_t text_width(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// `s` where it has at most `width` characters, else its first width - 1 and "…": a cut
// is always seen.
inline std::string cut_text(const std::string& s, size_t width) {
  if (text_width(s) <= width) return s;
  if (width == 0) return "";
  size_t chars = 0, at = 0;
  for (; at < s.size(); ++at) {
    if ((static_cast<unsigned char>(s[at]) & 0xC0) != 0x80 && chars++ == width - 1) break;
  }
  return s.substr(0, at) + "…";
}

// cut_text() padded with spaces to `width` characters: a left-aligned column.
inline std::string fit_column(const std::string& s, size_t width) {
  std::string t = cut_text(s, width);
  const size_t w = text_width(t);
  return w < width ? t + std::string(width - w, ' ') : t;
}

}  // namespace fp8wb::cli
