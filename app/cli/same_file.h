// defines: same_file_as(): whether an output path names one of a command's input files,
// so that a command refuses to write its output over what it reads.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace fp8wb::cli {

// The input that `out` names: the same path, or another path to the same file (a symlink,
// `./x` for `x`, a hard link). Empty where `out` is none of them (or does not exist yet).
inline std::string same_file_as(const std::string& out, const std::vector<std::string>& inputs) {
  for (const auto& in : inputs) {
    std::error_code ec;
    if (std::filesystem::equivalent(out, in, ec) && !ec) return in;
  }
  return {};
}

}  // namespace fp8wb::cli
