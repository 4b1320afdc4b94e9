// Delayed scaling replayed from a run's recorded amax (replay.h): per tensor, the amax_h of
// each (window, algorithm) once (a sliding maximum), then per margin the scales as
// DelayedScaler::update() sets them, the figures, and the ranking. The grid's axes and
// edges are in replay_grid.cpp.
#include "fp8wb/core/replay/replay.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/recipe.h"

namespace fp8wb {

namespace {

uint32_t bits_of(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u;
}

// One tensor's quantized steps: their amax and their place among the input's steps.
struct Track {
  std::vector<float> a;
  std::vector<uint32_t> pos;
};

Track track_of(const ReplayInput& in, size_t t) {
  Track k;
  const size_t n = in.step_count();
  k.a.reserve(n);
  k.pos.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const float v = in.at(i, t);
    if (std::isnan(v)) continue;  // not quantized at this step: its history did not move
    k.a.push_back(v);
    k.pos.push_back(static_cast<uint32_t>(i));
  }
  return k;
}

// amax_h after each update (DelayedScaler: the history is `window` entries, zeros until it
// fills; max over it, or the newest entry). The sliding maximum by van Herk / Gil-Werman:
// maxima within blocks of `window` steps from the left and from the right; a window
// [k - w + 1, k] is the right part of one block and the left part of the next.
void history_amax(const std::vector<float>& a, int window, AmaxAlgo algo, std::vector<float>& h) {
  const size_t n = a.size();
  h.resize(n);
  if (algo == AmaxAlgo::MostRecent) {
    std::copy(a.begin(), a.end(), h.begin());
    return;
  }
  const size_t w = static_cast<size_t>(window);
  static thread_local std::vector<float> suf;
  suf.resize(n);
  for (size_t start = 0; start < n; start += w) {  // from the right, block by block
    const size_t end = std::min(n, start + w);
    float m = a[end - 1];
    for (size_t k = end; k-- > start;) {
      m = std::max(m, a[k]);
      suf[k] = m;
    }
  }
  float pre = 0;
  for (size_t k = 0; k < n; ++k) {
    pre = k % w == 0 ? a[k] : std::max(pre, a[k]);
    // Before the ring fills the window starts at step 0, and its unfilled entries are 0.
    h[k] = k + 1 < w ? std::max(pre, 0.0f) : std::max(suf[k + 1 - w], pre);
  }
}

// The scale each quantized step uses: s[0] the initial one, s[k + 1] from amax_h[k], as
// DelayedScaler::update() sets it: ldexp(fmax / amax_h, -margin) in fp32, which equals the
// product with 2^-margin (one rounding of the exact value either way, 2^-margin being a
// normal fp32 for |margin| <= 64); an amax_h like the previous gives the previous scale.
void scales_from(const std::vector<float>& a, const std::vector<float>& h, float fmax, int margin,
                 InitialScale initial, std::vector<float>& s) {
  const size_t n = a.size();
  s.resize(n);
  if (n == 0) return;
  const float pow2 = std::ldexp(1.0f, -margin);
  float kept = 1.0f;
  s[0] = initial == InitialScale::BootstrapCurrent
             ? scale_for_amax(a[0], static_cast<double>(fmax), margin)
             : 1.0f;
  float last = std::nanf("");
  for (size_t k = 0; k + 1 < n; ++k) {
    const float m = h[k];
    if (!(m == last)) {
      last = m;
      if (m > 0 && std::isfinite(m)) {
        const float v = (fmax / m) * pow2;
        kept = std::isinf(v) ? FLT_MAX : v;
      }
    }
    s[k + 1] = kept;
  }
}

float fmax_of(Format f) {
  return static_cast<float>(format_info(f).max_finite);
}

// The two middle values of the positive floats (as bits) in v[0, n): a radix select on the
// upper 16 bits (`counts`: their histogram, made here where null), then a sort of the
// values in the bins that hold them.
std::pair<uint32_t, uint32_t> middle_pair(const uint32_t* v, size_t n,
                                          const std::vector<uint32_t>* given) {
  std::vector<uint32_t> own;
  if (!given) {
    own.assign(size_t{1} << 16, 0);
    for (size_t i = 0; i < n; ++i) ++own[v[i] >> 16];
  }
  const std::vector<uint32_t>& counts = given ? *given : own;
  const size_t k1 = (n - 1) / 2, k2 = n / 2;
  size_t below = 0, b1 = 0, below1 = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    if (below + counts[b] > k1) {
      b1 = b;
      below1 = below;
      break;
    }
    below += counts[b];
  }
  size_t b2 = b1;
  if (below1 + counts[b1] <= k2) {
    for (size_t b = b1 + 1; b < counts.size(); ++b) {
      if (counts[b] > 0) {
        b2 = b;
        break;
      }
    }
  }
  std::vector<uint32_t> pick;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t top = v[i] >> 16;
    if (top == b1 || top == b2) pick.push_back(v[i]);
  }
  std::sort(pick.begin(), pick.end());
  return {pick[k1 - below1], pick[k2 - below1]};
}

