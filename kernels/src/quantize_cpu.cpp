#include "fp8wb/kernels/quantize_cpu.h"
#include "cpu_target.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "fp8wb/kernels/codec_cpu.h"
#include "fp8wb/kernels/quantize_element.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace fp8wb {
namespace {

FP8WB_INLINE float load(const TensorRef& x, int64_t i) {
  return x.f32 ? x.f32[i] : bits_float(static_cast<uint32_t>(x.bf16[i]) << 16);
}

void check_input(const TensorRef& x) {
  if (x.rows < 0 || x.cols < 0) throw std::invalid_argument("tensor shape is negative");
  if (x.numel() > 0 && !x.f32 && !x.bf16) {
    throw std::invalid_argument("tensor data is null for a " + std::to_string(x.rows) + "x" +
                                std::to_string(x.cols) + " tensor");
  }
}

int thread_count(int threads) {
  return threads > 0 ? threads : hardware_threads();
}

// Rows are split into contiguous chunks, one task each; results merge in chunk order so
// that sums do not depend on scheduling.
template <class Fn>
void for_row_chunks(int64_t rows, int64_t cols, int threads, int64_t& chunks_out, Fn&& fn) {
  const int64_t work = rows * std::max<int64_t>(cols, 1);
  const int t = thread_count(threads);
  int64_t chunks = std::min<int64_t>(rows, work < (1 << 16) ? 1 : int64_t{t} * 4);
  chunks = std::max<int64_t>(chunks, 1);
  chunks_out = chunks;
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) num_threads(t) if (chunks > 1)
#endif
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
    fn(c, r0, r1);
  }
}

struct Accum {
  StatsBuffer buf{};
  std::vector<double> map_err, map_sum;
};

struct SegmentCounts {
  uint32_t zeros = 0, nonfinite = 0, underflow = 0, subnormal = 0, saturated = 0, amax = 0;
};

