// The CPU quantize pass's entry points (amax, quantize with statistics and what-if,
// dequantize, current scaling, the value summary): the split of a tensor's rows into
// chunks, spread over threads, and the merge of the chunks' results in chunk order.
// A segment's work is quantize_cpu_segment.cpp's; the loops are in their own files.
#include "fp8wb/kernels/quantize_cpu.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "quantize_cpu_internal.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace fp8wb {
using namespace quantize_cpu_detail;
namespace {

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

// A chunk's share of the work in elements: at least kChunkElements, small enough that the
// training step's tensors (a few 10^4 elements) spread over several cores, large enough
// that a chunk's accumulators cost little beside its elements; and at most kMaxChunks
// chunks, so that a large tensor's chunks (their accumulators live until the merge, which
// runs on one thread) stay few.
constexpr int64_t kChunkElements = 4096;
constexpr int64_t kMaxChunks = 256;
constexpr int64_t kParallelElements = int64_t{1} << 16;

// How many chunks rows x cols splits into: a function of the shape alone, so that a
// pass's results (fp64 sums added chunk by chunk) are the same at any thread count.
int64_t row_chunk_count(int64_t rows, int64_t cols) {
  if (rows <= 0) return 1;
  const int64_t c = std::max<int64_t>(cols, 1);
  const int64_t by_size = (rows * c + kMaxChunks - 1) / kMaxChunks;  // elements a chunk
  const int64_t per_chunk = std::max<int64_t>(1, std::max(kChunkElements, by_size) / c);
  return (rows + per_chunk - 1) / per_chunk;
}

// Rows are split into row_chunk_count() contiguous chunks, one task each, spread over at
// most `threads` threads; callers merge results in chunk order so that sums depend on
// neither the thread count nor the scheduling.
template <class Fn>
void for_row_chunks(int64_t rows, int64_t cols, int threads, int64_t& chunks_out, Fn&& fn) {
  const int64_t chunks = row_chunk_count(rows, cols);
  chunks_out = chunks;
  auto range = [&](int64_t c) { fn(c, rows * c / chunks, rows * (c + 1) / chunks); };
  // Below kParallelElements the chunks run on the calling thread: a parallel region's
  // start and end cost more than the work (on 16 cores beside LibTorch's own threads, the
  // small model's FP8 step took 2.3x its fp32 step with every pass parallel, 1.4x without).
  const int t = rows * std::max<int64_t>(cols, 1) < kParallelElements
                    ? 1
                    : static_cast<int>(std::min<int64_t>(thread_count(threads), chunks));
  if (t <= 1) {
    for (int64_t c = 0; c < chunks; ++c) range(c);
    return;
  }
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1) num_threads(t)
#endif
  for (int64_t c = 0; c < chunks; ++c) range(c);
}

// The error-map cells [first, last) that rows [r0, r1) fall in (cells span whole rows of
// the grid; their indices run row of cells by row of cells).
std::pair<size_t, size_t> map_cells_of_rows(const MapGrid& g, int64_t r0, int64_t r1) {
  if (r1 <= r0 || g.cell_count() == 0) return {0, 0};
  const int64_t first = r0 / g.cell_rows * g.cols;
  const int64_t last = std::min(g.rows, (r1 - 1) / g.cell_rows + 1) * g.cols;
  return {static_cast<size_t>(first), static_cast<size_t>(last)};
}

// This thread's scratch for rows of n elements, kept between chunks and calls (each chunk
// writes what it reads): a chunk would otherwise allocate and zero about 26 bytes an
// element of its row for a few rows' work.
Scratch& thread_scratch(int64_t n) {
  thread_local std::unique_ptr<Scratch> s;
  if (!s || static_cast<int64_t>(s->err.size()) < n) s = std::make_unique<Scratch>(n);
  return *s;
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
  std::vector<std::vector<uint32_t>> partial(static_cast<size_t>(row_chunk_count(x.rows, x.cols)));
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
  std::vector<uint64_t> hist = std::vector<uint64_t>(kValueHistBins, 0);
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
  uint32_t hist[L][kValueHistBins] = {};
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
    // floor(log2 |v|) - kValueHistMinExp: the biased exponent + 22 for normal values, the
    // position of the mantissa's top bit for subnormals (|v| = mantissa * 2^-149).
    const uint32_t biased = a >> 23;
    const int e = biased != 0 ? static_cast<int>(biased) + 22 : 31 - __builtin_clz(a | 1u);
    ++hist[l][!fin ? kValueHistNonfiniteBin : (a == 0 ? kValueHistZeroBin : e)];
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
    for (int b = 0; b < kValueHistBins; ++b) p.hist[static_cast<size_t>(b)] += hist[l][b];
  }
}

}  // namespace

ValueSummary summarize_values(const TensorRef& x, int threads) {
  check_input(x);
  using Part = SummaryPart;
  std::vector<Part> parts(static_cast<size_t>(row_chunk_count(x.rows, x.cols)));
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
  s.hist.assign(kValueHistBins, 0);
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
    for (int b = 0; b < kValueHistBins; ++b)
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
  // Each chunk's accumulators, made (zeroed) by the chunk's own thread.
  const auto max_chunks = static_cast<size_t>(row_chunk_count(x.rows, x.cols));
  std::vector<std::vector<std::unique_ptr<Accum>>> acc(passes.size());
  for (auto& a : acc) a.resize(max_chunks);
  int64_t chunks = 1;
  for_row_chunks(x.rows, x.cols, threads, chunks, [&](int64_t chunk, int64_t r0, int64_t r1) {
    Scratch& tmp = thread_scratch(x.cols);
    for (size_t p = 0; p < passes.size(); ++p) {
      acc[p][static_cast<size_t>(chunk)] = std::make_unique<Accum>();
      Accum& a = *acc[p][static_cast<size_t>(chunk)];
      if (so.error_map) {
        // Only the cells of these rows.
        const auto [lo, hi] = map_cells_of_rows(passes[p].grid, r0, r1);
        a.map_first = lo;
        a.map_err.assign(hi - lo, 0.0);
        a.map_sum.assign(hi - lo, 0.0);
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
                ps.lut, p == 0 ? out.codes : nullptr, p == 0 ? out.codes_t : nullptr,
                p == 0 ? out.dequant : nullptr, x.rows, so, ps.grid,
                *acc[p][static_cast<size_t>(chunk)], tmp);
        }
      }
    }
    // The histogram's counts into its bins here, in parallel: integer sums, in any order.
    for (size_t p = 0; p < passes.size(); ++p) {
      Accum& a = *acc[p][static_cast<size_t>(chunk)];
      a.flush_sub_hist();
      a.raw_hist.fold_into(a.buf.hist);
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
      const Accum& a = *acc[p][static_cast<size_t>(c)];
      merge_stats(st.raw, a.buf);
      // The other cells hold +0 for this chunk: adding them would change no sum.
      for (size_t i = 0; i < a.map_err.size(); ++i) {
        st.map_sq_err[a.map_first + i] += a.map_err[i];
        st.map_sq_sum[a.map_first + i] += a.map_sum[i];
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
