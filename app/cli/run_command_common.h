// defines: dump(), num(), db_path(), median(): what `fp8wb train`, `runs` and `bench`
// share (JSON output, the run database's path, medians of step figures).
#pragma once

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fp8wb/core/run_store.h"

namespace fp8wb::cli {

// JSON out: strings that are not UTF-8 (a path, say) are written with U+FFFD, never refused.
inline std::string dump(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A figure as JSON: null where it is not finite.
inline nlohmann::json num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

// The database given, or the default one.
inline std::string db_path(const std::string& given) {
  return given.empty() ? default_database_path() : given;
}

// The median (of an even count, the mean of the middle two); NaN for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace fp8wb::cli