FP8WB_INLINE float widen(float v) {
  return v;
}
FP8WB_INLINE float widen(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

// The hot loop, free of optional outputs and runtime modes: codes, counters, and the
// error terms that the map and the sums add up afterwards. (The decode-table lookup is a
// gather, so the loop stays scalar; arithmetic decoding vectorised but ran slower.)
// The overflow mode is a template parameter: a runtime one leaves branches in the loop
// body, and GCC then keeps it scalar.
template <Format F, Overflow ov, class In>
void segment_stats_loop(const In* __restrict__ in, uint8_t* __restrict__ out,
                        float* __restrict__ err, float* __restrict__ sq, int64_t n, float scale,
                        float scale_inv, const float* __restrict__ lut, SegmentCounts& c) {
  constexpr CodecSpec s = codec_spec(F);
  uint32_t zeros = 0, nonfinite = 0, underflow = 0, subnormal = 0, saturated = 0, amax = c.amax;
  auto decoded = [lut](uint8_t code) { return lut[code]; };
  for (int64_t j = 0; j < n; ++j) {
    const float v = widen(in[j]);
    const QuantizedElement q = quantize_element(v, scale, scale_inv, s, ov, decoded);
    out[j] = q.code;
    const uint32_t a = float_bits(v) & 0x7FFFFFFFu;
    zeros += v == 0.0f;
    nonfinite += !q.finite;
    underflow += q.finite && v != 0.0f && q.dequant == 0.0f;
    subnormal += is_subnormal_code(q.code, s);
    saturated += q.saturated;
    amax = q.finite && a > amax ? a : amax;
    err[j] = q.finite ? v - q.dequant : 0.0f;
    sq[j] = q.finite ? v : 0.0f;
  }
  c.zeros += zeros;
  c.nonfinite += nonfinite;
  c.underflow += underflow;
  c.subnormal += subnormal;
  c.saturated += saturated;
  c.amax = amax;
}

// max |x| over the finite values, as fp32 bits (a max of masked integers: it vectorises).
template <class In>
FP8WB_TARGET_CLONES uint32_t finite_amax_bits(const In* __restrict__ p, int64_t n) {
  uint32_t m = 0;
  for (int64_t c = 0; c < n; ++c) {
    const uint32_t a = float_bits(widen(p[c])) & 0x7FFFFFFFu;
    m = std::max(m, a & (0u - static_cast<uint32_t>(a < 0x7F800000u)));
  }
  return m;
}

// Statistics without codes (what the checkpoint analysis asks for), saturating: the same
// rounding as encode_rne_bits_mag(), then the value of the rounded magnitude computed
// instead of looked up, so that the loop vectorises (no gather). Every counter, error
// and square equals segment_stats_loop()'s bit for bit.
template <Format F, class In>
FP8WB_TARGET_CLONES void segment_stats_only_loop(const In* __restrict__ in, float* __restrict__ err,
                                                 float* __restrict__ sq, int64_t n, float scale,
                                                 float scale_inv, SegmentCounts& c) {
  constexpr CodecSpec s = codec_spec(F);
  constexpr int emin = 1 - s.bias;
  constexpr uint32_t shift = 23u - s.mbits;
  constexpr uint32_t rebias = static_cast<uint32_t>(127 - s.bias) << 23;
  constexpr uint32_t min_normal_bits = static_cast<uint32_t>(emin + 127) << 23;
  const float to_sub_units = bits_float(static_cast<uint32_t>(127 + s.mbits - emin) << 23);
  const float sub_unit = bits_float(static_cast<uint32_t>(127 + emin - s.mbits) << 23);
  uint32_t zeros = 0, nonfinite = 0, underflow = 0, subnormal = 0, saturated = 0, amax = c.amax;
  // Every floating-point operation runs unconditionally and every choice is a select on
  // integers: GCC keeps FP operations that might trap out of if-conversion.
  for (int64_t j = 0; j < n; ++j) {
    const float v = widen(in[j]);
    const uint32_t a = float_bits(v) & 0x7FFFFFFFu;
    const uint32_t finite = a < 0x7F800000u;
    const uint32_t u = float_bits(v * scale);
    const uint32_t ya = u & 0x7FFFFFFFu;
    const uint32_t t = ya - rebias;
    const uint32_t q_norm = (t + ((1u << (shift - 1)) - 1u) + ((t >> shift) & 1u)) >> shift;
    const uint32_t q_sub = float_bits(bits_float(ya) * to_sub_units + 8388608.0f) - 0x4B000000u;
    const uint32_t rounded = ya >= min_normal_bits ? q_norm : q_sub;
    const uint32_t over = rounded > s.max_mag;
    const uint32_t mag = over ? uint32_t{s.max_mag} : rounded;
    const uint32_t normal = (mag >> s.mbits) != 0;
    const uint32_t normal_bits = (mag << shift) + rebias;
    const uint32_t sub_bits = float_bits(static_cast<float>(static_cast<int32_t>(mag)) * sub_unit);
    const uint32_t value_bits = (normal ? normal_bits : sub_bits) | (u & 0x80000000u);
    const float dq = bits_float(value_bits) * scale_inv;
    const float e = v - dq;
    const uint32_t dq_zero = (float_bits(dq) & 0x7FFFFFFFu) == 0;
    zeros += a == 0;
    nonfinite += finite ^ 1u;
    underflow += finite & (a != 0) & dq_zero;
    subnormal += finite & (mag != 0) & (normal ^ 1u);
    saturated += finite & over;
    amax = std::max(amax, a & (0u - finite));  // finite values only
    err[j] = bits_float(finite ? float_bits(e) : 0u);
    sq[j] = bits_float(finite ? a | (float_bits(v) & 0x80000000u) : 0u);
  }
  c.zeros += zeros;
  c.nonfinite += nonfinite;
  c.underflow += underflow;
  c.subnormal += subnormal;
  c.saturated += saturated;
  c.amax = amax;
}

template <Format F, Overflow ov, class In>
FP8WB_TARGET_CLONES void segment_codes_loop(const In* __restrict__ in, uint8_t* __restrict__ out,
                                            int64_t n, float scale) {
  constexpr CodecSpec s = codec_spec(F);
  for (int64_t j = 0; j < n; ++j) out[j] = encode_rne_bits(float_bits(widen(in[j]) * scale), s, ov);
}

// One row's share of a group's elements: [c0, c1) of row r, all with one scale.
template <Format F>
void quantize_segment(const TensorRef& x, int64_t r, int64_t c0, int64_t c1, float scale,
                      float scale_inv, Overflow ov, const float* lut, uint8_t* code_tmp,
                      uint8_t* codes, uint8_t* codes_t, float* dequant, int64_t rows,
                      const StatsOptions& so, const MapGrid& grid, Accum& acc, float* err_tmp,
                      float* sq_tmp) {
  const int64_t base = r * x.cols;
  const int64_t n = c1 - c0;
  uint8_t* row_codes = codes ? codes + base + c0 : code_tmp;
  SegmentCounts counts;
  counts.amax = acc.buf.amax_bits;
  auto run = [&](auto ov_tag) {
    constexpr Overflow O = decltype(ov_tag)::value;
    if (so.enabled && !codes && !codes_t && !dequant && O == Overflow::Saturate) {
      if (x.f32) {
        segment_stats_only_loop<F>(x.f32 + base + c0, err_tmp, sq_tmp, n, scale, scale_inv, counts);
      } else {
        segment_stats_only_loop<F>(x.bf16 + base + c0, err_tmp, sq_tmp, n, scale, scale_inv,
                                   counts);
      }
    } else if (so.enabled) {
      if (x.f32) {
        segment_stats_loop<F, O>(x.f32 + base + c0, row_codes, err_tmp, sq_tmp, n, scale, scale_inv,
                                 lut, counts);
      } else {
        segment_stats_loop<F, O>(x.bf16 + base + c0, row_codes, err_tmp, sq_tmp, n, scale,
                                 scale_inv, lut, counts);
      }
    } else if (x.f32) {
      segment_codes_loop<F, O>(x.f32 + base + c0, row_codes, n, scale);
    } else {
      segment_codes_loop<F, O>(x.bf16 + base + c0, row_codes, n, scale);
    }
  };
  if (ov == Overflow::Saturate) {
    run(std::integral_constant<Overflow, Overflow::Saturate>{});
  } else {
    run(std::integral_constant<Overflow, Overflow::Ieee>{});
  }
  const uint32_t zeros = counts.zeros, nonfinite = counts.nonfinite, underflow = counts.underflow,
                 subnormal = counts.subnormal, saturated = counts.saturated, amax = counts.amax;
  if (codes_t) {
    // The transposed store is strided: a loop of its own keeps the one above vectorised.
    for (int64_t j = 0; j < n; ++j) codes_t[(c0 + j) * rows + r] = row_codes[j];
  }
  if (dequant) {
    // From the codes still in cache: no second pass over the input.
    float* row = dequant + base + c0;
    for (int64_t j = 0; j < n; ++j) row[j] = lut[row_codes[j]] * scale_inv;
  }
  if (!so.enabled) return;
  acc.buf.numel += static_cast<uint64_t>(n);
  acc.buf.zeros += zeros;
  acc.buf.nonfinite += nonfinite;
  acc.buf.underflow += underflow;
  acc.buf.subnormal += subnormal;
  acc.buf.saturated += saturated;
  acc.buf.amax_bits = amax;
  double se = 0, ss = 0;
  const bool map = so.error_map && grid.cell_count() > 0;
  const int64_t map_row = map ? (r / grid.cell_rows) * grid.cols : 0;
  int64_t j = 0;
  while (j < n) {
    // Sum cell by cell so that the map costs one add per cell.
    const int64_t cell = map ? (c0 + j) / grid.cell_cols : 0;
    const int64_t end = map ? std::min(n, (cell + 1) * grid.cell_cols - c0) : n;
    double ce = 0, cs = 0;
    for (int64_t k = j; k < end; ++k) {
      ce += static_cast<double>(err_tmp[k]) * err_tmp[k];
      cs += static_cast<double>(sq_tmp[k]) * sq_tmp[k];
    }
    se += ce;
    ss += cs;
    if (map) {
      acc.map_err[static_cast<size_t>(map_row + cell)] += ce;
      acc.map_sum[static_cast<size_t>(map_row + cell)] += cs;
    }
    j = end;
  }
  acc.buf.sq_err += se;
  acc.buf.sq_sum += ss;
  if (so.histogram) {
    // Four interleaved sub-histograms: consecutive values mostly hit the same few bins,
    // and one counter would serialise on its own store-to-load latency.
    uint32_t h[4][kHistBins] = {};
    for (int64_t k = 0; k < n; ++k) {
      const float v = load(x, base + c0 + k);
      const uint32_t a = float_bits(v) & 0x7FFFFFFFu;
      const int bin =
          a >= 0x7F800000u ? kHistNonfiniteBin : (a == 0 ? kHistZeroBin : hist_bin(v * scale));
      ++h[k & 3][bin];
    }
    for (int b = 0; b < kHistBins; ++b)
      acc.buf.hist[b] += uint64_t{h[0][b]} + h[1][b] + h[2][b] + h[3][b];
  }
}

using SegmentFn = void (*)(const TensorRef&, int64_t, int64_t, int64_t, float, float, Overflow,
                           const float*, uint8_t*, uint8_t*, uint8_t*, float*, int64_t,
                           const StatsOptions&, const MapGrid&, Accum&, float*, float*);

SegmentFn segment_fn(Format f) {
  return dispatch_element_format(
      f, [](auto tag) -> SegmentFn { return &quantize_segment<decltype(tag)::value>; });
}

void check_scales(const TensorRef& x, const QuantRecipe& recipe, const ScaleSet& scales,
                  const char* what) {
  const GroupLayout expect = make_layout(recipe, x.rows, x.cols);
  if (scales.layout.rows != x.rows || scales.layout.cols != x.cols ||
      scales.layout.block_rows != expect.block_rows ||
      scales.layout.block_cols != expect.block_cols ||
      scales.scale.size() != static_cast<size_t>(expect.group_count()) ||
      scales.scale_inv.size() != scales.scale.size()) {
    throw std::invalid_argument(
        std::string(what) + ": the scales were made for a " + std::to_string(scales.layout.rows) +
        "x" + std::to_string(scales.layout.cols) + " tensor with " +
        std::to_string(scales.scale.size()) + " groups, not for this " + std::to_string(x.rows) +
        "x" + std::to_string(x.cols) + " " + recipe_name(recipe));
  }
}

struct Pass {
  QuantRecipe recipe;
  const ScaleSet* scales;
  SegmentFn fn;
  const float* lut;
  MapGrid grid;
};

}  // namespace

