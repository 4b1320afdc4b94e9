#include "fp8wb/core/sweep/final_loss.h"

#include <algorithm>
#include <utility>

namespace fp8wb {

int64_t warmup_end(int64_t last_step) {
  const int64_t steps = last_step + 1;
  const auto tenth = static_cast<int64_t>(kWarmupFraction * static_cast<double>(steps));
  return std::min(std::max(kWarmupSteps, tenth), steps / 2);
}

FinalLoss final_loss(const std::vector<SeriesPoint>& loss,
                     const std::vector<SeriesPoint>& ref_loss) {
  FinalLoss f;
  if (loss.empty()) return f;
  const int64_t steps = loss.back().step + 1;  // steps 0 .. last
  const int64_t window = std::max<int64_t>(1, steps / 10);
  f.to_step = loss.back().step;
  f.from_step = steps - window;
  double sum = 0, ref_sum = 0;
  bool ref_ok = !ref_loss.empty();
  auto ref = ref_loss.begin();
  for (const SeriesPoint& p : loss) {
    if (p.step < f.from_step || !std::isfinite(p.value)) continue;
    sum += p.value;
    ++f.points;
    ref = std::lower_bound(ref, ref_loss.end(), p.step,
                           [](const SeriesPoint& r, int64_t step) { return r.step < step; });
    if (ref == ref_loss.end() || ref->step != p.step || !std::isfinite(ref->value))
      ref_ok = false;
    else
      ref_sum += ref->value;
  }
  if (f.points == 0) return f;
  const auto n = static_cast<double>(f.points);
  f.loss = sum / n;
  if (ref_ok) {
    f.ref_loss = ref_sum / n;
    f.gap = f.loss - f.ref_loss;
  }
  f.ref_broken = reference_trouble(ref_loss).troubled();
  return f;
}

FinalLoss final_loss(const RunStore& store, const RunInfo& run) {
  if (run.status == RunStatus::Diverged) return {};
  return final_loss(store.series(run.id, "loss"), store.series(run.id, "ref_loss"));
}

LossSpike loss_spike(const std::vector<SeriesPoint>& loss,
                     const std::vector<SeriesPoint>& ref_loss) {
  LossSpike s;
  if (loss.empty()) return s;
  const int64_t from = warmup_end(loss.back().step);
  // Against the reference only while it held: past its blow-up it is no yardstick.
  s.ref_broke_step = reference_trouble(ref_loss).broke_step;
  auto ref = ref_loss.begin();
  for (const SeriesPoint& p : loss) {
    if (s.ref_broke_step >= 0 && p.step >= s.ref_broke_step) break;
    if (p.step < from || !std::isfinite(p.value)) continue;
    ref = std::lower_bound(ref, ref_loss.end(), p.step,
                           [](const SeriesPoint& r, int64_t step) { return r.step < step; });
    if (ref == ref_loss.end()) break;
    if (ref->step != p.step || !std::isfinite(ref->value)) continue;
    const double excess = p.value - ref->value;
    if (!(excess <= s.excess)) {  // the first, or a larger one
      s.excess = excess;
      s.ref = ref->value;
      s.step = p.step;
    }
  }
  return s;
}

LossSpike loss_spike(const RunStore& store, int64_t run_id) {
  return loss_spike(store.series(run_id, "loss"), store.series(run_id, "ref_loss"));
}

ReferenceTrouble reference_trouble(const std::vector<SeriesPoint>& ref_loss) {
  ReferenceTrouble t;
  if (ref_loss.empty()) return t;
  const int64_t from = warmup_end(ref_loss.back().step);
  double low = NAN;
  int64_t low_step = -1;
  for (const SeriesPoint& p : ref_loss) {
    if (!std::isfinite(p.value)) {
      // A run without a reference stores none (NaN) from its first step: no reference,
      // not a diverged one.
      if (std::isnan(t.first)) continue;
      if (!t.diverged) t.diverged_step = p.step;
      if (t.broke_step < 0) t.broke_step = p.step;
      t.diverged = true;
      continue;
    }
    if (std::isnan(t.first)) t.first = p.value;
    if (std::isfinite(low) && p.step >= from) {
      const double rise = p.value - low;
      // The rise that passes the threshold by the most (a rise early, when little was
      // gained, weighs against the drop so far).
      const auto over = [&](double r, double l) {
        return r - std::max({l, t.first - l, kSpikeAbsolute});
      };
      // It broke where its climb to the first blow-up began: at its lowest loss before it.
      if (t.broke_step < 0 && over(rise, low) > 0) t.broke_step = low_step;
      if (std::isnan(t.rise) || over(rise, low) > over(t.rise, t.low)) {
        t.rise = rise;
        t.low = low;
        t.step = p.step;
      }
    }
    if (!(p.value >= low)) {
      low = p.value;
      low_step = p.step;
    }
  }
  return t;
}

RunSpeed run_speed(const std::vector<double>& tokens_per_s) {
  std::vector<double> v;
  for (double t : tokens_per_s)
    if (std::isfinite(t)) v.push_back(t);
  RunSpeed sp;
  sp.steps = v.size();
  if (v.empty()) return sp;
  sp.last = v.back();
  sp.median = median(std::move(v));
  return sp;
}

RunSpeed run_speed(const RunStore& store, int64_t run_id, const std::string& series) {
  std::vector<double> v;
  for (const SeriesPoint& p : store.series(run_id, series)) v.push_back(p.value);
  return run_speed(v);
}

}  // namespace fp8wb
