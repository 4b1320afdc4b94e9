// defines: same_file_as(): whether an output path names one of a command's input files,
// so that a command refuses to write its output over what it reads; sqlite_database_at():
// whether it names an SQLite database (a run database, any other) or one of its files.
#pragma once

#include <cstring>
#include <filesystem>
#include <fstream>
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

// The SQLite database that writing `out` would destroy: `out` itself where it is a file
// that begins as every SQLite database does (through a link too), or the database whose
// -wal, -shm or -journal file `out` is. Empty where there is none.
inline std::string sqlite_database_at(const std::string& out) {
  const auto is_database = [](const std::string& p) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec)) return false;
    static const char kHeader[16] = "SQLite format 3";  // and its terminating zero
    std::ifstream f(p, std::ios::binary);
    char head[sizeof kHeader] = {};
    f.read(head, sizeof head);
    return f.gcount() == sizeof head && std::memcmp(head, kHeader, sizeof head) == 0;
  };
  if (is_database(out)) return out;
  for (const std::string suffix : {"-wal", "-shm", "-journal"}) {
    if (out.size() > suffix.size() &&
        out.compare(out.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string base = out.substr(0, out.size() - suffix.size());
      if (is_database(base)) return base;
    }
  }
  return {};
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
