// defines: utf8_char_at(): the UTF-8 character at a byte of a text; control_character_in(): whether
// a name (a run's, a sweep's) holds a character that lists and tables cannot show; name_problem():
// what is wrong with a name, if anything (blank, not UTF-8, a control character);
// code_width(): a character's terminal columns; shown_text(): a name read from a file as
// the CLI and the GUI show it.
#pragma once

#include <locale.h>
#include <wchar.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace fp8wb {

// The length of the UTF-8 character at s[at] and its code point; 0 where the bytes there
// are not UTF-8 (a stray continuation byte, an overlong form, a surrogate, a code point
// past U+10FFFF, a cut character).
inline size_t utf8_char_at(std::string_view s, size_t at, uint32_t& code) {
  const auto c = static_cast<unsigned char>(s[at]);
  const size_t len = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xE  ? 3
                     : (c >> 3) == 0x1E ? 4
                                        : 0;
  if (len == 0 || at + len > s.size()) return 0;
  code = len == 1 ? c : len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
  for (size_t k = 1; k < len; ++k) {
    const auto n = static_cast<unsigned char>(s[at + k]);
    if ((n & 0xC0) != 0x80) return 0;
    code = code << 6 | (n & 0x3Fu);
  }
  static constexpr uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kLeast[len] || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return 0;
  return len;
}

// Empty where `name` holds no control character; else which one and where, e.g.
// "holds a control character (U+0000 at byte 3)". C0 controls (U+0000-U+001F, tab and
// line breaks too), DEL and the C1 controls (U+0080-U+009F, in UTF-8) would cut a name
// short (a NUL) or break the lines and columns it is shown in.
inline std::string control_character_in(std::string_view name) {
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    unsigned code = 0x110000;
    if (c < 0x20 || c == 0x7F) {
      code = c;
    } else if (c == 0xC2 && i + 1 < name.size()) {
      const auto next = static_cast<unsigned char>(name[i + 1]);
      if (next >= 0x80 && next <= 0x9F) code = next;
    }
    if (code == 0x110000) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "holds a control character (U+%04X at byte %zu)", code, i);
    return buf;
  }
  return "";
}

// Empty where `name` is a name that can be stored and shown; else what is wrong with it:
// "is empty", "is blank (spaces only)", "is not valid UTF-8 (byte 0xFF at byte 3)", or
// control_character_in()'s reason. Blank counts every space character (U+0020, U+00A0,
// U+1680, U+2000-U+200A, U+202F, U+205F, U+3000), as the GUI's trimming does.
inline std::string name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  bool blank = true;
  for (size_t i = 0; i < name.size();) {
    uint32_t code = 0;
    const size_t len = utf8_char_at(name, i, code);
    if (len == 0) {
      char buf[80];
      std::snprintf(buf, sizeof buf, "is not valid UTF-8 text (byte 0x%02X at byte %zu)",
                    static_cast<unsigned char>(name[i]), i);
      return buf;
    }
    const bool space = code == 0x20 || code == 0xA0 || code == 0x1680 ||
                       (code >= 0x2000 && code <= 0x200A) || code == 0x202F || code == 0x205F ||
                       code == 0x3000;
    blank = blank && space;
    i += len;
  }
  if (const std::string why = control_character_in(name); !why.empty()) return why;
  if (blank) return "is blank (spaces only)";
  return "";
}

// The columns a code point takes on a terminal: the C library's wcwidth() in a UTF-8
// locale (made once, used on this thread only for the call); -1 for one that is not
// printable (a control character, a line or paragraph separator). Without a UTF-8 locale,
// 1 for every printable character.
inline int code_width(uint32_t code) {
  if (code < 0x20 || (code >= 0x7F && code < 0xA0)) return -1;
  static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  if (utf8 == static_cast<locale_t>(0)) return 1;
  const locale_t before = uselocale(utf8);
  const int w = wcwidth(static_cast<wchar_t>(code));
  uselocale(before);
  return w;
}

// `s` (a tensor's name, read from a file) as the CLI's tables and the GUI show it: a
// control character, a character that is not printable (a line separator) or that is
// invisible yet reorders or joins the text around it (bidirectional overrides, embeddings,
// isolates and marks, zero widths, joiners, the byte order mark) is written as an escape
// ("\n", "\t", "\r", "\x1b", "\u202e"), a byte that is not UTF-8 as "\xff", a
// backslash as "\\" and a double quote as "\"", so that no name can move a terminal's
// cursor, recolour it, garble the text beside it or pass for another name; an empty name
// (safetensors allows one) as "" so that it is seen.
inline std::string shown_text(const std::string& s) {
  if (s.empty()) return "\"\"";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t code = 0;
    const size_t len = utf8_char_at(s, i, code);
    char buf[16];
    if (len == 0) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i]));
      out += buf;
      ++i;
      continue;
    }
    const bool invisible = code == 0x061C || (code >= 0x200B && code <= 0x200F) ||
                           (code >= 0x2028 && code <= 0x202E) ||
                           (code >= 0x2060 && code <= 0x206F) || code == 0xFEFF;
    if (code == '\\') {
      out += "\\\\";
    } else if (code == '"') {
      out += "\\\"";
    } else if (code == '\n') {
      out += "\\n";
    } else if (code == '\t') {
      out += "\\t";
    } else if (code == '\r') {
      out += "\\r";
    } else if (code < 0x20 || code == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(code));
      out += buf;
    } else if (invisible || code_width(code) < 0) {
      std::snprintf(buf, sizeof buf, code > 0xFFFF ? "\\U%08x" : "\\u%04x",
                    static_cast<unsigned>(code));
      out += buf;
    } else {
      out.append(s, i, len);
    }
    i += len;
  }
  return out;
}

}  // namespace fp8wb
