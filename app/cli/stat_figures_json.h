// defines: put_stat_figures(): a quantization's derived figures (kTensorStatFigures in
// metrics.h: underflow_pct, saturated_pct, subnormal_pct, sqnr_db, zeros_pct) into a JSON
// object, one key each, as `fp8wb inspect --json` and `fp8wb demo --json` write them: a
// figure added to the table is written by both without a change here.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "fp8wb/core/formats/value_report.h"
#include "fp8wb/core/metrics.h"

namespace fp8wb::cli {

// Every figure of `s` under `prefix` + its name ("tensorwise_" + "sqnr_db"). A figure that
// JSON's numbers cannot hold (an exact recipe's +inf dB) is its text, "inf", as the CLI
// writes such numbers everywhere; null would read as "no figure".
inline void put_stat_figures(nlohmann::json& j, const StatsBuffer& s,
                             const std::string& prefix = {}) {
  for (const TensorStatFigure& f : kTensorStatFigures) {
    const double v = f.of(s);
    j[prefix + f.name] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(format_number(v));
  }
}

}  // namespace fp8wb::cli
