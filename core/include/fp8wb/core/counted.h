// defines: counted(): a count and its noun, singular for one ("1 trial", "3 trials").
#pragma once

#include <cstdint>
#include <string>

namespace fp8wb {

// `noun` is the singular; `plural` defaults to it with an "s" added.
inline std::string counted(int64_t n, const std::string& noun, const std::string& plural = "") {
  return std::to_string(n) + " " + (n == 1 ? noun : plural.empty() ? noun + "s" : plural);
}

}  // namespace fp8wb
