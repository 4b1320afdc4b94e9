// defines: FinalLoss, final_loss(), kFinalLossDefinition, LossSpike, loss_spike(),
// kSpikeFraction, kSpikeAbsolute, warmup_end(), kSpikeDefinition, ReferenceTrouble,
// reference_trouble(), RunSpeed, run_speed(), kSpeedDefinition: the one definition of a run's final
// loss and loss gap, for the Sweeps tab, the Runs tab, `fp8wb sweep` and `fp8wb runs show`/`list`,
// and of its tokens/s, for `fp8wb train`, `runs show`/`list` and the Overview tab. Plain interface,
// no torch.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fp8wb/core/median.h"
#include "fp8wb/core/store/run_store.h"

namespace fp8wb {

// What users read beside the figures.
inline constexpr std::string_view kFinalLossDefinition =
    "final loss = mean loss over the last 10% of a run's steps; loss gap = final loss minus "
    "the high-precision reference's mean loss over the same steps (marked where the reference "
    "diverged or blew up: then it is no comparison)";

// A run's final loss: the mean of its loss over the last 10% of the steps it ran (at least
// its last step), over the steps of that window that stored a finite loss. The reference's
// final loss is the mean of its loss over those same steps, and the gap is the difference
// of the two (NaN without a reference, or where the reference's loss is missing or not
// finite at one of them). Sums in double, in step order. `ref_broken` where the reference
// diverged or blew up (reference_trouble()).
struct FinalLoss {
  double loss = NAN;
  double ref_loss = NAN;
  double gap = NAN;        // loss - ref_loss
  int64_t from_step = -1;  // the window, both ends included
  int64_t to_step = -1;
  int64_t points = 0;  // stored steps averaged
  // The reference diverged or blew up (reference_trouble()): the gap is then no comparison
  // (a gap of -1.1 where the reference climbed to 110 is no "FP8 beats bf16"); every
  // display marks it, and a sweep leaves it out of its mean gap.
  bool ref_broken = false;
};

// From the stored series (each ordered by step, as RunStore::series() returns them).
FinalLoss final_loss(const std::vector<SeriesPoint>& loss,
                     const std::vector<SeriesPoint>& ref_loss);
// A stored run's. A diverged run has none: every figure NaN.
FinalLoss final_loss(const RunStore& store, const RunInfo& run);

// The warm-up a spike and a reference's blow-up are not looked for in: the first
// kWarmupSteps steps or the first 10% of the run, whichever is longer (never more than half
// the run). Both models bump there alike (the learning rate and the scales settle), so an
// excess there says little of FP8.
inline constexpr int64_t kWarmupSteps = 20;
inline constexpr double kWarmupFraction = 0.1;
// The first step after the warm-up of a run whose last step is `last_step`.
int64_t warmup_end(int64_t last_step);

// A run's loss spike: the largest excess of its loss over the high-precision reference's
// loss at the same step, over the steps after the warm-up where both are finite (NaN
// without a reference). The run "spiked" where that excess passed both kSpikeFraction of
// the reference's loss there and kSpikeAbsolute: large against the reference's own level
// and large in absolute terms, so a rise of 0.2 over a loss of 0.34 is no spike while a
// loss of 6.2 where the reference had 2.2 is. A diverged or spiked run is flagged, and a
// sweep never calls a flagged point its best while an unflagged one is there (sweep.h,
// sweep_verdict()). A spike is measured only over the steps before the reference itself
// broke (reference_trouble(): blew up or diverged): past that the reference is no yardstick,
// and a trial whose loss stays below a reference that exploded is no spike; the reference's
// break is said instead. An FP8-only spike while the reference held is never dismissed.
inline constexpr double kSpikeFraction = 0.5;
inline constexpr double kSpikeAbsolute = 0.5;
inline constexpr std::string_view kSpikeDefinition =
    "loss spike = the largest excess of a run's loss over the reference's loss at the same "
    "step after the warm-up (the first 20 steps or 10% of the run); a run spiked where that "
    "excess passed both 50% of the reference's loss there and 0.5 (measured only before the "
    "reference's own climb to a blow-up, or its divergence, began)";
struct LossSpike {
  double excess = NAN;  // loss - ref_loss at `step`
  double ref = NAN;     // the reference's loss at `step`
  int64_t step = -1;
  // The step from which the reference broke (ReferenceTrouble::broke_step): steps from it on
  // were not measured. -1 where it held.
  int64_t ref_broke_step = -1;
  // excess / ref at the step of the largest excess
  double fraction() const { return ref > 0 ? excess / ref : NAN; }
  bool spiked() const {
    return std::isfinite(excess) && excess > kSpikeFraction * ref && excess > kSpikeAbsolute;
  }
};
LossSpike loss_spike(const std::vector<SeriesPoint>& loss,
                     const std::vector<SeriesPoint>& ref_loss);
// A stored run's (its "loss" and "ref_loss" series), diverged or not.
LossSpike loss_spike(const RunStore& store, int64_t run_id);

// Whether the high-precision reference itself broke down, so that the loss gap measured
// against it is no comparison: it diverged (a stored loss that is not finite) or blew up
// (after the warm-up, its loss rose over its own lowest loss before that step by more than
// all of the larger of: that lowest loss, the drop from its first loss to it, and
// kSpikeAbsolute: training undone, never the noise of a small loss nor the bump of the
// warm-up that both models share).
inline constexpr std::string_view kReferenceTroubleDefinition =
    "the reference blew up where, after the warm-up, its loss rose over its own lowest loss "
    "so far by more than that loss, more than the drop from its first loss to it, and more "
    "than 0.5; diverged where a loss is not finite";
struct ReferenceTrouble {
  bool diverged = false;  // a stored reference loss is not finite after a finite one
  int64_t diverged_step = -1;
  double rise = NAN;  // the largest rise over its lowest loss before the step
  double low = NAN;   // that lowest loss
  double first = NAN;
  int64_t step = -1;  // the step of the largest rise
  // The step from which it is no yardstick: its first non-finite loss, or where its climb
  // to its first blow-up began (the step of its lowest loss before the first rise that
  // passed the threshold), whichever came first (-1: it held).
  int64_t broke_step = -1;
  bool blew_up() const {
    return std::isfinite(rise) && rise > std::max({low, first - low, kSpikeAbsolute});
  }
  bool troubled() const { return diverged || blew_up(); }
};
ReferenceTrouble reference_trouble(const std::vector<SeriesPoint>& ref_loss);

inline constexpr std::string_view kSpeedDefinition =
    "tokens/s: of one model's step (the FP8 model's alone where a reference trains beside it), "
    "the median over the run's stored steps";

// A run's speed: the median of the tokens/s of its steps (steady, where the first step's
// warm-up and a last short step would move a mean or the last value; of an even count,
// the mean of the middle two), with how many steps gave a finite figure and the last one's.
struct RunSpeed {
  double median = NAN, last = NAN;
  size_t steps = 0;
};
// From the steps' tokens/s in step order; those not finite are left out.
RunSpeed run_speed(const std::vector<double>& tokens_per_s);
// A stored run's (its "tokens_per_s" series; `series` "wall_tokens_per_s": per wall-clock
// step of the whole run).
RunSpeed run_speed(const RunStore& store, int64_t run_id,
                   const std::string& series = "tokens_per_s");

}  // namespace fp8wb