// The median of log2(fmax / x) over the positive floats x (as bits) in v[0, n).
double median_headroom(const uint32_t* v, size_t n, float fmax,
                       const std::vector<uint32_t>* counts) {
  if (n == 0) return std::nan("");
  const auto [lo, hi] = middle_pair(v, n, counts);
  float a = 0, b = 0;
  std::memcpy(&a, &lo, 4);
  std::memcpy(&b, &hi, 4);
  // The mean of the two middle values' headrooms (equal for an odd count).
  return std::log2(static_cast<double>(fmax)) -
         0.5 * (std::log2(static_cast<double>(a)) + std::log2(static_cast<double>(b)));
}

// Prefix sums of a sample's exponent bins, for the shifted-histogram estimates.
struct SamplePrep {
  size_t k = 0;  // the tensor's quantized step the sample is at
  float stored_scale = 0;
  std::array<double, kHistExpBins + 1> prefix{};  // prefix[i]: bins below i
  double total = 0;
  // log2(amax x stored scale): no element lies above it, so the top bin spans only up to
  // it (-inf: not known).
  double top = -HUGE_VAL;
};

// Elements of the sample below log2 value t (in the stored scale's terms), elements
// log-uniform within a bin (the amax's bin only up to the amax).
double count_below(const SamplePrep& p, const uint64_t* hist, double t) {
  const double x = t - kHistMinExp;
  if (x <= 0) return 0;
  if (x >= kHistExpBins) return p.total;
  const int i = static_cast<int>(std::floor(x));
  double width = 1;
  if (std::isfinite(p.top) && std::floor(p.top) == i + kHistMinExp)
    width = std::max(p.top - (i + kHistMinExp), 1e-9);
  const double part = std::min(1.0, (x - i) / width);
  return p.prefix[static_cast<size_t>(i)] + static_cast<double>(hist[i]) * part;
}

}  // namespace

float saturation_threshold(Format f) {
  const CodecSpec spec = codec_spec(f);
  const float fmax = fmax_of(f);
  // The encoding is monotonic in the magnitude: the first value past the max whose code
  // decodes to a non-finite value (Ieee overflow) or beyond the max.
  const auto over = [&](uint32_t u) {
    float x = 0;
    std::memcpy(&x, &u, 4);
    const uint8_t code = encode(x, spec, Overflow::Ieee);
    const float d = decode(code, spec);
    return !std::isfinite(d) || d > fmax;
  };
  uint32_t lo = bits_of(fmax), hi = 0x7F800000u;  // over(lo) false, over(hi) true
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    (over(mid) ? hi : lo) = mid;
  }
  float t = 0;
  std::memcpy(&t, &hi, 4);
  return t;
}

std::vector<float> replay_scales(const ReplayInput& in, size_t tensor, const ReplayCellSetting& s,
                                 InitialScale initial) {
  validate_delayed_config({s.window, s.margin, s.algo, initial});
  const Track k = track_of(in, tensor);
  std::vector<float> h, sc;
  history_amax(k.a, s.window, s.algo, h);
  scales_from(k.a, h, fmax_of(in.tensors.at(tensor).format), s.margin, initial, sc);
  std::vector<float> out(in.step_count(), std::nanf(""));
  for (size_t i = 0; i < k.pos.size(); ++i) out[k.pos[i]] = sc[i];
  return out;
}

std::vector<float> run_scales(const ReplayInput& in, size_t tensor, const RunScalingSettings& run) {
  if (run.delayed) {
    return replay_scales(in, tensor, {run.config.margin, run.config.window, run.config.algo},
                         run.config.initial);
  }
  const double fmax = format_info(in.tensors.at(tensor).format).max_finite;
  std::vector<float> out(in.step_count(), std::nanf(""));
  for (size_t i = 0; i < in.step_count(); ++i) {
    const float a = in.at(i, tensor);
    if (!std::isnan(a)) out[i] = scale_for_amax(a, fmax, run.config.margin);
  }
  return out;
}

