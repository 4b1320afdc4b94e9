// defines: text_width(), cut_text(), cut_middle(), fit_column(): text in the CLI's tables
// (names escaped by shown_text(), fp8wb/core/name_text.h): widths counted in terminal
// columns (a CJK character or an emoji takes two, a combining accent none) and text cut
// with a visible "…", never inside a character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fp8wb/core/name_text.h"

namespace fp8wb::cli {

// The columns text takes on a terminal (for shown_text()'s text: printable UTF-8; a byte
// that is not UTF-8, or a character that is not printable, counts one).
inline size_t text_width(const std::string& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    uint32_t code = 0;
    const size_t len = utf8_char_at(s, i, code);
    if (len == 0) {
      ++n;
      ++i;
      continue;
    }
    const int w = code_width(code);
    n += w < 0 ? 1 : static_cast<size_t>(w);
    i += len;
  }
  return n;
}

// `s` where it takes at most `width` columns, else as much of it as takes width - 1 and
// "…": a cut is always seen.
inline std::string cut_text(const std::string& s, size_t width) {
  if (text_width(s) <= width) return s;
  if (width == 0) return "";
  size_t used = 0, at = 0;
  while (at < s.size()) {
    uint32_t code = 0;
    size_t len = utf8_char_at(s, at, code);
    int w = 1;
    if (len == 0) {
      len = 1;
    } else {
      w = code_width(code);
      if (w < 0) w = 1;
    }
    if (used + static_cast<size_t>(w) > width - 1) break;
    used += static_cast<size_t>(w);
    at += len;
  }
  return s.substr(0, at) + "…";
}

// `s` where it takes at most `width` columns, else its beginning and its end with "…"
// between them, `width` columns in all (one fewer where a wide character would cross the
// cut): names that differ only at the end (a sweep's trials) stay apart.
inline std::string cut_middle(const std::string& s, size_t width) {
  if (text_width(s) <= width) return s;
  if (width < 3) return cut_text(s, width);
  // Each character with its byte offset and its columns.
  struct Char {
    size_t at, len, cols;
  };
  std::vector<Char> chars;
  for (size_t i = 0; i < s.size();) {
    uint32_t code = 0;
    size_t len = utf8_char_at(s, i, code);
    size_t cols = 1;
    if (len == 0) {
      len = 1;
    } else {
      const int w = code_width(code);
      cols = w < 0 ? 1 : static_cast<size_t>(w);
    }
    chars.push_back({i, len, cols});
    i += len;
  }
  const size_t room = width - 1;  // for the text around the "…"
  const size_t tail_room = room / 2, head_room = room - tail_room;
  size_t head = 0, used = 0;  // characters kept from the start
  while (head < chars.size() && used + chars[head].cols <= head_room) used += chars[head++].cols;
  size_t tail = chars.size();  // the first character kept at the end
  used = 0;
  while (tail > head && used + chars[tail - 1].cols <= tail_room) used += chars[--tail].cols;
  const size_t head_end = head == 0 ? 0 : chars[head - 1].at + chars[head - 1].len;
  return s.substr(0, head_end) + "…" + (tail < chars.size() ? s.substr(chars[tail].at) : "");
}

// cut_text() padded with spaces to `width` columns: a left-aligned column.
inline std::string fit_column(const std::string& s, size_t width) {
  std::string t = cut_text(s, width);
  const size_t w = text_width(t);
  return w < width ? t + std::string(width - w, ' ') : t;
}

}  // namespace fp8wb::cli
