// One segment of the CPU quantize pass (a row's share of one scale group): the choice of
// its statistics loop (CpuStatsPath: the best the processor has, found once with
// __builtin_cpu_supports(), or the one pinned), the loop's run, and the adding of its
// counts, fp64 sums, error-map cells and histogram fields into the chunk's accumulators.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "quantize_cpu_internal.h"

namespace fp8wb {
namespace quantize_cpu_detail {
namespace {

CpuStatsPath resolve_path(CpuStatsPath p) {
#if defined(FP8WB_HAVE_AVX2_PATH)
  if (p == CpuStatsPath::Auto) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
      return CpuStatsPath::Avx512;
    return __builtin_cpu_supports("avx2") ? CpuStatsPath::Avx2 : CpuStatsPath::Portable;
  }
#else
  if (p == CpuStatsPath::Auto) return CpuStatsPath::Portable;
#endif
  return p;
}

std::atomic<CpuStatsPath>& stats_path() {
  static std::atomic<CpuStatsPath> p{resolve_path(CpuStatsPath::Auto)};
  return p;
}

#if defined(FP8WB_HAVE_AVX2_PATH)
// Whether the AVX-512 loop's histogram fields may be counted with GFNI and BITALG.
bool gfni_fields() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("gfni") && __builtin_cpu_supports("avx512bitalg");
  }();
  return yes;
}
#endif

