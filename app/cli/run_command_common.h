// defines: dump(), num(), db_path(), kDatabasePath, check_db_folder(),
// step_range_text(): what `fp8wb train`, `runs` and `bench` share (JSON output, the run
// database's path, steps named by index; medians are median() (median.h), a run's
// tokens/s run_speed() (final_loss.h)).
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8wb/core/store/run_store.h"

namespace fp8wb::cli {

// JSON out: strings that are not UTF-8 (a path, say) are written with U+FFFD, never refused.
inline std::string dump(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A figure as JSON: null where it is not finite.
inline nlohmann::json num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

// Steps by their index, as the store and numerics number them (the first is step 0):
// "step 9" for one, "steps 90-99" for a range (both ends included). Counts of steps done
// are said as counts ("10/10 steps").
inline std::string step_range_text(int64_t from, int64_t to) {
  return from == to ? "step " + std::to_string(from)
                    : "steps " + std::to_string(from) + "-" + std::to_string(to);
}

// The database given, or the default one.
inline std::string db_path(const std::string& given) {
  return given.empty() ? default_database_path() : given;
}

// --db's check: an empty path is refused (it would name no file; the default database is
// had by leaving --db out).
inline const CLI::Validator kDatabasePath(
    [](std::string& path) {
      return path.empty() ? "an empty path names no run database: give a file path, or leave "
                            "--db out for the default (" +
                                default_database_path() + ")"
                          : std::string();
    },
    "");

// A --db given by the user must lie in a folder that is there: a mistyped path would
// otherwise make folders and a new, empty database in them. The default database's
// folder is made as needed.
inline void check_db_folder(const std::string& given) {
  if (given.empty()) return;
  const std::filesystem::path folder = std::filesystem::path(given).parent_path();
  if (folder.empty()) return;  // the current folder
  std::error_code ec;
  const auto st = std::filesystem::status(folder, ec);
  if (!std::filesystem::exists(st)) {
    throw std::invalid_argument("--db " + given + ": the folder " + folder.string() +
                                " does not exist (create it first, or give another path)");
  }
  if (!std::filesystem::is_directory(st)) {
    throw std::invalid_argument("--db " + given + ": " + folder.string() + " is not a folder");
  }
}

}  // namespace fp8wb::cli