MapGrid make_map_grid(const GroupLayout& layout, int max_cells) {
  MapGrid g;
  if (layout.rows == 0 || layout.cols == 0) return g;
  max_cells = std::max(max_cells, 1);
  if (layout.group_count() > 1 && layout.group_rows <= max_cells &&
      layout.group_cols <= max_cells) {
    g.cell_rows = layout.block_rows;
    g.cell_cols = layout.block_cols;
  } else {
    g.cell_rows = (layout.rows + max_cells - 1) / max_cells;
    g.cell_cols = (layout.cols + max_cells - 1) / max_cells;
  }
  g.rows = (layout.rows + g.cell_rows - 1) / g.cell_rows;
  g.cols = (layout.cols + g.cell_cols - 1) / g.cell_cols;
  return g;
}

AmaxResult compute_amax(const TensorRef& x, const GroupLayout& layout, int threads) {
  check_input(x);
  AmaxResult res;
  res.group_amax.assign(static_cast<size_t>(layout.group_count()), 0.0f);
  if (x.numel() == 0) return res;
  // Each chunk keeps its own copy of the group amaxes of the rows it covers; row groups of
  // 128x128 tiles can straddle chunks, hence the merge.
  int64_t chunks = 1;
  std::vector<std::vector<uint32_t>> partial(static_cast<size_t>(thread_count(threads)) * 4 + 1);
  for_row_chunks(x.rows, x.cols, threads, chunks, [&](int64_t chunk, int64_t r0, int64_t r1) {
    auto& mine = partial[static_cast<size_t>(chunk)];
    mine.assign(static_cast<size_t>(layout.group_count()), 0u);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t grow = (r / layout.block_rows) * layout.group_cols;
      for (int64_t c0 = 0; c0 < x.cols; c0 += layout.block_cols) {
        const int64_t c1 = std::min(x.cols, c0 + layout.block_cols);
        const int64_t at = r * x.cols + c0;
        const uint32_t m =
            x.f32 ? finite_amax_bits(x.f32 + at, c1 - c0) : finite_amax_bits(x.bf16 + at, c1 - c0);
        uint32_t& g = mine[static_cast<size_t>(grow + c0 / layout.block_cols)];
        g = std::max(g, m);
      }
    }
  });
  uint32_t tensor = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const auto& mine = partial[static_cast<size_t>(c)];
    for (size_t g = 0; g < mine.size(); ++g) {
      const float v = bits_float(mine[g]);
      res.group_amax[g] = std::max(res.group_amax[g], v);
    }
  }
  for (float v : res.group_amax) tensor = std::max(tensor, float_bits(v));
  res.tensor_amax = bits_float(tensor);
  return res;
}

