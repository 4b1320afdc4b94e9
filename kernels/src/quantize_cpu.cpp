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
    if (so.enabled) {
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
        uint32_t m = 0;
        for (int64_t c = c0; c < c1; ++c) {
          const uint32_t a = float_bits(load(x, r * x.cols + c)) & 0x7FFFFFFFu;
          m = (a < 0x7F800000u && a > m) ? a : m;  // finite values only
        }
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

ValueSummary summarize_values(const TensorRef& x, int threads) {
  check_input(x);
  struct Part {
    int64_t finite = 0;
    double sum = 0, sq = 0;
    float mn = INFINITY, mx = -INFINITY;
    uint32_t amax = 0, min_nz = 0x7F800000u;  // |x| as fp32 bits: ordered like the values
    std::vector<uint64_t> hist = std::vector<uint64_t>(kHistBins, 0);
  };
  std::vector<Part> parts(static_cast<size_t>(thread_count(threads)) * 4 + 1);
  int64_t chunks = 1;
  for_row_chunks(x.rows, x.cols, threads, chunks, [&](int64_t chunk, int64_t r0, int64_t r1) {
    Part& p = parts[static_cast<size_t>(chunk)];
    for (int64_t i = r0 * x.cols, end = r1 * x.cols; i < end; ++i) {
      const float v = load(x, i);
      const uint32_t a = float_bits(v) & 0x7FFFFFFFu;
      if (a >= 0x7F800000u) {
        p.hist[kHistNonfiniteBin]++;
        continue;
      }
      ++p.finite;
      p.sum += v;
      p.sq += static_cast<double>(v) * v;
      p.mn = std::min(p.mn, v);
      p.mx = std::max(p.mx, v);
      p.amax = std::max(p.amax, a);
      if (a == 0) {
        p.hist[kHistZeroBin]++;
        continue;
      }
      p.min_nz = std::min(p.min_nz, a);
      // floor(log2 |v|) is the unbiased exponent; subnormals lie below every bin.
      const int e = static_cast<int>(a >> 23) - 127;
      p.hist[static_cast<size_t>(std::clamp(e - kHistMinExp, 0, kHistExpBins - 1))]++;
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
    for (int b = 0; b < kHistBins; ++b) s.hist[static_cast<size_t>(b)] += p.hist[static_cast<size_t>(b)];
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
