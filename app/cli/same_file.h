// defines: same_file_as(): whether an output path names one of a command's input files,
// so that a command refuses to write its output over what it reads; sqlite_database_at():
// whether it names an SQLite database (a run database, any other) or one of its files.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "fp8wb/core/checkpoint/file_io.h"

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

// The SQLite database that writing `out` would destroy (file_io.h): `out` itself, or the
// database whose -wal, -shm or -journal file it is. Empty where there is none.
inline std::string sqlite_database_at(const std::string& out) {
  return fp8wb::sqlite_database_at(out);
}

// What a command says, refusing to write its output (`option` `out`, e.g. "--export x")
// over an SQLite database or one of its files; empty where `out` is none of them.
inline std::string sqlite_refusal(const std::string& option, const std::string& out) {
  const std::string db = sqlite_database_at(out);
  if (db.empty()) return {};
  return option + " " + out +
         (db == out ? " is an SQLite database" : " belongs to the SQLite database " + db) +
         " (a run database, perhaps): writing there would destroy it; give another path";
}

}  // namespace fp8wb::cli