namespace {

struct SummaryPart {
  int64_t finite = 0;
  double sum = 0, sq = 0;
  float mn = INFINITY, mx = -INFINITY;
  uint32_t amax = 0, min_nz = 0x7F800000u;  // |x| as fp32 bits: ordered like the values
  std::vector<uint64_t> hist = std::vector<uint64_t>(kHistBins, 0);
};

// Four interleaved lanes, each with its own sums, extremes and histogram, and no
// branches: a single running sum would wait on its own add latency at every element.
template <class In>
void summarize_span(const In* __restrict__ in, int64_t n, SummaryPart& p) {
  constexpr int L = 4;
  int64_t finite[L] = {};
  double sum[L] = {}, sq[L] = {};
  float mn[L], mx[L];
  uint32_t amax[L] = {}, min_nz[L];
  uint32_t hist[L][kHistBins] = {};
  for (int l = 0; l < L; ++l) {
    mn[l] = INFINITY;
    mx[l] = -INFINITY;
    min_nz[l] = 0x7F800000u;
  }
  auto one = [&](int l, float v) {
    const uint32_t bits = float_bits(v), a = bits & 0x7FFFFFFFu;
    const uint32_t fin = a < 0x7F800000u;
    const float vf = bits_float(fin ? bits : 0u);
    finite[l] += fin;
    sum[l] += vf;
    sq[l] += static_cast<double>(vf) * vf;
    mn[l] = std::min(mn[l], fin ? v : INFINITY);
    mx[l] = std::max(mx[l], fin ? v : -INFINITY);
    amax[l] = std::max(amax[l], a & (0u - fin));
    min_nz[l] = std::min(min_nz[l], (fin && a != 0) ? a : 0x7F800000u);
    // floor(log2 |v|) is the unbiased exponent; subnormals lie below every bin.
    const int e = std::clamp(static_cast<int>(a >> 23) - 127 - kHistMinExp, 0, kHistExpBins - 1);
    ++hist[l][!fin ? kHistNonfiniteBin : (a == 0 ? kHistZeroBin : e)];
  };
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    for (int l = 0; l < L; ++l) one(l, widen(in[i + l]));
  }
  for (; i < n; ++i) one(0, widen(in[i]));
  for (int l = 0; l < L; ++l) {
    p.finite += finite[l];
    p.sum += sum[l];
    p.sq += sq[l];
    p.mn = std::min(p.mn, mn[l]);
    p.mx = std::max(p.mx, mx[l]);
    p.amax = std::max(p.amax, amax[l]);
    p.min_nz = std::min(p.min_nz, min_nz[l]);
    for (int b = 0; b < kHistBins; ++b) p.hist[static_cast<size_t>(b)] += hist[l][b];
  }
}

}  // namespace

