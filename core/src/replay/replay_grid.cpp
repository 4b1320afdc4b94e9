// The replay's grid (replay.h): its axes as `--grid AXIS=V1,V2,...` gives them, each value
// as a run's config takes it, and whether a best cell sits at an edge beyond which a
// setting could rank better.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/replay/replay.h"

namespace fp8wb {

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t c = s.find(',', at);
    out.push_back(s.substr(at, c == std::string::npos ? std::string::npos : c - at));
    if (c == std::string::npos) break;
    at = c + 1;
  }
  return out;
}

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

}  // namespace

void parse_replay_axis(const std::string& text, ReplayGrid& grid) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    throw ReplayError("--grid '" + text +
                      "': expected AXIS=V1,V2,... with AXIS one of margin, window, amax_algo");
  }
  const std::string axis = trimmed(text.substr(0, eq));
  const std::vector<std::string> values = split_commas(text.substr(eq + 1));
  const auto once = [&](bool empty) {
    if (!empty) throw ReplayError("--grid " + axis + " is given twice");
  };
  for (const std::string& raw : values) {
    if (trimmed(raw).empty())
      throw ReplayError("--grid " + axis + ": an empty value in '" + text + "'");
  }
  // A value as a run's config takes it (its type, names and bounds: the field table).
  const auto value = [&axis](const std::string& v) {
    RunConfig c;
    try {
      apply_override(c, axis + "=" + trimmed(v));
      validate_run_config(c);
    } catch (const ConfigError& e) {
      throw ReplayError("--grid " + axis + "=" + trimmed(v) + ": " + e.reason);
    }
    return c;
  };
  try {
    if (axis == "margin") {
      once(grid.margins.empty());
      for (const auto& v : values) grid.margins.push_back(value(v).margin);
    } else if (axis == "window") {
      once(grid.windows.empty());
      for (const auto& v : values) grid.windows.push_back(value(v).window);
    } else if (axis == "amax_algo") {
      once(grid.algos.empty());
      for (const auto& v : values) grid.algos.push_back(value(v).amax_algo);
    } else {
      throw ReplayError("--grid: unknown axis '" + axis +
                        "' (replay takes margin, window, amax_algo)");
    }
  } catch (const ReplayError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw ReplayError("--grid " + axis + ": " + e.what());
  }
}

ReplayGridEdge replay_grid_edge(const ReplayGrid& grid, const ReplayCellSetting& s,
                                const ReplayFigures& f) {
  ReplayGridEdge e;
  auto at = [](const std::vector<int>& axis, int v, bool& low, bool& high) {
    if (axis.size() < 2) return;  // one value: no neighbours to go beyond
    const auto [lo, hi] = std::minmax_element(axis.begin(), axis.end());
    if (*lo == *hi) return;
    low = v == *lo;
    high = v == *hi;
  };
  at(grid.margins, s.margin, e.margin_low, e.margin_high);
  at(grid.windows, s.window, e.window_low, e.window_high);
  // Only where going beyond could change the answer under the rule (ReplayResult::kRule).
  // A larger margin, or a longer window of the history's largest amax, gives every
  // (step, tensor) at least as much headroom (the scale is max / (amax x 2^margin), amax
  // the largest of a longer history), a smaller one at most as much. A safe best (no
  // saturation, 0.5 binade at its closest approach) is the safe cell with the least median
  // headroom: beyond its larger edge a cell only has more, so ranks lower; beyond its
  // smaller edge one may still be safe with less. A best that is not safe ranks by its
  // room (fewest saturating steps, most headroom at the closest approach): only more
  // margin or a longer window can give more. The most recent amax takes no window.
  const bool safe =
      f.saturating_steps == 0 && f.min_headroom_binades >= ReplayResult::kSafeHeadroomBinades;
  if (safe) {
    e.margin_high = e.window_high = false;
  } else {
    e.margin_low = e.window_low = false;
  }
  e.margin_low = e.margin_low && s.margin > -64;  // the margin's bounds (run_config_fields)
  e.margin_high = e.margin_high && s.margin < 64;
  e.window_low = e.window_low && s.window > 1;  // no window below 1 to try
  e.window_high = e.window_high && s.window < 65536;
  if (s.algo != AmaxAlgo::Max) e.window_low = e.window_high = false;
  return e;
}

std::string ReplayGridEdge::text(const ReplayCellSetting& s) const {
  if (!any()) return {};
  std::string parts;
  auto add = [&parts](const std::string& p) { parts += (parts.empty() ? "" : "; ") + p; };
  if (margin_low) add("margin " + std::to_string(s.margin) + ", the smallest given");
  if (margin_high) add("margin " + std::to_string(s.margin) + ", the largest given");
  if (window_low) add("window " + std::to_string(s.window) + ", the smallest given");
  if (window_high) add("window " + std::to_string(s.window) + ", the largest given");
  return "at the edge of the grid (" + parts + "): try beyond it";
}

std::vector<std::string> ReplayGridEdge::names() const {
  std::vector<std::string> n;
  if (margin_low) n.push_back("margin_min");
  if (margin_high) n.push_back("margin_max");
  if (window_low) n.push_back("window_min");
  if (window_high) n.push_back("window_max");
  return n;
}

}  // namespace fp8wb
