// The sweep grid: its syntax, expansion into trials and stored form (sweep.h). No torch
// and no SQLite: the run-config fuzzer (tests/fuzz) builds this file alone.
#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>

#include "config/json_fields.h"
#include "fp8wb/core/name_text.h"
#include "fp8wb/core/sweep/sweep.h"

namespace fp8wb {
namespace {

using nlohmann::json;

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

// The number a grid value spells ("0.1", "1e-1", "0.10"), if it is one, whole (a NaN,
// equal to nothing, is none).
std::optional<double> number_in(const std::string& v) {
  double d = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec != std::errc() || end != v.data() + v.size() || std::isnan(d)) return std::nullopt;
  return d;
}

// A value or key quoted in a note: at most 40 bytes, cut between characters, with "…".
std::string note_text(const std::string& s) {
  if (s.size() <= 40) return s;
  size_t at = 39;
  while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
  return s.substr(0, at) + "…";
}

}  // namespace

SweepAxis parse_grid(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 >= text.size()) {
    throw std::invalid_argument("grid '" + text.substr(0, 40) +
                                "' is not key=v1,v2,... (e.g. margin=0,1,2,4)");
  }
  SweepAxis a;
  a.key = trim(text.substr(0, eq));
  std::string rest = text.substr(eq + 1);
  std::set<std::string> seen;
  std::map<double, std::string> numbers;  // the numbers given, as first spelled
  size_t i = 0;
  while (i <= rest.size()) {
    const size_t j = rest.find(',', i);
    const std::string v = trim(rest.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (v.empty()) throw std::invalid_argument("grid '" + a.key + "' has an empty value");
    if (!seen.insert(v).second) {
      throw std::invalid_argument("grid '" + a.key + "' has the value " + v.substr(0, 40) +
                                  " twice");
    }
    // Another spelling of a number already there (1e-1 after 0.1) would run the same
    // trials again: dropped, the first spelling kept, and said.
    const std::optional<double> d = number_in(v);
    const auto same = d ? numbers.find(*d) : numbers.end();
    if (same != numbers.end()) {
      a.merged.push_back({v, same->second});
    } else {
      if (a.values.size() >= kMaxSweepTrials) {
        throw std::invalid_argument("grid '" + a.key + "' has more than " +
                                    std::to_string(kMaxSweepTrials) + " values");
      }
      if (d) numbers.emplace(*d, v);
      a.values.push_back(v);
    }
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return a;
}

std::vector<std::string> merged_value_notes(const SweepAxis& axis) {
  std::vector<std::string> notes;
  for (const std::string& kept : axis.values) {  // in the grid's order
    std::vector<std::string> dropped;
    for (const auto& [spelling, same] : axis.merged) {
      if (same == kept) dropped.push_back(spelling);
    }
    if (dropped.empty()) continue;
    const size_t named = std::min<size_t>(dropped.size(), 5);  // at most five named
    std::string list;
    for (size_t k = 0; k < named; ++k) {
      const bool last = k + 1 == named && named == dropped.size();
      list += (k == 0 ? "" : last ? " and " : ", ") + note_text(dropped[k]);
    }
    if (named < dropped.size()) list += " and " + std::to_string(dropped.size() - named) + " more";
    notes.push_back("grid '" + note_text(axis.key) + "': " + list +
                    (dropped.size() == 1 ? " is" : " are") + " the number " + note_text(kept) +
                    " again: dropped, so that its trials run once (as " + note_text(kept) + ")");
  }
  return notes;
}

std::vector<SweepTrial> expand_sweep(const SweepSpec& spec) {
  if (spec.axes.empty()) throw std::invalid_argument("a sweep needs at least one --grid axis");
  // Its trials are named after it: a blank name would name them by their settings alone,
  // bytes that are not UTF-8 cannot be shown, a NUL or line break would cut or break them.
  if (const std::string why = name_problem(spec.name); !why.empty())
    throw std::invalid_argument("the sweep's name " + why);
  if (spec.seeds < 1 || spec.seeds > 1000)
    throw std::invalid_argument("seeds must be in [1, 1000], not " + std::to_string(spec.seeds));
  // The grid's size before anything is built: a 645M-trial grid is refused, not allocated.
  uint64_t trials = static_cast<uint64_t>(spec.seeds);
  for (const SweepAxis& a : spec.axes) {
    if (a.values.empty()) throw std::invalid_argument("grid '" + a.key + "' has no values");
    trials *= a.values.size();
    if (trials > kMaxSweepTrials) {
      throw std::invalid_argument("the sweep has more than " + std::to_string(kMaxSweepTrials) +
                                  " trials (grid points x seeds): narrow the grid");
    }
  }
  std::set<std::string> keys;
  for (const SweepAxis& a : spec.axes) {
    if (!keys.insert(a.key).second)
      throw std::invalid_argument("grid axis '" + a.key + "' given twice");
    if (a.key == "seed")
      throw std::invalid_argument("seeds are swept with --seeds, not a grid on 'seed'");
    if (a.key == "weights")
      throw std::invalid_argument("a sweep's trials write no weights: no grid on 'weights'");
    // Set for every trial below: a grid on them would run the same trial under other labels.
    if (a.key == "name")
      throw std::invalid_argument(
          "a trial is named after the sweep and its grid point: no grid on 'name' (name the "
          "sweep with --name)");
    if (a.key == "on_nonfinite")
      throw std::invalid_argument(
          "a sweep's trials always stop at a non-finite loss: no grid on 'on_nonfinite'");
    // Every value alone against the base config: a bad one is named before anything runs.
    for (const std::string& v : a.values) {
      RunConfig c = spec.base;
      apply_override(c, a.key + "=" + v);
    }
  }
  validate_run_config(spec.base);
  // Every trial would write its final weights to the one file, each over the one before.
  if (!spec.base.weights.empty()) {
    throw std::invalid_argument(
        "config field 'weights': a sweep's trials would all write "
        "their weights to " +
        spec.base.weights + ", each over the last; leave it out of a sweep");
  }
  std::vector<SweepTrial> out;
  std::vector<size_t> idx(spec.axes.size(), 0);
  for (;;) {
    for (int s = 0; s < spec.seeds; ++s) {
      SweepTrial t;
      t.config = spec.base;
      t.seed_index = s;
      for (size_t k = 0; k < spec.axes.size(); ++k) {
        const std::string& v = spec.axes[k].values[idx[k]];
        apply_override(t.config, spec.axes[k].key + "=" + v);
        t.values.push_back(v);
        t.key += (t.key.empty() ? "" : " ") + spec.axes[k].key + "=" + v;
      }
      t.config.seed = spec.base.seed + static_cast<uint64_t>(s);
      t.config.on_nonfinite = OnNonfinite::Stop;  // a diverged trial stops early
      t.key += " seed=" + std::to_string(t.config.seed);
      t.config.name = spec.name + ": " + t.key;
      validate_run_config(t.config);  // combinations too (scaling=delayed with rowwise, ...)
      out.push_back(std::move(t));
    }
    size_t k = spec.axes.size();
    while (k > 0) {
      --k;
      if (++idx[k] < spec.axes[k].values.size()) break;
      idx[k] = 0;
      if (k == 0) return out;
    }
  }
}

std::string sweep_json(const SweepSpec& spec) {
  json j;
  j["name"] = spec.name;
  j["seeds"] = spec.seeds;
  j["base"] = json::parse(run_config_json(spec.base));
  j["axes"] = json::array();
  for (const auto& a : spec.axes) j["axes"].push_back({{"key", a.key}, {"values", a.values}});
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

size_t sweep_trial_of_run(const std::vector<SweepTrial>& trials, const std::string& run_name) {
  for (size_t i = 0; i < trials.size(); ++i)
    if (trials[i].config.name == run_name) return i;
  // "NAME #k", k >= 2: a trial run again (distinct_run_name()).
  const size_t hash = run_name.rfind(" #");
  if (hash == std::string::npos || hash + 2 >= run_name.size()) return trials.size();
  const std::string digits = run_name.substr(hash + 2);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      digits[0] == '0' || (digits.size() == 1 && digits[0] == '1'))
    return trials.size();
  const std::string base = run_name.substr(0, hash);
  size_t cut = trials.size(), cuts = 0;
  for (size_t i = 0; i < trials.size(); ++i) {
    const std::string& name = trials[i].config.name;
    if (name == base) return i;
    // The name cut to make room for the suffix: the one trial whose name it begins.
    if (name.size() > base.size() && name.compare(0, base.size(), base) == 0) {
      cut = i;
      ++cuts;
    }
  }
  return cuts == 1 && run_name.size() >= kMaxRunNameLength ? cut : trials.size();
}

std::string stored_grid_name(int64_t sweep_id, const std::string& db_path) {
  return "sweep " + std::to_string(sweep_id) + "'s stored grid (in " + db_path + ")";
}

SweepSpec sweep_from_json(const std::string& text, const std::string& what) {
  // Every problem in words, naming the field: "a stored sweep's grid is unreadable: field
  // 'axes[0].values[1]' is a number, not text".
  SweepSpec s;
  check_json_nesting(text, what);
  try {
    namespace jf = json_fields;
    const json j = jf::parse(text);
    s.name = jf::text(j, "name");
    // A whole number within int's range (a fraction or 1e25 would not convert).
    const json& seeds = jf::field(j, "seeds");
    const bool whole = seeds.is_number_unsigned() ? seeds.get<uint64_t>() <= INT_MAX
                       : seeds.is_number_integer()
                           ? seeds.get<int64_t>() >= INT_MIN && seeds.get<int64_t>() <= INT_MAX
                           : false;
    if (!whole) {
      throw std::invalid_argument("its seeds (" +
                                  (seeds.is_number() ? seeds.dump() : jf::kind_of(seeds)) +
                                  ") are not a whole number of trials");
    }
    s.seeds = seeds.get<int>();
    const json& base = jf::field(j, "base");
    if (!base.is_object())
      throw std::invalid_argument("field 'base' is " + jf::kind_of(base) + ", not a config");
    try {
      s.base = parse_run_config(base.dump());
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("its base ") + e.what());
    }
    const json& axes = jf::items(j, "axes");
    for (size_t i = 0; i < axes.size(); ++i) {
      const std::string at = "axes[" + std::to_string(i) + "]";
      SweepAxis a;
      a.key = jf::text(axes[i], "key", at);
      const json& values = jf::items(axes[i], "values", at);
      for (size_t k = 0; k < values.size(); ++k) {
        if (!values[k].is_string()) {
          throw std::invalid_argument("field '" + at + ".values[" + std::to_string(k) + "]' is " +
                                      jf::kind_of(values[k]) + ", not text");
        }
        a.values.push_back(values[k].get<std::string>());
      }
      s.axes.push_back(std::move(a));
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(what + " is unreadable: " + e.what());
  } catch (const json::exception&) {  // not expected: every value is checked before it is read
    throw std::invalid_argument(what + " is unreadable: a value in it is not what it should be");
  }
  return s;
}

}  // namespace fp8wb
