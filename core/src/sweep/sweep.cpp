#include "fp8wb/core/sweep/sweep.h"

#include "fp8wb/core/train/run_start.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/sweep/final_loss.h"
#include "fp8wb/core/train/trainer.h"

namespace fp8wb {

double sweep_metric(const SweepPoint& p, SweepMetric m) {
  switch (m) {
    case SweepMetric::FinalLoss: return p.final_loss;
    case SweepMetric::LossGap: return p.loss_gap;
    case SweepMetric::Spike: return p.spike;
    case SweepMetric::SaturatedPct: return p.saturated_pct;
    case SweepMetric::UnderflowPct: return p.underflow_pct;
    case SweepMetric::Diverged: return static_cast<double>(p.diverged);
  }
  throw std::invalid_argument("unknown sweep metric " + std::to_string(static_cast<int>(m)));
}

std::vector<SweepPoint> sweep_points(const RunStore& store, int64_t sweep_id) {
  const auto info = store.sweep(sweep_id);
  if (!info) throw StoreError("no sweep " + std::to_string(sweep_id) + " in " + store.path());
  const SweepSpec spec = sweep_from_json(info->grid_json, stored_grid_name(sweep_id, store.path()));
  const std::vector<SweepTrial> trials = expand_sweep(spec);
  std::map<std::vector<std::string>, SweepPoint> points;
  std::map<std::vector<std::string>, int> counted, gap_counted;
  for (const RunInfo& r : store.runs()) {
    if (r.parent_sweep != sweep_id) continue;
    // A trial run again after an interruption is "NAME #2" (SweepRunner::resume()).
    const size_t trial = sweep_trial_of_run(trials, r.name);
    if (trial == trials.size()) continue;
    if (r.status != RunStatus::Finished && r.status != RunStatus::Diverged)
      continue;  // only complete trials
    SweepPoint& p = points[trials[trial].values];
    p.values = trials[trial].values;
    p.trials = spec.seeds;
    p.runs++;
    p.run_ids.push_back(r.id);
    if (r.status == RunStatus::Finished) p.finished++;
    if (r.status == RunStatus::Diverged) p.diverged++;
    double sat = 0, under = 0;
    int64_t n = 0;
    for (const TensorMetrics& t : store.tensor_stats(r.id)) {
      sat += saturated_pct(t.raw);
      under += underflow_pct(t.raw);
      ++n;
    }
    const FinalLoss f = final_loss(store, r);  // NaN for a diverged run
    SweepTrialFigures tf;
    tf.run_id = r.id;
    tf.diverged = r.status == RunStatus::Diverged;
    tf.final_loss = f.loss;
    const std::vector<SeriesPoint> ref_loss = store.series(r.id, "ref_loss");
    tf.spike = loss_spike(store.series(r.id, "loss"), ref_loss);
    tf.reference = reference_trouble(ref_loss);
    tf.loss_gap = f.gap;
    if (tf.spike.spiked()) p.spiked++;
    if (tf.reference.troubled()) p.reference_troubled++;
    if (std::isfinite(tf.spike.excess) && !(tf.spike.excess <= p.spike)) p.spike = tf.spike.excess;
    if (const double fr = tf.spike.fraction(); std::isfinite(fr) && !(fr <= p.spike_fraction))
      p.spike_fraction = fr;
    // The seeds' spread: NaN once one has no final loss.
    const bool first = p.trial_figures.empty();
    p.final_loss_min = first                ? f.loss
                       : std::isnan(f.loss) ? NAN
                                            : std::min(p.final_loss_min, f.loss);
    p.final_loss_max = first                ? f.loss
                       : std::isnan(f.loss) ? NAN
                                            : std::max(p.final_loss_max, f.loss);
    // The gap: over the runs whose reference held (a gap against a reference that blew
    // up is no comparison), NaN where none did.
    if (f.ref_broken) {
      p.gap_ref_broken++;
    } else {
      const bool first_gap = gap_counted[p.values] == 0;
      p.loss_gap_min = first_gap           ? f.gap
                       : std::isnan(f.gap) ? NAN
                                           : std::min(p.loss_gap_min, f.gap);
      p.loss_gap_max = first_gap           ? f.gap
                       : std::isnan(f.gap) ? NAN
                                           : std::max(p.loss_gap_max, f.gap);
      const int g = ++gap_counted[p.values];
      p.loss_gap = g == 1 ? f.gap : p.loss_gap + (f.gap - p.loss_gap) / g;
    }
    if (gap_counted[p.values] == 0) p.loss_gap = NAN;  // every reference broke down
    p.trial_figures.push_back(tf);
    // Means over the seeds, accumulated.
    const int k = ++counted[p.values];
    auto acc = [k](double& m, double v) { m += (v - m) / k; };
    acc(p.final_loss, f.loss);
    acc(p.saturated_pct, n ? sat / static_cast<double>(n) : 0);
    acc(p.underflow_pct, n ? under / static_cast<double>(n) : 0);
  }
  std::vector<SweepPoint> out;
  for (auto& [v, p] : points) out.push_back(std::move(p));
  // In the grid's own order (1, 16, 128), not the strings' (1, 128, 16).
  auto rank = [&spec](const SweepPoint& p) {
    std::vector<size_t> r;
    for (size_t k = 0; k < p.values.size(); ++k) {
      const auto& vs = spec.axes[k].values;
      r.push_back(static_cast<size_t>(std::find(vs.begin(), vs.end(), p.values[k]) - vs.begin()));
    }
    return r;
  };
  std::sort(out.begin(), out.end(),
            [&](const SweepPoint& a, const SweepPoint& b) { return rank(a) < rank(b); });
  return out;
}

SweepCounts sweep_counts(const SweepSpec& spec, const std::vector<SweepPoint>& points) {
  SweepCounts c;
  c.trials = static_cast<size_t>(std::max(1, spec.seeds));
  for (const SweepAxis& a : spec.axes) c.trials *= a.values.size();
  for (const SweepPoint& p : points) {
    c.finished += static_cast<size_t>(p.finished);
    c.diverged += static_cast<size_t>(p.diverged);
    c.spiked += static_cast<size_t>(p.spiked);
  }
  return c;
}

SweepVerdict sweep_verdict(const std::vector<SweepPoint>& points) {
  SweepVerdict v;
  for (const SweepPoint& p : points) {
    v.reference_troubled += p.reference_troubled;
    for (const SweepTrialFigures& t : p.trial_figures) {
      if (t.reference.troubled() && v.troubled_run == 0) {
        v.troubled_run = t.run_id;
        v.trouble = t.reference;
      }
    }
  }
  // The finished points (every trial finished, none diverged), those with a spiked
  // trial apart.
  std::vector<const SweepPoint*> clean, spiked;
  int broken_runs = 0;
  v.one_seed = true;
  for (const SweepPoint& p : points) {
    if (p.trials <= 0 || p.finished < p.trials || !std::isfinite(p.final_loss)) continue;
    (p.spiked > 0 ? spiked : clean).push_back(&p);
    v.judged_runs += p.runs;
    broken_runs += p.reference_troubled;
    if (p.runs > 1) v.one_seed = false;
  }
  const bool all_flagged = clean.empty();
  std::vector<const SweepPoint*>& pool = all_flagged ? spiked : clean;
  if (pool.empty()) {
    v.one_seed = false;
    return v;
  }
  std::stable_sort(pool.begin(), pool.end(), [](const SweepPoint* a, const SweepPoint* b) {
    return a->final_loss < b->final_loss;
  });
  v.lowest = pool.front();
  const double lowest = v.lowest->final_loss;
  auto spread = [](const SweepPoint* p) {
    const double s = p->final_loss_spread();
    return p->runs > 1 && std::isfinite(s) ? s : 0.0;
  };
  // The noise: a fraction of the lowest, or the seeds' spread of the lowest where larger;
  // each other point is within it, or within its own seeds' spread, of the lowest.
  v.noise =
      std::max((v.one_seed ? kSweepOneSeedNoiseFraction : kSweepNoiseFraction) * std::abs(lowest),
               spread(v.lowest));
  for (const SweepPoint* p : pool) {
    if (p->final_loss - lowest <= std::max(v.noise, spread(p)))
      v.tied.push_back(p);
    else if (!v.next)
      v.next = p;
  }
  // Spiked points by their spike, the mildest first (a NaN spike last).
  auto milder = [](const SweepPoint* a, const SweepPoint* b) {
    const double fa = std::isfinite(a->spike_fraction) ? a->spike_fraction : INFINITY;
    const double fb = std::isfinite(b->spike_fraction) ? b->spike_fraction : INFINITY;
    return fa < fb;
  };
  if (v.judged_runs > 0 && broken_runs >= v.judged_runs) {
    // Nothing was measured against a reference that held: no spike past the break, no gap.
    // The lowest final loss is named, as no more than that.
    std::vector<const SweepPoint*> all = clean;
    all.insert(all.end(), spiked.begin(), spiked.end());
    v.lowest = *std::min_element(all.begin(), all.end(), [](const auto* a, const auto* b) {
      return a->final_loss < b->final_loss;
    });
    v.kind = SweepVerdict::Kind::ReferencesBroken;
  } else if (all_flagged) {
    v.kind = SweepVerdict::Kind::AllFlagged;
    const SweepPoint* mildest = *std::min_element(pool.begin(), pool.end(), milder);
    if (mildest != v.lowest && milder(mildest, v.lowest)) v.mildest = mildest;
  } else {
    v.kind = v.tied.size() > 1 ? SweepVerdict::Kind::WithinNoise : SweepVerdict::Kind::Best;
    for (const SweepPoint* p : spiked)
      if (p->final_loss < lowest) v.passed_over.push_back(p);
    std::stable_sort(
        v.passed_over.begin(), v.passed_over.end(),
        [](const SweepPoint* a, const SweepPoint* b) { return a->final_loss < b->final_loss; });
    std::stable_sort(v.passed_over.begin(), v.passed_over.end(), milder);
  }
  return v;
}

namespace {

std::string figure(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string figure_g(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// "final loss 0.3512" and, with several seeds, " (seeds 0.3490 to 0.3534)".
std::string loss_of(const SweepPoint& p) {
  std::string s = "final loss " + figure(p.final_loss);
  if (p.runs > 1 && std::isfinite(p.final_loss_spread()))
    s += " (seeds " + figure(p.final_loss_min) + " to " + figure(p.final_loss_max) + ")";
  return s;
}

// The largest spike of a point's runs: "37.1 over the reference's 23.0 at step 72 (run 7)".
std::string spike_of(const SweepPoint& p) {
  const SweepTrialFigures* worst = nullptr;
  for (const SweepTrialFigures& t : p.trial_figures)
    if (t.spike.spiked() && (!worst || t.spike.fraction() > worst->spike.fraction())) worst = &t;
  if (!worst) return "spiked";
  return figure_g(worst->spike.excess) + " over the reference's " + figure_g(worst->spike.ref) +
         " (+" + figure(100 * worst->spike.fraction(), 0) + "%) at step " +
         std::to_string(worst->spike.step) + " (run " + std::to_string(worst->run_id) + ")";
}

// "; note: the high-precision reference itself blew up in 2 runs (run 7: ...): their loss
// gaps are left out of the mean gap, their spikes measured only before it". A spike of the
// FP8 loss while the reference held is never dismissed for it.
std::string reference_note(const SweepVerdict& v) {
  if (v.reference_troubled <= 0) return {};
  const ReferenceTrouble& t = v.trouble;
  std::string s = "; note: the high-precision reference itself ";
  s += t.diverged ? "diverged" : "blew up";
  s += " in " + std::to_string(v.reference_troubled) +
       (v.reference_troubled == 1 ? " run" : " runs") + " (run " + std::to_string(v.troubled_run);
  if (t.diverged)
    s += ": a loss that is not finite at step " + std::to_string(t.diverged_step);
  else
    s += ": up " + figure_g(t.rise) + " from its lowest " + figure_g(t.low) + " at step " +
         std::to_string(t.step);
  return s + "): " + (v.reference_troubled == 1 ? "its loss gap is" : "their loss gaps are") +
         " left out of the mean gap, " +
         (v.reference_troubled == 1 ? "its spike" : "their spikes") + " measured only before it";
}

}  // namespace

std::string sweep_verdict_text(const SweepVerdict& v,
                               const std::function<std::string(const SweepPoint&)>& label) {
  using Kind = SweepVerdict::Kind;
  std::string s;
  switch (v.kind) {
    case Kind::None: return "no best yet: no grid point has finished all its trials";
    case Kind::Best:
      s = "best: " + label(*v.lowest) + ", " + loss_of(*v.lowest);
      if (v.next) {
        s += "; " +
             figure(
                 100 * (v.next->final_loss - v.lowest->final_loss) / std::abs(v.lowest->final_loss),
                 1) +
             "% below the next, " + label(*v.next) + " (" + figure(v.next->final_loss) + ")";
      }
      if (v.one_seed) s += " (one seed per point: beyond 5%, the margin assumed for its noise)";
      break;
    case Kind::WithinNoise: {
      s = "no clear best: " + std::to_string(v.tied.size()) + " settings are within the noise (" +
          figure_g(v.noise) +
          (v.one_seed ? ", 5% of the lowest: one seed per point measures no noise; more seeds "
                        "tell"
                      : "") +
          ") of the lowest final loss: ";
      constexpr size_t kNamed = 5;
      for (size_t i = 0; i < v.tied.size() && i < kNamed; ++i)
        s += (i ? ", " : "") + label(*v.tied[i]) + " (" + figure(v.tied[i]->final_loss) + ")";
      if (v.tied.size() > kNamed) s += " and " + std::to_string(v.tied.size() - kNamed) + " more";
      break;
    }
    case Kind::ReferencesBroken: {
      const ReferenceTrouble& t = v.trouble;
      s = "no clear best: the high-precision reference itself " +
          std::string(t.diverged ? "diverged" : "blew up") + " in all " +
          std::to_string(v.judged_runs) + (v.judged_runs == 1 ? " run" : " runs") + " (run " +
          std::to_string(v.troubled_run) +
          (t.diverged ? ": a loss that is not finite at step " + std::to_string(t.diverged_step)
                      : ": up " + figure_g(t.rise) + " from its lowest " + figure_g(t.low) +
                            " at step " + std::to_string(t.step)) +
          "), so no spike past its break nor any loss gap could be measured against it; the "
          "lowest final loss, " +
          label(*v.lowest) + " (" + loss_of(*v.lowest) + "), is no more than that";
      if (v.one_seed) s += ", from one seed per point";
      return s;
    }
    case Kind::AllFlagged:
      s = "no best: every finished grid point has a trial whose loss spiked; the lowest, " +
          label(*v.lowest) + " (" + loss_of(*v.lowest) + "), spiked " + spike_of(*v.lowest);
      if (v.mildest)
        s += "; the mildest spike: " + label(*v.mildest) + " (" + loss_of(*v.mildest) +
             "), spiked " + spike_of(*v.mildest);
      return s + reference_note(v);
  }
  // Lower final losses passed over: their loss spiked.
  constexpr size_t kNamed = 3;
  for (size_t i = 0; i < v.passed_over.size() && i < kNamed; ++i) {
    const SweepPoint& p = *v.passed_over[i];
    s += (i ? "; " : "; passed over as their loss spiked (the mildest spike first): ") + label(p) +
         " (final loss " + figure(p.final_loss) + ", spiked " + spike_of(p) + ")";
  }
  if (v.passed_over.size() > kNamed)
    s += " and " + std::to_string(v.passed_over.size() - kNamed) + " more";
  return s + reference_note(v);
}

struct SweepRunner::Active {
  std::mutex mutex;
  std::set<Trainer*> trainers;
};

SweepRunner::SweepRunner(RunStore& store, int parallel)
    : store_(store), parallel_(parallel), active_(std::make_shared<Active>()) {}

void check_trial_devices(const std::vector<SweepTrial>& trials) {
  for (const SweepTrial& t : trials) {
    if (t.config.device.rfind("cuda", 0) != 0) continue;
    try {
      Trainer::resolve_device("cuda");
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("trial " + t.key + ": " + e.what());
    }
    return;
  }
}

SweepRunner::SweepRunner(SweepSpec spec, RunStore& store, int parallel)
    : SweepRunner(store, parallel) {
  spec_ = std::move(spec);
  trials_ = expand_sweep(spec_);  // throws before anything is stored
  check_trial_devices(trials_);
  done_.assign(trials_.size(), 0);
  sweep_id_ = store_.create_sweep(spec_.name, sweep_json(spec_));
}

std::unique_ptr<SweepRunner> SweepRunner::resume(RunStore& store, int64_t sweep_id, int parallel) {
  const auto info = store.sweep(sweep_id);
  if (!info) throw StoreError("no sweep " + std::to_string(sweep_id) + " in " + store.path());
  auto r = std::unique_ptr<SweepRunner>(new SweepRunner(store, parallel));
  r->spec_ = sweep_from_json(info->grid_json, stored_grid_name(sweep_id, store.path()));
  r->trials_ = expand_sweep(r->spec_);
  r->done_.assign(r->trials_.size(), 0);
  r->sweep_id_ = sweep_id;
  auto complete = [](RunStatus s) { return s == RunStatus::Finished || s == RunStatus::Diverged; };
  std::set<std::string> taken;  // the names of the sweep's runs
  for (const RunInfo& run : store.runs()) {
    if (run.parent_sweep != sweep_id) continue;
    taken.insert(run.name);
    // A finished trial stays finished even if a later, interrupted attempt exists.
    const size_t i = sweep_trial_of_run(r->trials_, run.name);
    if (i < r->trials_.size() && !r->done_[i] && complete(run.status)) {
      r->done_[i] = 1;
      r->skipped_++;
    }
  }
  std::vector<SweepTrial> pending;  // checked before the sweep is marked running again
  for (size_t i = 0; i < r->trials_.size(); ++i) {
    if (r->done_[i]) continue;
    // An interrupted trial's run stays in the list: the new attempt is "NAME #2", "NAME #3",
    // ..., never a second run of the same name (sweep_trial_of_run() reads either).
    std::string& name = r->trials_[i].config.name;
    const std::string trial_name = name;
    for (int k = 2; taken.count(name); ++k) {
      const std::string suffix = " #" + std::to_string(k);
      name = trial_name.substr(0, std::min(trial_name.size(), kMaxRunNameLength - suffix.size())) +
             suffix;
    }
    taken.insert(name);
    pending.push_back(r->trials_[i]);
  }
  check_trial_devices(pending);
  store.set_sweep_status(sweep_id, SweepStatus::Running);
  return r;
}

SweepRunner::~SweepRunner() {
  stop();
}

void SweepRunner::stop() {
  stop_ = true;
  const std::lock_guard<std::mutex> lock(active_->mutex);
  for (Trainer* t : active_->trainers) t->stop();
}

SweepRunner::Plan SweepRunner::plan() const {
  const BackendInfo b = probe_backend();
  Plan p;
  p.cuda_devices = b.cuda_devices;
  p.cuda = spec_.base.device.rfind("cuda", 0) == 0 && b.cuda_devices > 0;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  int workers = parallel_ > 0
                    ? parallel_
                    : (p.cuda ? b.cuda_devices : static_cast<int>(std::max(1u, cores / 2)));
  size_t remaining = 0;
  for (uint8_t d : done_) remaining += d ? 0 : 1;
  workers = std::max(1, std::min<int>(workers, static_cast<int>(std::max<size_t>(1, remaining))));
  // Each trial fits in memory (validate_run_config); side by side they must fit together.
  double biggest = 0;
  for (size_t i = 0; i < trials_.size(); ++i) {
    if (!done_[i]) biggest = std::max(biggest, estimate_run_memory(trials_[i].config).total);
  }
  if (!p.cuda && biggest > 0) {
    const double fit = static_cast<double>(run_memory_limit()) / biggest;
    workers = std::max(1, std::min(workers, static_cast<int>(std::min(fit, 1e6))));
  }
  // Every trial's compute threads together stay within the BLAS's limit (OpenBLAS crashes
  // past its thread table: --parallel 128 on 2 cores did); the trials beyond it wait their
  // turn.
  p.blas_limit = blas_thread_limit();
  if (p.blas_limit > 0) {
    const int per = !p.cuda && threads_per_trial_ > 0 ? threads_per_trial_ : 1;
    const int most = std::max(1, p.blas_limit / per);
    if (workers > most) {
      workers = most;
      p.blas_capped = true;
    }
  }
  p.side_by_side = workers;
  // CPU: the cores divided among the trials that run side by side (within the limit).
  if (!p.cuda) {
    p.threads = threads_per_trial_ > 0 ? threads_per_trial_
                                       : std::max(1, static_cast<int>(cores) / workers);
    if (threads_per_trial_ <= 0 && p.blas_limit > 0)
      p.threads = std::max(1, std::min(p.threads, p.blas_limit / workers));
  }
  return p;
}

void SweepRunner::run(std::function<void(size_t, RunStatus)> on_trial) {
  const Plan p = plan();
  const bool cuda = p.cuda;
  const int workers = p.side_by_side;
  const int threads = p.threads;
  const int cuda_devices = p.cuda_devices;
  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::string error;
  auto worker = [&](int w) {
    for (;;) {
      const size_t i = next++;
      if (i >= trials_.size() || stop_) return;
      if (done_[i]) continue;
      RunConfig cfg = trials_[i].config;
      if (cuda) cfg.device = "cuda:" + std::to_string(w % cuda_devices);
      try {
        RunStartOptions how;
        how.kind = RunKind::SweepTrial;
        how.sweep_id = sweep_id_;
        StartedRun started = start_run(store_, cfg, how);
        Trainer& t = *started.trainer;
        t.setComputeThreads(threads);
        {
          const std::lock_guard<std::mutex> lock(active_->mutex);
          if (stop_) return;
          active_->trainers.insert(&t);
        }
        // Out of the active set before the trainer goes, however the trial ends: stop()
        // must never reach a destroyed trainer.
        struct Leave {
          Active& a;
          Trainer* t;
          ~Leave() {
            const std::lock_guard<std::mutex> lock(a.mutex);
            a.trainers.erase(t);
          }
        } leave{*active_, &t};
        t.run();
        store_.flush();
        done_[i] = t.status() == RunStatus::Finished || t.status() == RunStatus::Diverged;
        if (on_trial) on_trial(i, t.status());
      } catch (const std::exception& e) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (error.empty()) error = trials_[i].key + ": " + e.what();
        stop_ = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) pool.emplace_back(worker, w);
  for (auto& t : pool) t.join();
  const bool all = std::all_of(done_.begin(), done_.end(), [](uint8_t d) { return d != 0; });
  store_.set_sweep_status(sweep_id_, all ? SweepStatus::Finished : SweepStatus::Stopped);
  if (!error.empty()) throw std::runtime_error(error);
}

}  // namespace fp8wb