ValueSummary summarize_values(const TensorRef& x, int threads) {
  check_input(x);
  using Part = SummaryPart;
  std::vector<Part> parts(static_cast<size_t>(thread_count(threads)) * 4 + 1);
  int64_t chunks = 1;
  for_row_chunks(x.rows, x.cols, threads, chunks, [&](int64_t chunk, int64_t r0, int64_t r1) {
    Part& p = parts[static_cast<size_t>(chunk)];
    if (x.f32) {
      summarize_span(x.f32 + r0 * x.cols, (r1 - r0) * x.cols, p);
    } else {
      summarize_span(x.bf16 + r0 * x.cols, (r1 - r0) * x.cols, p);
    }
  });
  ValueSummary s;
  s.hist.assign(kHistBins, 0);
  float mn = INFINITY, mx = -INFINITY;
  uint32_t amax = 0, min_nz = 0x7F800000u;
  for (int64_t c = 0; c < chunks; ++c) {
    const Part& p = parts[static_cast<size_t>(c)];
    s.finite += p.finite;
    s.sum += p.sum;
    s.sq_sum += p.sq;
    mn = std::min(mn, p.mn);
    mx = std::max(mx, p.mx);
    amax = std::max(amax, p.amax);
    min_nz = std::min(min_nz, p.min_nz);
    for (int b = 0; b < kHistBins; ++b)
      s.hist[static_cast<size_t>(b)] += p.hist[static_cast<size_t>(b)];
  }
  if (s.finite > 0) {
    s.min = mn;
    s.max = mx;
  }
  s.amax = bits_float(amax);
  s.min_nonzero = min_nz < 0x7F800000u ? bits_float(min_nz) : 0.0;
  return s;
}

