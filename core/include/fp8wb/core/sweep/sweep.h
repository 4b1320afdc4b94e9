// defines: SweepAxis, SweepSpec, SweepTrial, SweepPoint, SweepMetric (and its name table),
// sweep_metric(), parse_grid(), expand_sweep(), SweepRunner, sweep_points(), SweepCounts,
// sweep_counts(), SweepVerdict, sweep_verdict(): a grid over
// config fields (typically margin x window), with seeds per point, run as child runs of a
// sweep in the run store; trials run in parallel (CPU cores divided among them, or one per
// GPU); a sweep reopened resumes without rerunning finished trials. Plain interface, no
// torch.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/final_loss.h"
#include "fp8wb/kernels/name_table.h"

namespace fp8wb {

struct SweepAxis {
  std::string key;
  std::vector<std::string> values;  // as typed: "0", "16", "most_recent"
  // Values parse_grid() dropped as numerically equal to one before them (1e-1 after 0.1):
  // {the spelling dropped, the value kept}. Not stored with the sweep.
  std::vector<std::pair<std::string, std::string>> merged;
};

struct SweepSpec {
  std::string name = "sweep";
  RunConfig base;
  std::vector<SweepAxis> axes;
  int seeds = 1;
};

// The most trials (grid points x seeds) a sweep may have.
constexpr uint64_t kMaxSweepTrials = 100000;

// "margin=0,1,2,4" -> {margin, [0, 1, 2, 4]}. Throws std::invalid_argument (also for a
// value given twice). Another spelling of a number already given ("lr=0.1,1e-1,0.10") is
// dropped, the first kept, and listed in `merged`.
SweepAxis parse_grid(const std::string& text);
// What parse_grid() dropped, for users: "grid 'lr': 1e-1 and 0.10 are the number 0.1
// again: dropped, so that its trials run once (as 0.1)", a line a value kept (`fp8wb
// sweep` and the Sweeps tab say them).
std::vector<std::string> merged_value_notes(const SweepAxis& axis);

struct SweepTrial {
  std::string key;  // "margin=0 window=16 seed=1": a trial's identity within its sweep
  std::vector<std::string> values;  // one per axis
  int seed_index = 0;
  RunConfig config;
};

// Every trial (grid points x seeds). Each value is checked against the base config
// before anything runs: a bad one throws std::invalid_argument naming the field.
std::vector<SweepTrial> expand_sweep(const SweepSpec& spec);
// A trial on a CUDA device needs one on this machine: else std::invalid_argument naming the
// trial and the problem (SweepRunner checks before it stores anything; trials run on
// cuda:0, cuda:1, ... in turn, whichever index they name).
void check_trial_devices(const std::vector<SweepTrial>& trials);
std::string sweep_json(const SweepSpec& spec);  // what the store keeps (base config + axes)
// The stored form read back; std::invalid_argument "<what> is unreadable: ..." naming the
// field and its problem in words.
SweepSpec sweep_from_json(const std::string& json,
                          const std::string& what = "a stored sweep's grid");
// "sweep 3's stored grid (in /path/runs.sqlite)": sweep_from_json()'s `what` for a stored one.
std::string stored_grid_name(int64_t sweep_id, const std::string& db_path);
// The trial a sweep's run is of, by the run's name: the trial's name, or, for a trial
// run again after an interruption (a resumed sweep), that name with " #2", " #3", ...
// (distinct_run_name(), run_start.h: the name cut to make room where it is long).
// trials.size() where the name is of none.
size_t sweep_trial_of_run(const std::vector<SweepTrial>& trials, const std::string& run_name);

// One trial's figures: its run's final loss and loss spike (final_loss.h).
struct SweepTrialFigures {
  int64_t run_id = 0;
  bool diverged = false;
  double final_loss = NAN;     // NaN if it diverged
  LossSpike spike;             // none without a reference
  ReferenceTrouble reference;  // whether the reference itself blew up or diverged
  double loss_gap = NAN;       // its final loss gap (NaN without a reference)
  // Diverged, or its loss spiked over the reference's: never the sweep's best while a
  // point without a flagged trial is there.
  bool flagged() const { return diverged || spike.spiked(); }
};

// A grid point's figures: the mean over its seeds' runs that have ended (finished or
// diverged).
struct SweepPoint {
  std::vector<std::string> values;  // one per axis
  int trials = 0;                   // the point's trials (one a seed), ended or not
  int runs = 0, finished = 0, diverged = 0;
  int spiked = 0;                                   // runs whose loss spiked (LossSpike::spiked())
  bool complete() const { return runs >= trials; }  // every trial has ended
  double final_loss = 0;  // final_loss() (final_loss.h) of each run; NaN if one diverged
  // The same for the gap, over the runs whose reference held (NaN without a reference, or
  // where every run's reference diverged or blew up: FinalLoss::ref_broken).
  double loss_gap = 0;
  int gap_ref_broken = 0;       // runs whose gap is left out of it, their reference broken
  double spike = NAN;           // the largest of its runs' loss spikes (NaN without a reference)
  double spike_fraction = NAN;  // the largest of its runs' spike / the reference's loss there
  int reference_troubled = 0;   // runs whose reference blew up or diverged (ReferenceTrouble)
  double saturated_pct = 0;     // mean over the runs' tensor statistics
  double underflow_pct = 0;
  // The lowest and highest final loss of its seeds' runs (equal with one seed; NaN if one
  // diverged): the spread across seeds.
  double final_loss_min = NAN, final_loss_max = NAN;
  double final_loss_spread() const { return final_loss_max - final_loss_min; }
  // A spread needs two runs: with one (the other seeds not ended), it is unknown, not 0.
  bool final_loss_spread_known() const { return runs > 1; }
  // The same for the loss gap (of the runs whose reference held): never only its mean
  // where the seeds differ.
  double loss_gap_min = NAN, loss_gap_max = NAN;
  double loss_gap_spread() const { return loss_gap_max - loss_gap_min; }
  bool loss_gap_spread_known() const { return runs - gap_ref_broken > 1; }
  std::vector<int64_t> run_ids;
  std::vector<SweepTrialFigures> trial_figures;  // one a run, in run_ids' order
};
// The figures a grid point is judged by.
enum class SweepMetric : uint8_t {
  FinalLoss,
  LossGap,
  Spike,  // the largest loss spike of its runs
  SaturatedPct,
  UnderflowPct,
  Diverged,  // diverged runs
};
struct SweepMetricEntry {
  SweepMetric value;
  std::string_view name;   // a key in `fp8wb sweep --json`
  std::string_view label;  // what users read beside a plot
};
inline constexpr SweepMetricEntry kSweepMetrics[] = {
    {SweepMetric::FinalLoss, "final_loss", "final loss"},
    {SweepMetric::LossGap, "loss_gap", "loss gap"},
    {SweepMetric::Spike, "spike", "loss spike"},
    {SweepMetric::SaturatedPct, "saturated_pct", "saturated %"},
    {SweepMetric::UnderflowPct, "underflow_pct", "underflow %"},
    {SweepMetric::Diverged, "diverged", "diverged runs"},
};
static_assert(names_cover_enum(kSweepMetrics, SweepMetric::Diverged));

inline std::string_view sweep_metric_name(SweepMetric m) {
  return table_name(kSweepMetrics, m);
}
inline std::optional<SweepMetric> parse_sweep_metric(std::string_view name) {
  return parse_table_name(kSweepMetrics, name);
}
// A grid point's figure (Diverged: how many of its runs diverged).
double sweep_metric(const SweepPoint& p, SweepMetric m);

// The figures of a stored sweep's grid points, from its child runs: a point whose trials
// have not ended yet (waiting, running, stopped) is missing or has fewer runs than trials.
std::vector<SweepPoint> sweep_points(const RunStore& store, int64_t sweep_id);

// How far a sweep has got, in trials (grid points x seeds).
struct SweepCounts {
  size_t trials = 0, finished = 0, diverged = 0, spiked = 0;  // spiked: runs
};
SweepCounts sweep_counts(const SweepSpec& spec, const std::vector<SweepPoint>& points);

// Within this fraction of the lowest final loss (or within the seeds' spread, where that
// is larger) final losses are called the same: no winner is crowned among them.
inline constexpr double kSweepNoiseFraction = 0.02;
// The same with one seed per point, where no seeds' spread measures the run-to-run noise:
// a wider margin, since one seed's final loss moves by more than 2% from run to run on a
// noisy task (docs/sweeps.md).
inline constexpr double kSweepOneSeedNoiseFraction = 0.05;

// The rule sweep_verdict() follows, as users read it (the Sweeps tab, `fp8wb sweep`).
inline constexpr std::string_view kSweepVerdictRule =
    "The best is the lowest final loss among grid points whose trials all finished, passing "
    "over points with a flagged trial (diverged, or its loss spiked: after the warm-up and "
    "before the reference's own climb to a blow-up (or its divergence) began, more than 50% and "
    "more than 0.5 over "
    "the reference's loss at the same step) while an unflagged one is there. Final losses "
    "within 2% of the lowest (5% with one seed per point, where the noise is not measured), "
    "or within the seeds' spread (highest minus lowest seed) where that is larger, are within "
    "the noise: then no best is named. Where the reference blew up or diverged in every "
    "trial, nothing was measured against it: no best is named either. A run whose reference "
    "broke has its spike measured only before the break; its loss gap is left out of the "
    "mean gap.";

// The rule in short, for a line beside the heatmap.
inline constexpr std::string_view kSweepVerdictRuleShort =
    "the lowest final loss of the finished points, passing over spiked or diverged ones; "
    "none where the lowest are within 2% (5% with one seed, or the seeds' spread) or every "
    "reference broke";

// What a sweep's figures say of its best setting (kSweepVerdictRule).
struct SweepVerdict {
  enum class Kind {
    None,         // no grid point has finished all its trials
    Best,         // `lowest` is the best, by more than the noise
    WithinNoise,  // `tied` (two or more, `lowest` first) are within the noise of each other
    AllFlagged,   // every finished point has a flagged trial: `lowest` of them, flagged
    // The reference blew up or diverged in every run of the finished points: no spike nor
    // gap could be measured past its break, so no best is named; `lowest` is the lowest
    // final loss, named as no more than that.
    ReferencesBroken,
  };
  Kind kind = Kind::None;
  const SweepPoint* lowest = nullptr;
  // The points within `noise` of the lowest final loss, the lowest first (Best: it alone).
  std::vector<const SweepPoint*> tied;
  // The next lowest after the tied ones, where there is one (Best: by how much it won).
  const SweepPoint* next = nullptr;
  double noise = NAN;  // the margin the tied are within
  // Every finished point has one seed: the noise is kSweepOneSeedNoiseFraction of the
  // lowest, not measured.
  bool one_seed = false;
  int judged_runs = 0;  // the runs of the finished points
  // Finished points with a spiked trial and a lower final loss than `lowest`, passed over,
  // ranked by their spike (spike_fraction), the mildest first.
  std::vector<const SweepPoint*> passed_over;
  // AllFlagged: the point with the mildest spike (spike_fraction), where not `lowest`.
  const SweepPoint* mildest = nullptr;
  // Runs (of every point) whose high-precision reference itself blew up or diverged: their
  // loss gaps are no comparison (left out of the mean gap); a spike of the FP8 loss over
  // the reference counts only before it broke (LossSpike::ref_broke_step). The first such
  // run's, for the text.
  int reference_troubled = 0;
  int64_t troubled_run = 0;
  ReferenceTrouble trouble;
};
// Its pointers are into `points`, which must outlive it.
SweepVerdict sweep_verdict(const std::vector<SweepPoint>& points);
SweepVerdict sweep_verdict(std::vector<SweepPoint>&&) = delete;
// The verdict in words, one line; `label` names a point ("margin=0 window=16").
std::string sweep_verdict_text(const SweepVerdict& v,
                               const std::function<std::string(const SweepPoint&)>& label);

class SweepRunner {
 public:
  // parallel <= 0: one trial per GPU with CUDA devices, else about one per 2 CPU cores.
  SweepRunner(SweepSpec spec, RunStore& store, int parallel = 0);
  // Resumes a stored sweep: trials that finished or diverged are not run again.
  static std::unique_ptr<SweepRunner> resume(RunStore& store, int64_t sweep_id, int parallel = 0);
  ~SweepRunner();