OwnScalesCheck own_scales_check(const ReplayInput& in, const RunScalingSettings& run,
                                const std::vector<StoredScale>& stored) {
  OwnScalesCheck c;
  std::vector<std::vector<float>> scales(in.tensor_count());
  for (const StoredScale& s : stored) {
    if (s.tensor >= in.tensor_count()) continue;
    const auto it = std::lower_bound(in.steps.begin(), in.steps.end(), s.step);
    if (it == in.steps.end() || *it != s.step) continue;  // a sample without its amax row
    if (scales[s.tensor].empty()) scales[s.tensor] = run_scales(in, s.tensor, run);
    const float r = scales[s.tensor][static_cast<size_t>(it - in.steps.begin())];
    if (std::isnan(r)) continue;
    ++c.compared;
    const float as_stored = run.scale_stored_as_is ? r : stored_scale_of(r);
    if (c.matches && bits_of(as_stored) != bits_of(s.scale)) {
      c.matches = false;
      c.first_step = s.step;
      c.first_tensor = s.tensor;
      c.stored = s.scale;
      c.replayed = as_stored;
    }
  }
  return c;
}

namespace {

// Refuses a grid without values on an axis or of too many cells, a value out of its
// bounds, and an input whose amax does not hold one value a step and tensor.
void check_replay_request(const ReplayInput& in, const ReplayGrid& grid) {
  const auto empty_axis = [](const char* name) {
    return ReplayError(std::string("--grid ") + name + " is empty: give at least one value");
  };
  if (grid.margins.empty()) throw empty_axis("margin");
  if (grid.windows.empty()) throw empty_axis("window");
  if (grid.algos.empty()) throw empty_axis("amax_algo");
  if (grid.cell_count() > kMaxReplayCells) {
    throw ReplayError("the grid has " + std::to_string(grid.cell_count()) + " cells, over the " +
                      std::to_string(kMaxReplayCells) +
                      " a replay takes: give fewer values on an axis");
  }
  for (int m : grid.margins) validate_delayed_config({1, m, AmaxAlgo::Max, InitialScale::One});
  for (int w : grid.windows) validate_delayed_config({w, 0, AmaxAlgo::Max, InitialScale::One});
  const size_t T = in.tensor_count(), N = in.step_count();
  if (in.amax.size() != T * N) {
    throw ReplayError("the recorded amax has " + std::to_string(in.amax.size()) + " values for " +
                      std::to_string(N) + " steps of " + std::to_string(T) + " tensors");
  }
}

// The grid's cells in its order (margin, then window, then algorithm), their figures empty.
std::vector<ReplayCell> grid_cells(const ReplayGrid& grid, const RunScalingSettings& run,
                                   size_t tensors) {
  std::vector<ReplayCell> cells;
  for (int m : grid.margins)
    for (int w : grid.windows)
      for (AmaxAlgo a : grid.algos) {
        ReplayCell c;
        c.setting = {m, w, a};
        c.tensors.resize(tensors);
        c.is_run_setting =
            run.delayed && m == run.config.margin && w == run.config.window && a == run.config.algo;
        cells.push_back(std::move(c));
      }
  return cells;
}

size_t cell_index(const ReplayGrid& grid, size_t mi, size_t wi, size_t ai) {
  return (mi * grid.windows.size() + wi) * grid.algos.size() + ai;
}

// What a replay reads of its input once, per tensor: its quantized steps, its format's
// figures, its samples (with their prefix sums).
struct Prepared {
  size_t T = 0;
  std::vector<Track> tracks;
  std::vector<float> fmax, thr;
  std::vector<double> under_log, sat_log;
  std::vector<std::vector<SamplePrep>> preps;
  std::vector<std::vector<const ReplaySample*>> sample_of;
  size_t counted_max = 0;  // the tensors' quantized steps, all told
  bool one_format = true;
  std::vector<float> inv_fmax;  // 1 / fmax, or 1 where every tensor has one format
};

// Every tensor's quantized steps, read row by row (one pass over the input), and its
// format's figures.
void read_tracks(const ReplayInput& in, Prepared& p) {
  const size_t T = p.T, N = in.step_count();
  p.tracks.resize(T);
  for (size_t t = 0; t < T; ++t) {
    p.tracks[t].a.reserve(N);
    p.tracks[t].pos.reserve(N);
  }
  for (size_t i = 0; i < N; ++i) {
    const float* row = in.amax.data() + i * T;
    for (size_t t = 0; t < T; ++t) {
      if (std::isnan(row[t])) continue;
      p.tracks[t].a.push_back(row[t]);
      p.tracks[t].pos.push_back(static_cast<uint32_t>(i));
    }
  }
  p.fmax.resize(T);
  p.thr.resize(T);
  p.under_log.resize(T);
  p.sat_log.resize(T);
  for (size_t t = 0; t < T; ++t) {
    const Format f = in.tensors[t].format;
    p.fmax[t] = fmax_of(f);
    p.thr[t] = saturation_threshold(f);
    p.under_log[t] = std::log2(format_info(f).min_subnormal / 2);
    p.sat_log[t] = std::log2(static_cast<double>(p.thr[t]));
    p.counted_max += p.tracks[t].a.size();
  }
  for (size_t t = 1; t < T; ++t) p.one_format = p.one_format && p.fmax[t] == p.fmax[0];
  p.inv_fmax.resize(T);
  for (size_t t = 0; t < T; ++t) p.inv_fmax[t] = p.one_format ? 1.0f : 1.0f / p.fmax[t];
}

// The samples at a quantized step of their tensor with a stored histogram, with their
// prefix sums.
void prepare_samples(const ReplayInput& in, const std::vector<ReplaySample>& samples, Prepared& p) {
  p.preps.resize(p.T);
  p.sample_of.resize(p.T);
  for (const ReplaySample& s : samples) {
    if (s.tensor >= p.T) continue;
    const auto it = std::lower_bound(in.steps.begin(), in.steps.end(), s.step);
    if (it == in.steps.end() || *it != s.step) continue;
    const auto pos = static_cast<uint32_t>(it - in.steps.begin());
    const Track& k = p.tracks[s.tensor];
    const auto kt = std::lower_bound(k.pos.begin(), k.pos.end(), pos);
    if (kt == k.pos.end() || *kt != pos || !(s.scale > 0) || !std::isfinite(s.scale)) continue;
    SamplePrep sp;
    sp.k = static_cast<size_t>(kt - k.pos.begin());
    sp.stored_scale = s.scale;
    if (const float a = k.a[sp.k]; a > 0 && std::isfinite(a))
      sp.top = std::log2(static_cast<double>(a)) + std::log2(static_cast<double>(s.scale));
    for (int i = 0; i < kHistExpBins; ++i)
      sp.prefix[static_cast<size_t>(i) + 1] =
          sp.prefix[static_cast<size_t>(i)] + static_cast<double>(s.hist[i]);
    sp.total = sp.prefix[kHistExpBins];
    if (sp.total <= 0) continue;
    p.preps[s.tensor].push_back(sp);
    p.sample_of[s.tensor].push_back(&s);
  }
}

// Buffers kept across cells.
struct CellScratch {
  std::vector<float> sc;  // a tensor's replayed scales
  // Each counted step's key for the cell's median: amax x scale (one format: exact), else
  // amax x scale / max in fp32 (E4M3 and E5M2 tensors on one scale, to fp32's precision).
  std::vector<uint32_t> products;
  std::vector<uint32_t> counts;  // the keys' upper 16 bits
  size_t at = 0;                 // the keys written so far in the cell
};

// A tensor's figures from its quantized steps under the scales in w.sc: its keys appended
// to w.products (and counted), the saturating steps, the headroom.
void step_figures(const Prepared& p, size_t t, bool per_tensor_median, CellScratch& w,
                  ReplayFigures& f) {
  const Track& k = p.tracks[t];
  size_t at = w.at;
  const size_t begin = at;
  const float th = p.thr[t], inv = p.inv_fmax[t];
  float worst = 0, top = 0;  // the largest saturating and the largest product
  int64_t saturating = 0;
  const float* av = k.a.data();
  const float* sv = w.sc.data();
  uint32_t* out = w.products.data();
  uint32_t* cnt = w.counts.data();
  const float mul = p.one_format ? 1.0f : inv;  // x 1 is exact
  for (size_t i = 0, n = k.a.size(); i < n; ++i) {
    const float a = av[i];
    if (!(a > 0) || !(a <= FLT_MAX)) continue;
    const float pr = a * sv[i];
    top = std::max(top, pr);
    const uint32_t kb = bits_of(pr * mul);
    out[at++] = kb;
    ++cnt[kb >> 16];
    if (pr >= th) {
      ++saturating;
      worst = std::max(worst, pr);
    }
  }
  w.at = at;
  f.steps = static_cast<int64_t>(at - begin);
  f.saturating_steps = saturating;
  f.worst_over_binades =
      saturating > 0 ? std::log2(static_cast<double>(worst) / static_cast<double>(p.fmax[t])) : 0;
  f.min_headroom_binades =
      at > begin ? std::log2(static_cast<double>(p.fmax[t]) / static_cast<double>(top))
                 : std::nan("");
  f.median_headroom_binades = std::nan("");
  if (per_tensor_median || p.T == 1) {
    std::vector<uint32_t> seg;  // the products themselves (exact)
    seg.reserve(at - begin);
    for (size_t i = 0, n = k.a.size(); i < n; ++i)
      if (av[i] > 0 && av[i] <= FLT_MAX) seg.push_back(bits_of(av[i] * sv[i]));
    f.median_headroom_binades = median_headroom(seg.data(), seg.size(), p.fmax[t], nullptr);
  }
}

// Elements of a tensor's samples under the scales `sc`: below the format's smallest
// subnormal's half (`under`), at or past its saturation threshold (`sat`), all (`total`).
struct SampledCounts {
  double under = 0, sat = 0, total = 0;
};

// The sampled steps' histograms, shifted to the replayed scale.
SampledCounts sampled_counts(const Prepared& p, size_t t, const std::vector<float>& sc) {
  SampledCounts c;
  for (size_t j = 0; j < p.preps[t].size(); ++j) {
    const SamplePrep& sp = p.preps[t][j];
    const uint64_t* h = p.sample_of[t][j]->hist;
    const double d =
        std::log2(static_cast<double>(sc[sp.k])) - std::log2(static_cast<double>(sp.stored_scale));
    c.under += count_below(sp, h, p.under_log[t] - d);
    c.sat += sp.total - count_below(sp, h, p.sat_log[t] - d);
    c.total += sp.total;
  }
  return c;
}

// One cell's figures, per tensor and over all, from the tensors' amax_h (`hist_amax`)
// under `margin`.
void replay_cell(const Prepared& p, const std::vector<std::vector<float>>& hist_amax, int margin,
                 InitialScale initial, bool per_tensor_median, CellScratch& w, ReplayCell& cell) {
  SampledCounts all;
  bool t_min_seen = false;  // a tensor's closest approach taken into cell.all's
  w.at = 0;
  std::fill(w.counts.begin(), w.counts.end(), 0u);
  for (size_t t = 0; t < p.T; ++t) {
    scales_from(p.tracks[t].a, hist_amax[t], p.fmax[t], margin, initial, w.sc);
    ReplayFigures& f = cell.tensors[t];
    step_figures(p, t, per_tensor_median, w, f);
    const SampledCounts c = sampled_counts(p, t, w.sc);
    f.sampled = static_cast<int64_t>(p.preps[t].size());
    f.est_underflow_pct = c.total > 0 ? 100.0 * c.under / c.total : std::nan("");
    f.est_saturated_pct = c.total > 0 ? 100.0 * c.sat / c.total : std::nan("");
    all.under += c.under;
    all.sat += c.sat;
    all.total += c.total;
    cell.all.steps += f.steps;
    cell.all.saturating_steps += f.saturating_steps;
    cell.all.worst_over_binades = std::max(cell.all.worst_over_binades, f.worst_over_binades);
    cell.all.sampled += f.sampled;
    if (f.steps > 0)
      cell.all.min_headroom_binades =
          t_min_seen ? std::min(cell.all.min_headroom_binades, f.min_headroom_binades)
                     : f.min_headroom_binades;
    t_min_seen = t_min_seen || f.steps > 0;
  }
  if (!t_min_seen) cell.all.min_headroom_binades = std::nan("");
  if (p.T == 1) {
    cell.all.median_headroom_binades = cell.tensors[0].median_headroom_binades;
  } else {
    cell.all.median_headroom_binades =
        median_headroom(w.products.data(), w.at, p.one_format ? p.fmax[0] : 1.0f, &w.counts);
  }
  cell.all.est_underflow_pct = all.total > 0 ? 100.0 * all.under / all.total : std::nan("");
  cell.all.est_saturated_pct = all.total > 0 ? 100.0 * all.sat / all.total : std::nan("");
}

// Every cell's figures: per (window, algorithm) the tensors' amax_h once, then per margin.
void replay_cells(const Prepared& p, const ReplayGrid& grid, const ReplayOptions& opt,
                  std::vector<ReplayCell>& cells) {
  const InitialScale initial = opt.run.config.initial;
  std::vector<std::vector<float>> hist_amax(p.T);
  CellScratch w;
  w.products.resize(p.counted_max);
  w.counts.resize(size_t{1} << 16);
  // With one entry, max over the history is its newest entry, and most_recent does not read
  // the window: such cells share one amax_h (window 0 below) and are computed once.
  std::vector<std::pair<int, size_t>> done;  // (window key, the (window, algorithm) index)
  for (size_t wi = 0; wi < grid.windows.size(); ++wi) {
    for (size_t ai = 0; ai < grid.algos.size(); ++ai) {
      const AmaxAlgo algo = grid.algos[ai];
      const int key = algo == AmaxAlgo::MostRecent || grid.windows[wi] == 1 ? 0 : grid.windows[wi];
      const auto same =
          std::find_if(done.begin(), done.end(), [&](const auto& d) { return d.first == key; });
      if (same != done.end()) {
        const size_t swi = same->second / grid.algos.size(), sai = same->second % grid.algos.size();
        for (size_t mi = 0; mi < grid.margins.size(); ++mi) {
          ReplayCell& cell = cells[cell_index(grid, mi, wi, ai)];
          const ReplayCell& from = cells[cell_index(grid, mi, swi, sai)];
          cell.all = from.all;
          cell.tensors = from.tensors;
        }
        continue;
      }
      done.emplace_back(key, wi * grid.algos.size() + ai);
      for (size_t t = 0; t < p.T; ++t)
        history_amax(p.tracks[t].a, grid.windows[wi], algo, hist_amax[t]);
      for (size_t mi = 0; mi < grid.margins.size(); ++mi) {
        replay_cell(p, hist_amax, grid.margins[mi], initial, opt.per_tensor_median, w,
                    cells[cell_index(grid, mi, wi, ai)]);
      }
    }
  }
}

// The ranking (ReplayResult::kRule); ties keep the grid's order.
void rank_cells(ReplayResult& res) {
  res.ranking.resize(res.cells.size());
  std::iota(res.ranking.begin(), res.ranking.end(), size_t{0});
  const auto key_headroom = [](const ReplayFigures& f) {
    return std::isnan(f.median_headroom_binades) ? HUGE_VAL : f.median_headroom_binades;
  };
  // 0: safe (no saturation, room at the closest approach), 1: no saturation, 2: saturates.
  const auto group = [](const ReplayFigures& f) {
    if (f.saturating_steps > 0) return 2;
    return f.min_headroom_binades >= ReplayResult::kSafeHeadroomBinades ? 0 : 1;
  };
  std::stable_sort(res.ranking.begin(), res.ranking.end(), [&](size_t x, size_t y) {
    const ReplayFigures& a = res.cells[x].all;
    const ReplayFigures& b = res.cells[y].all;
    const int ga = group(a), gb = group(b);
    if (ga != gb) return ga < gb;
    if (ga == 1 && a.min_headroom_binades != b.min_headroom_binades)
      return a.min_headroom_binades > b.min_headroom_binades;
    if (ga == 2 && a.saturating_steps != b.saturating_steps)
      return a.saturating_steps < b.saturating_steps;
    return key_headroom(a) < key_headroom(b);
  });
  for (size_t r = 0; r < res.ranking.size(); ++r)
    res.cells[res.ranking[r]].rank = static_cast<int>(r + 1);
}

}  // namespace

ReplayResult replay_amax(const ReplayInput& in, const ReplayGrid& grid, const ReplayOptions& opt) {
  check_replay_request(in, grid);
  ReplayResult res;
  res.cells = grid_cells(grid, opt.run, in.tensor_count());
  Prepared p;
  p.T = in.tensor_count();
  read_tracks(in, p);
  prepare_samples(in, opt.samples, p);
  replay_cells(p, grid, opt, res.cells);
  rank_cells(res);
  if (!opt.stored.empty()) res.own = own_scales_check(in, opt.run, opt.stored);
  return res;
}

}  // namespace fp8wb
