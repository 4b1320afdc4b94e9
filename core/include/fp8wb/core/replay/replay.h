// defines: ReplayInput, ReplayCellSetting, ReplayGrid, ReplayOptions, ReplayFigures,
// ReplayCell, ReplayResult, replay_amax(), replay_scales(), own_scales_check(): delayed
// scaling replayed from a run's recorded per-step amax under other margins, windows and
// amax algorithms, without training again. Plain C++, no torch.
//
// The scale a delayed-scaling recipe sets at a step is a function of the amax history and
// its margin, window and algorithm alone (docs/numerics.md, "Delayed scaling"), so the
// replay is exact for the amax trajectory the run had; what it assumes is that this
// trajectory does not depend on the setting (in real training a different scale changes
// the rounding, hence the gradients and later amaxes, a little).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8wb/core/metrics.h"
#include "fp8wb/kernels/delayed_scaling.h"

namespace fp8wb {

// A run's recorded amax, row per step: amax[i * tensors.size() + j] is tensor j at steps[i]
// (NaN where the tensor was not quantized that step: no update of its history).
struct ReplayInput {
  std::vector<AmaxTensor> tensors;
  std::vector<int64_t> steps;  // ascending
  std::vector<float> amax;

  size_t tensor_count() const { return tensors.size(); }
  size_t step_count() const { return steps.size(); }
  float at(size_t step_index, size_t tensor) const {
    return amax[step_index * tensors.size() + tensor];
  }
};

// How the run itself scaled: delayed with its margin, window and algorithm (and initial
// policy), or current scaling with its margin (the own-settings check reproduces either).
struct RunScalingSettings {
  bool delayed = true;
  DelayedScalingConfig config;  // margin also for current scaling
  // A watched run stores the scale it quantized with; the engine's runs store
  // stored_scale_of() it (below).
  bool scale_stored_as_is = false;
};

// One cell of the grid: a delayed-scaling recipe (the run's initial-scale policy).
struct ReplayCellSetting {
  int margin = 0;
  int window = 1;
  AmaxAlgo algo = AmaxAlgo::Max;
  bool operator==(const ReplayCellSetting& o) const {
    return margin == o.margin && window == o.window && algo == o.algo;
  }
};

struct ReplayGrid {
  std::vector<int> margins;
  std::vector<int> windows;
  std::vector<AmaxAlgo> algos;
  size_t cell_count() const { return margins.size() * windows.size() * algos.size(); }
};

// Grids over this many cells are refused (ReplayError).
inline constexpr size_t kMaxReplayCells = 10000;

struct ReplayError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// "margin=0,1,2" / "window=1,16" / "amax_algo=max,most_recent" into the grid's axis, each
// value read as a run config's field (its type, names and bounds); throws ReplayError naming
// the axis and the value. An axis given twice is refused.
void parse_replay_axis(const std::string& text, ReplayGrid& grid);

// A sampled step's stored statistics of one tensor, for the underflow and saturation
// estimates: the scale the run used and the exponent histogram of |x * scale|.
struct ReplaySample {
  int64_t step = 0;
  size_t tensor = 0;
  float scale = 0;  // as stored: the scale the run quantized with
  uint64_t hist[kHistBins] = {};
};

// A scale the run stored at a sampled step (what the own-settings check compares).
struct StoredScale {
  int64_t step = 0;
  size_t tensor = 0;
  float scale = 0;
};

struct ReplayOptions {
  RunScalingSettings run;             // the initial-scale policy comes from run.config
  std::vector<ReplaySample> samples;  // for the estimates; may be empty
  std::vector<StoredScale> stored;    // for the own-settings check; may be empty
  bool per_tensor_median = false;     // each tensor's own median headroom (costs a select)
};

// The figures of one recipe over a set of (step, tensor) pairs: the steps with a finite,
// positive amax count.
struct ReplayFigures {
  int64_t steps = 0;              // (step, tensor) pairs counted
  int64_t saturating_steps = 0;   // amax x scale rounds beyond the format's max
  double worst_over_binades = 0;  // max log2(amax x scale / max) over saturating steps
  // Median over the counted pairs of log2(max / (amax x scale)): how far below the
  // format's max the step's amax lands (negative where it saturates). NaN: none counted.
  double median_headroom_binades = 0;
  // The closest approach: min over the counted pairs of log2(max / (amax x scale)), the
  // growth of amax beyond what the replay saw that the setting would have taken without
  // saturating (negative where it saturates). NaN: none counted.
  double min_headroom_binades = 0;
  // At the sampled steps, estimated from the stored exponent histograms shifted by
  // log2(replayed scale / stored scale), elements log-uniform within a bin: % of the
  // finite nonzero elements that would underflow (|x s| below half the smallest subnormal)
  // and saturate (|x s| at or above the rounding threshold past the max). NaN: no samples.
  double est_underflow_pct = 0;
  double est_saturated_pct = 0;
  int64_t sampled = 0;  // samples behind the estimates
};

struct ReplayCell {
  ReplayCellSetting setting;
  ReplayFigures all;                   // every tensor together
  std::vector<ReplayFigures> tensors;  // per tensor (median only with per_tensor_median)
  int rank = 0;                        // 1 = best by the rule (ReplayResult::kRule)
  bool is_run_setting = false;         // the run's own delayed setting
};

// The own-settings check: the run's own recipe replayed and compared, bit for bit, with
// the scales stored at its sampled steps.
struct OwnScalesCheck {
  bool matches = true;
  int64_t compared = 0;  // sampled (step, tensor) scales compared
  int64_t first_step = -1;
  size_t first_tensor = 0;
  float stored = 0, replayed = 0;  // at the first difference
};

struct ReplayResult {
  // The room a cell must keep at its closest approach to be called safe: amax may then grow
  // 2^0.5 = 1.41x beyond anything the replayed run saw without saturating (a retrained run
  // does not repeat the recorded amaxes exactly).
  static constexpr double kSafeHeadroomBinades = 0.5;
  static constexpr const char* kRule =
      "cells with no saturating step and at least 0.5 binade of headroom at their closest "
      "approach to the format's max first, the smallest median headroom (most of the range "
      "used) first among them; then the other cells without saturation, the most headroom at "
      "their closest approach first; then the cells that saturate, fewest saturating steps "
      "first; ties: the smallest median headroom, then the grid's order";
  std::vector<ReplayCell> cells;  // in grid order (margin, then window, then algorithm)
  std::vector<size_t> ranking;    // cell indices, best first
  OwnScalesCheck own;             // valid when stored scales were given
};

// Replays every cell of the grid over the input. Throws ReplayError for an empty axis, a
// grid over kMaxReplayCells cells, a window or margin delayed scaling refuses, an input
// whose amax does not match its shape.
ReplayResult replay_amax(const ReplayInput& in, const ReplayGrid& grid, const ReplayOptions& opt);

// The scale one recipe would have used at every step for one tensor (NaN where the tensor
// was not quantized), as the engine computes it.
std::vector<float> replay_scales(const ReplayInput& in, size_t tensor, const ReplayCellSetting& s,
                                 InitialScale initial = InitialScale::One);
// The same for the run's own recipe (current scaling too).
std::vector<float> run_scales(const ReplayInput& in, size_t tensor, const RunScalingSettings& run);

// The stored form of a scale: the engine stores 1 / scale_inv with scale_inv = 1 / scale.
inline float stored_scale_of(float scale) {
  return scale != 0 ? 1.0f / (1.0f / scale) : 0.0f;
}

// Compares the run's own recipe, replayed, with the stored scales of the samples.
OwnScalesCheck own_scales_check(const ReplayInput& in, const RunScalingSettings& run,
                                const std::vector<StoredScale>& stored);

// The smallest fp32 value that the format's nearest-even encoding takes beyond its max.
float saturation_threshold(Format f);

// Where a cell (the best, with its figures) sits at an edge of the grid beyond which a
// setting could rank better under ReplayResult::kRule: its margin or window the smallest or
// largest of an axis given two values or more, in the direction that could help. A safe
// best (the least median headroom among safe cells): only a smaller margin or window (a
// larger one only adds headroom); a best that is not safe: only a larger one; no window
// edge for the most recent amax, which keeps no history. Nothing where neither could.
struct ReplayGridEdge {
  bool margin_low = false, margin_high = false, window_low = false, window_high = false;
  bool any() const { return margin_low || margin_high || window_low || window_high; }
  // "at the edge of the grid (margin 4, the largest given; window 1024, the largest
  // given): try beyond it"; empty where it is not at an edge.
  std::string text(const ReplayCellSetting& s) const;
  // The edges as names: "margin_max", "margin_min", "window_max", "window_min".
  std::vector<std::string> names() const;
};
ReplayGridEdge replay_grid_edge(const ReplayGrid& grid, const ReplayCellSetting& s,
                                const ReplayFigures& f);

}  // namespace fp8wb
