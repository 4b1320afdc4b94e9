// The recommendation of a checkpoint tensor's analysis (the simplest recipe within 1 dB of
// the best SQNR, without saturation, and why), and the figures its tables sort and print.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint_analysis_internal.h"
#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/core/median.h"
#include "fp8wb/kernels/format.h"

namespace fp8wb {
namespace {

// Simplest first: what a user should prefer when the figures are close.
int simplicity(ScalingKind k) {
  switch (k) {
    case ScalingKind::Tensorwise: return 0;
    case ScalingKind::Rowwise: return 1;
    case ScalingKind::Block128x128: return 2;
    case ScalingKind::Block1x128: return 3;
    case ScalingKind::MX: return 4;
    case ScalingKind::NVFP4: return 5;
  }
  return 9;
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(digits);
  s << v;
  return s.str();
}

// Four significant digits: 4.179, 3.735e-39 (an amax is no fixed-point figure).
std::string significant(double v) {
  std::ostringstream s;
  s.precision(4);
  s << v;
  return s.str();
}

// Scale formulas take an amax below 1e-12 as 1e-12 (docs/numerics.md).
constexpr double kAmaxFloor = 1e-12;

}  // namespace

namespace analysis_detail {

void recommend(TensorAnalysis& a, Format e4m3) {
  // Among the E4M3 recipes (the format of weights and activations: E4M3FN, or E4M3FNUZ on
  // AMD GPUs), the simplest one within 1 dB of the best SQNR, without saturation.
  // A recipe that turns every finite nonzero value into 0, or whose SQNR is NaN,
  // represents nothing of the tensor: it is never recommended.
  auto zeroes_all = [](const RecipeResult& r) {
    return r.underflow_pct >= 100.0 || std::isnan(r.sqnr_db);
  };
  const RecipeResult* best = nullptr;
  bool any_e4m3 = false;
  for (const auto& r : a.recipes) {
    if (r.recipe.format != e4m3) continue;
    any_e4m3 = true;
    if (zeroes_all(r)) continue;
    if (!best || r.sqnr_db > best->sqnr_db) best = &r;
  }
  if (!best) {
    if (!any_e4m3) return;
    const bool none_at_all = std::all_of(a.recipes.begin(), a.recipes.end(), zeroes_all);
    a.no_recipe = none_at_all ? "no FP8 recipe represents this tensor: every recipe, in every "
                                "format, turns its nonzero values into 0 (or gives NaN)"
                              : "no E4M3 recipe represents this tensor: every one turns its "
                                "nonzero values into 0 (or gives NaN)";
    std::ostringstream why;
    why << " (amax " << significant(a.amax);
    const double fmax = format_info(e4m3).max_finite;
    if (a.amax > 0 && a.amax < kAmaxFloor) {
      why << ": below 1e-12, which the scale formulas take as the least amax, so no scale is "
             "above "
          << significant(fmax / kAmaxFloor)
          << " (MX scales stop at 2^127) and every scaled value stays below FP8's smallest step";
    }
    why << ")";
    a.no_recipe += why.str();
    a.reason = a.no_recipe;
    return;
  }
  // Within 1 dB of the best, the recipes that turn the fewest of the values into 0 (an
  // SQNR carried by a few large values hides the small ones lost; shares within
  // kTiedZeroedPct of the fewest count as the fewest), then the simplest of them.
  auto candidate = [&](const RecipeResult& r) {
    return &r == best || (r.recipe.format == e4m3 && r.saturated_pct <= 0 && !zeroes_all(r) &&
                          r.sqnr_db >= best->sqnr_db - 1.0);
  };
  double least_zeroed = best->underflow_pct;
  for (const auto& r : a.recipes) {
    if (candidate(r)) least_zeroed = std::min(least_zeroed, r.underflow_pct);
  }
  auto few_zeroed = [&](const RecipeResult& r) {
    return r.underflow_pct <= least_zeroed + kTiedZeroedPct;
  };
  const RecipeResult* pick = nullptr;
  for (const auto& r : a.recipes) {
    if (!candidate(r) || !few_zeroed(r)) continue;
    if (!pick || simplicity(r.recipe.kind) < simplicity(pick->recipe.kind) ||
        (simplicity(r.recipe.kind) == simplicity(pick->recipe.kind) && r.sqnr_db > pick->sqnr_db))
      pick = &r;
  }
  a.recommended = pick->name;
  if (pick == best) {
    a.reason = "best SQNR of the " + std::string(format_info(e4m3).name) +
               " recipes: " + fixed(pick->sqnr_db, 1) + " dB, " +
               underflow_pct_text(pick->underflow_pct) + "% underflow";
  } else {
    const bool fewer = !few_zeroed(*best);
    const bool simpler = simplicity(pick->recipe.kind) < simplicity(best->recipe.kind);
    // The best of the recipes the pick is made among (the table's "highest SQNR" is of any
    // format): named as such, so that the two are not read as one figure.
    a.reason =
        "within 1 dB of the best " + std::string(format_info(e4m3).name) + " recipe (" +
        best->name + ", " + fixed(best->sqnr_db, 1) + " dB" +
        (fewer ? ", " + underflow_pct_text(best->underflow_pct) + "% underflow" : std::string()) +
        ")" + (fewer ? " and turns fewer values into 0" : "") +
        (simpler ? std::string(fewer ? "," : "") + " and simpler" : "") + ": " +
        fixed(pick->sqnr_db, 1) + " dB, " + underflow_pct_text(pick->underflow_pct) + "% underflow";
  }
  // Say why finer scaling wins when it does: the spread inside the tensor (unless the best,
  // named above, is tensorwise).
  if (pick->recipe.kind != ScalingKind::Tensorwise &&
      best->recipe.kind != ScalingKind::Tensorwise) {
    for (const auto& r : a.recipes) {
      if (r.recipe.format == e4m3 && r.recipe.kind == ScalingKind::Tensorwise) {
        // An SQNR carried by a few large values hides the small ones lost: said beside it,
        // where they are many (kNamedZeroedPct) or what it lost the pick by.
        const std::string lost = r.underflow_pct >= kNamedZeroedPct || !few_zeroed(r)
                                     ? " but turns " + underflow_pct_text(r.underflow_pct) +
                                           "% of the nonzero values into 0"
                                     : "";
        a.reason += "; one tensorwise scale gives " + fixed(r.sqnr_db, 1) + " dB" + lost +
                    " (amax " + significant(a.amax) + " against a dynamic range of " +
                    fixed(a.dynamic_range_bits, 1) + " bits" +
                    (a.amax < kAmaxFloor ? "; an amax below 1e-12 counts as 1e-12 in its scale, "
                                           "which leaves the values below FP8's smallest step"
                                         : "") +
                    ")";
      }
    }
  }
  // A pick that still turns values into 0 (a dynamic range wider than E4M3's): said, with
  // the recipe of any format that keeps the most of them (nearly all, at the best SQNR,
  // where one does), so that the high SQNR of the large values is not read as "all kept".
  if (pick->underflow_pct >= kNamedZeroedPct) {
    const RecipeResult* keeps = nullptr;
    auto nearly_all = [](const RecipeResult& r) { return r.underflow_pct < kNamedZeroedPct; };
    for (const auto& r : a.recipes) {
      if (r.saturated_pct > 0 || zeroes_all(r) ||
          r.underflow_pct > pick->underflow_pct - kNamedZeroedPct)
        continue;
      const bool better =
          !keeps || (nearly_all(r) && !nearly_all(*keeps)) ||
          (nearly_all(r) && nearly_all(*keeps) ? r.sqnr_db > keeps->sqnr_db
                                               : r.underflow_pct < keeps->underflow_pct);
      if (better) keeps = &r;
    }
    a.reason += "; " + pick->name + " still turns " + fixed(pick->underflow_pct, 3) +
                "% of the nonzero values into 0";
    a.reason += keeps ? "; " + keeps->name + " turns " + fixed(keeps->underflow_pct, 3) +
                            "% into 0, at " + fixed(keeps->sqnr_db, 1) + " dB"
                      : "; no recipe without saturation turns fewer into 0";
  }
}

}  // namespace analysis_detail

using analysis_detail::recommend;

std::string underflow_pct_text(double pct) {
  if (pct > 0 && pct < 0.001) {
    std::ostringstream s;
    s.precision(2);
    s << pct;
    return s.str();
  }
  return fixed(pct, 3);
}

double worst_first_key(const TensorAnalysis& a) {
  double best = -INFINITY;
  bool any = false;
  for (const auto& r : a.recipes) {
    if (std::isnan(r.sqnr_db)) continue;
    any = true;
    best = std::max(best, r.sqnr_db);
  }
  if (!any) return INFINITY;
  return best == INFINITY ? std::numeric_limits<double>::max() : best;
}

BlockSqnr median_block_sqnr(const RecipeResult& r) {
  std::vector<double> rel;
  rel.reserve(r.map_rel_error.size());
  for (float e : r.map_rel_error)
    if (!std::isnan(e)) rel.push_back(e);
  BlockSqnr b;
  b.blocks = rel.size();
  if (rel.empty()) return b;
  const double m = median(std::move(rel));
  b.median_db = m > 0 ? -20.0 * std::log10(m) : INFINITY;
  return b;
}

}  // namespace fp8wb