// One row's share of a group's elements: [c0, c1) of row r, all with one scale.
template <Format F>
void quantize_segment(const TensorRef& x, int64_t r, int64_t c0, int64_t c1, float scale,
                      float scale_inv, Overflow ov, const float* lut, uint8_t* codes,
                      uint8_t* codes_t, float* dequant, int64_t rows, const StatsOptions& so,
                      const MapGrid& grid, Accum& acc, Scratch& tmp) {
  const int64_t base = r * x.cols;
  const int64_t n = c1 - c0;
  uint8_t* row_codes = codes ? codes + base + c0 : tmp.codes.data();
  float* row_dq = dequant ? dequant + base + c0 : nullptr;
  SegmentCounts counts;
  counts.amax = acc.buf.amax_bits;
  uint32_t special = 0;
  // The error map's cells within this segment: the first up to the next cell boundary.
  const bool map = so.error_map && grid.cell_count() > 0;
  const int64_t first_len = map ? std::min(n, (c0 / grid.cell_cols + 1) * grid.cell_cols - c0) : n;
  const int64_t cell_cols = map ? grid.cell_cols : std::max<int64_t>(n, 1);
  const CpuStatsPath path = stats_path().load(std::memory_order_relaxed);
  bool avx2 = path == CpuStatsPath::Avx2, avx512 = path == CpuStatsPath::Avx512;
#if defined(FP8WB_HAVE_AVX2_PATH)
  const bool shortcuts = avx2_scales_ok<F>(scale, scale_inv);
  // The AVX-512 loop sums each error-map cell sixteen elements a step: cells narrower than
  // that (a narrow tensor's map: cells of 1 to 8 columns) go to the AVX2 loop, which gives
  // the same bits (at 1- and 4-column cells the AVX-512 loop took 5x and 1.4x its time).
  if (avx512 && cell_cols < 16) {
    avx512 = false;
    avx2 = true;
  }
  avx2 = avx2 && shortcuts;
  avx512 = avx512 && shortcuts;
#else
  avx512 = false;
#endif
  auto run = [&](auto ov_tag) {
    constexpr Overflow O = decltype(ov_tag)::value;
    auto stats = [&](auto codes_tag, auto dq_tag, const auto* in) {
      constexpr bool C = decltype(codes_tag)::value, D = decltype(dq_tag)::value;
#if defined(FP8WB_HAVE_AVX2_PATH)
      if (avx512) {
        special = segment_stats_avx512<F, O, C, D>(in, row_codes, row_dq, tmp.bins.data(), n,
                                                   first_len, cell_cols, tmp.cell_err.data(),
                                                   tmp.cell_sq.data(), scale, scale_inv, counts);
        if (special != kRedoSegment) return;
      }
      if (avx2) {
        special =
            segment_stats_avx2<F, O, C, D>(in, row_codes, row_dq, tmp.err.data(), tmp.sq.data(),
                                           tmp.bins.data(), n, scale, scale_inv, counts);
        cell_sums_avx2(tmp.err.data(), tmp.sq.data(), n, first_len, cell_cols, tmp.cell_err.data(),
                       tmp.cell_sq.data());
        return;
      }
#endif
      special = segment_stats_loop<F, O, C, D>(in, row_codes, row_dq, tmp.err.data(), tmp.sq.data(),
                                               tmp.bins.data(), n, scale, scale_inv, counts);
      cell_sums(tmp.err.data(), tmp.sq.data(), n, first_len, cell_cols, tmp.cell_err.data(),
                tmp.cell_sq.data());
    };
    auto with_input = [&](auto codes_tag, auto dq_tag) {
      if (x.f32) {
        stats(codes_tag, dq_tag, x.f32 + base + c0);
      } else {
        stats(codes_tag, dq_tag, x.bf16 + base + c0);
      }
    };
    using T = std::true_type;
    using N = std::false_type;
    if (so.enabled) {
      // The codes are needed for the transposed copy and the table's dequantized values.
      const bool want_codes = codes || codes_t || dequant;
      if (want_codes && dequant) {
        with_input(T{}, T{});
      } else if (want_codes) {
        with_input(T{}, N{});
      } else {
        with_input(N{}, N{});
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
  if (codes_t) {
    // The transposed store is strided: a loop of its own keeps the one above vectorised.
    for (int64_t j = 0; j < n; ++j) codes_t[(c0 + j) * rows + r] = row_codes[j];
  }
  if (dequant && !so.enabled) {
    // From the codes still in cache: no second pass over the input.
    for (int64_t j = 0; j < n; ++j) row_dq[j] = lut[row_codes[j]] * scale_inv;
  } else if (dequant && special > 0) {
    // Non-finite inputs and IEEE overflows: their codes' values from the table.
    for (int64_t j = 0; j < n; ++j) {
      const uint32_t a = float_bits(load(x, base + c0 + j)) & 0x7FFFFFFFu;
      const bool over = float_bits(lut[row_codes[j]]) >= 0x7F800000u;  // Inf or NaN code
      if (a >= 0x7F800000u || over) row_dq[j] = lut[row_codes[j]] * scale_inv;
    }
  }
  if (!so.enabled) return;
  acc.buf.numel += static_cast<uint64_t>(n);
  acc.buf.zeros += counts.zeros;
  acc.buf.nonfinite += counts.nonfinite;
  acc.buf.underflow += counts.underflow;
  acc.buf.subnormal += counts.subnormal;
  acc.buf.saturated += counts.saturated;
  acc.buf.amax_bits = counts.amax;
  double se = 0, ss = 0;
  // The segment's first cell in the map; the next ones follow it (one division a segment).
  const size_t map_at =
      map ? static_cast<size_t>((r / grid.cell_rows) * grid.cols + c0 / grid.cell_cols) -
                acc.map_first
          : 0;
  for (CellWalk cw(n, first_len, cell_cols); cw.more(); cw.next()) {
    const double ce = tmp.cell_err[static_cast<size_t>(cw.index)];
    const double cs = tmp.cell_sq[static_cast<size_t>(cw.index)];
    se += ce;
    ss += cs;
    if (map) {
      acc.map_err[map_at + static_cast<size_t>(cw.index)] += ce;
      acc.map_sum[map_at + static_cast<size_t>(cw.index)] += cs;
    }
  }
  acc.buf.sq_err += se;
  acc.buf.sq_sum += ss;
  if (so.histogram && !std::isfinite(scale)) {
    // Zeros and non-finite x need not land on the end fields: bin each element itself.
    for (int64_t k = 0; k < n; ++k) {
      const float v = load(x, base + c0 + k);
      const uint32_t a = float_bits(v) & 0x7FFFFFFFu;
      ++acc.buf.hist[a >= 0x7F800000u ? kHistNonfiniteBin
                                      : (a == 0 ? kHistZeroBin : hist_bin(v * scale))];
    }
  } else if (so.histogram && path == CpuStatsPath::Avx512) {
    // Every loop leaves the same fields in tmp.bins: those of a segment that another loop
    // took (narrow cells, a scale pair without the shortcuts, a segment redone) too.
#if defined(FP8WB_HAVE_AVX2_PATH)
    if (gfni_fields()) {
      count_fields_gfni<F>(tmp.bins.data(), n, acc.raw_hist);
    } else {
      count_fields_avx512<F>(tmp.bins.data(), n, acc.raw_hist);
    }
#endif
    acc.raw_hist.zeros += counts.zeros;
    acc.raw_hist.nonfinite += counts.nonfinite;
  } else if (so.histogram) {
    if (acc.sub_hist_count + static_cast<uint64_t>(n) > 0xFFFFFFFFu) acc.flush_sub_hist();
    acc.sub_hist_count += static_cast<uint64_t>(n);
    auto& h = acc.sub_hist;
    const uint8_t* bins = tmp.bins.data();
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
      ++h[0][bins[k]];
      ++h[1][bins[k + 1]];
      ++h[2][bins[k + 2]];
      ++h[3][bins[k + 3]];
    }
    for (; k < n; ++k) ++h[0][bins[k]];
    acc.raw_hist.zeros += counts.zeros;
    acc.raw_hist.nonfinite += counts.nonfinite;
  }
}

}  // namespace

SegmentFn segment_fn(Format f) {
  return dispatch_element_format(
      f, [](auto tag) -> SegmentFn { return &quantize_segment<decltype(tag)::value>; });
}

}  // namespace quantize_cpu_detail

bool cpu_stats_path_available(CpuStatsPath p) {
  const CpuStatsPath best = quantize_cpu_detail::resolve_path(CpuStatsPath::Auto);
  switch (p) {
    case CpuStatsPath::Avx2: return best == CpuStatsPath::Avx2 || best == CpuStatsPath::Avx512;
    case CpuStatsPath::Avx512: return best == CpuStatsPath::Avx512;
    case CpuStatsPath::Auto:
    case CpuStatsPath::Portable: break;
  }
  return true;
}

void set_cpu_stats_path(CpuStatsPath p) {
  if (!cpu_stats_path_available(p)) {
    throw std::invalid_argument(std::string("this processor or build has no ") +
                                (p == CpuStatsPath::Avx512 ? "AVX-512" : "AVX2") +
                                " statistics loop");
  }
  quantize_cpu_detail::stats_path().store(quantize_cpu_detail::resolve_path(p));
}

CpuStatsPath cpu_stats_path() {
  return quantize_cpu_detail::stats_path().load();
}

}  // namespace fp8wb