QuantizeResult quantize(const TensorRef& x, const QuantRecipe& recipe, const ScaleSet& scales,
                        const QuantizeTargets& out, const StatsOptions& so, const WhatIf* whatif,
                        int threads) {
  check_input(x);
  check_scales(x, recipe, scales, "quantize");
  if (out.codes_t && recipe.kind != ScalingKind::Tensorwise &&
      recipe.kind != ScalingKind::Block128x128) {
    throw std::invalid_argument("transposed codes need tensorwise or 128x128 scaling (" +
                                recipe_name(recipe) +
                                " scales along K: quantize the transposed tensor instead)");
  }
  std::vector<Pass> passes;
  passes.push_back({recipe, &scales, segment_fn(recipe.format), decode_table(recipe.format).data(),
                    make_map_grid(scales.layout, so.map_max_cells)});
  if (whatif) {
    if (!whatif->scales)
      throw std::invalid_argument("what-if statistics need the what-if recipe's scales");
    check_scales(x, whatif->recipe, *whatif->scales, "what-if");
    passes.push_back({whatif->recipe, whatif->scales, segment_fn(whatif->recipe.format),
                      decode_table(whatif->recipe.format).data(),
                      make_map_grid(whatif->scales->layout, so.map_max_cells)});
  }
  const size_t max_chunks = static_cast<size_t>(thread_count(threads)) * 4 + 1;
  std::vector<std::vector<Accum>> acc(passes.size(), std::vector<Accum>(max_chunks));
  int64_t chunks = 1;
  for_row_chunks(x.rows, x.cols, threads, chunks, [&](int64_t chunk, int64_t r0, int64_t r1) {
    std::vector<float> err_tmp(static_cast<size_t>(std::max<int64_t>(x.cols, 1)));
    std::vector<float> sq_tmp(err_tmp.size());
    std::vector<uint8_t> code_tmp(err_tmp.size());
    for (size_t p = 0; p < passes.size(); ++p) {
      Accum& a = acc[p][static_cast<size_t>(chunk)];
      if (so.error_map) {
        a.map_err.assign(static_cast<size_t>(passes[p].grid.cell_count()), 0.0);
        a.map_sum.assign(a.map_err.size(), 0.0);
      }
    }
    for (int64_t r = r0; r < r1; ++r) {
      // The what-if pass reads the row again while it is still in cache: one pass over memory.
      for (size_t p = 0; p < passes.size(); ++p) {
        const Pass& ps = passes[p];
        const GroupLayout& L = ps.scales->layout;
        const int64_t grow = (r / L.block_rows) * L.group_cols;
        for (int64_t c0 = 0; c0 < x.cols; c0 += L.block_cols) {
          const int64_t c1 = std::min(x.cols, c0 + L.block_cols);
          const auto g = static_cast<size_t>(grow + c0 / L.block_cols);
          ps.fn(x, r, c0, c1, ps.scales->scale[g], ps.scales->scale_inv[g], ps.recipe.overflow,
                ps.lut, code_tmp.data(), p == 0 ? out.codes : nullptr,
                p == 0 ? out.codes_t : nullptr, p == 0 ? out.dequant : nullptr, x.rows, so, ps.grid,
                acc[p][static_cast<size_t>(chunk)], err_tmp.data(), sq_tmp.data());
        }
      }
    }
  });
  QuantizeResult res;
  for (size_t p = 0; p < passes.size(); ++p) {
    TensorStats st;
    st.map_grid = passes[p].grid;
    if (so.error_map) {
      st.map_sq_err.assign(static_cast<size_t>(st.map_grid.cell_count()), 0.0);
      st.map_sq_sum.assign(st.map_sq_err.size(), 0.0);
    }
    for (int64_t c = 0; c < chunks; ++c) {
      const Accum& a = acc[p][static_cast<size_t>(c)];
      merge_stats(st.raw, a.buf);
      for (size_t i = 0; i < a.map_err.size(); ++i) {
        st.map_sq_err[i] += a.map_err[i];
        st.map_sq_sum[i] += a.map_sum[i];
      }
    }
    if (!so.enabled) st.raw = StatsBuffer{};
    if (p == 0) {
      res.stats = std::move(st);
    } else {
      res.whatif = std::move(st);
    }
  }
  return res;
}

