// defines: control_character_in(): whether a name (a run's, a sweep's) holds a character
// that lists and tables cannot show.
#pragma once

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

}  // namespace fp8wb
