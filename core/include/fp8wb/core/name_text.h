// defines: control_character_in(): whether a name (a run's, a sweep's) holds a character
// that lists and tables cannot show; name_problem(): what is wrong with a name, if
// anything (blank, not UTF-8, a control character).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace fp8wb {

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
    const auto c = static_cast<unsigned char>(name[i]);
    const size_t len = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xE  ? 3
                       : (c >> 3) == 0x1E ? 4
                                          : 0;
    uint32_t code = len == 1 ? c : len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
    bool valid = len != 0 && i + len <= name.size();
    for (size_t k = 1; valid && k < len; ++k) {
      const auto n = static_cast<unsigned char>(name[i + k]);
      valid = (n & 0xC0) == 0x80;
      code = code << 6 | (n & 0x3Fu);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
    static constexpr uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
    if (valid && (code < kLeast[len] || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF))
      valid = false;
    if (!valid) {
      char buf[80];
      std::snprintf(buf, sizeof buf, "is not valid UTF-8 text (byte 0x%02X at byte %zu)", c, i);
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

}  // namespace fp8wb