void dequantize(const uint8_t* codes, const QuantRecipe& recipe, const ScaleSet& scales, float* out,
                int threads) {
  const GroupLayout& L = scales.layout;
  if (L.rows * L.cols > 0 && (!codes || !out))
    throw std::invalid_argument("dequantize: null buffer");
  const float* lut = decode_table(recipe.format).data();
  int64_t chunks = 1;
  for_row_chunks(L.rows, L.cols, threads, chunks, [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t grow = (r / L.block_rows) * L.group_cols;
      for (int64_t c0 = 0; c0 < L.cols; c0 += L.block_cols) {
        const int64_t c1 = std::min(L.cols, c0 + L.block_cols);
        const float si = scales.scale_inv[static_cast<size_t>(grow + c0 / L.block_cols)];
        for (int64_t c = c0; c < c1; ++c) out[r * L.cols + c] = lut[codes[r * L.cols + c]] * si;
      }
    }
  });
}

CurrentQuantization quantize_current(const TensorRef& x, const QuantRecipe& recipe,
                                     const QuantizeTargets& out, const StatsOptions& stats,
                                     const QuantRecipe* whatif, int threads) {
  CurrentQuantization cq;
  const GroupLayout layout = make_layout(recipe, x.rows, x.cols);
  const AmaxResult am = compute_amax(x, layout, threads);
  cq.scales = compute_scales(recipe, layout, am.group_amax, am.tensor_amax);
  if (!whatif) {
    cq.result = quantize(x, recipe, cq.scales, out, stats, nullptr, threads);
    return cq;
  }
  const GroupLayout wl = make_layout(*whatif, x.rows, x.cols);
  const AmaxResult wam = compute_amax(x, wl, threads);
  const ScaleSet ws = compute_scales(*whatif, wl, wam.group_amax, wam.tensor_amax);
  const WhatIf w{*whatif, &ws};
  cq.result = quantize(x, recipe, cq.scales, out, stats, &w, threads);
  return cq;
}

}  // namespace fp8wb