  int64_t sweepId() const { return sweep_id_; }
  const std::vector<SweepTrial>& trials() const { return trials_; }
  // Runs every trial still to run; returns when all are done or stop() was called.
  // on_trial(index, status) is called (from worker threads) as each trial ends.
  void run(std::function<void(size_t, RunStatus)> on_trial = {});
  void stop();
  // CPU threads each trial computes with (0, the default: the cores divided among the
  // trials side by side). Sums split over a different number of threads round
  // differently, so equal counts give runs that agree to the bit.
  void setThreadsPerTrial(int threads) { threads_per_trial_ = threads; }
  // How run() will run the trials still to run.
  struct Plan {
    int side_by_side = 1;  // trials at once (the rest wait their turn)
    int threads = 0;       // CPU threads a trial computes with (0: on a GPU)
    bool cuda = false;     // one trial per GPU, cuda:0, cuda:1, ... in turn
    int cuda_devices = 0;
    int blas_limit = 0;        // blas_thread_limit(): 0 where none is known
    bool blas_capped = false;  // fewer side by side than asked, for that limit
  };
  Plan plan() const;
  size_t skipped() const { return skipped_; }  // trials already done before this run

 private:
  SweepRunner(RunStore& store, int parallel);
  SweepSpec spec_;
  RunStore& store_;
  int parallel_;
  int threads_per_trial_ = 0;
  int64_t sweep_id_ = 0;
  std::vector<SweepTrial> trials_;
  std::vector<uint8_t> done_;  // one byte a trial: workers write their own entries
  size_t skipped_ = 0;
  std::atomic<bool> stop_{false};
  struct Active;
  std::shared_ptr<Active> active_;
};

}  // namespace fp8wb
