// What the CPU quantize sources share: quantize_cpu.cpp (the entry points, the chunking of
// a pass and the merge of its chunks), quantize_cpu_segment.cpp (one segment's work and
// the choice of its loop), quantize_cpu_portable.cpp, quantize_cpu_avx2.cpp and
// quantize_cpu_avx512.cpp (the loops). The chunk accumulators, the per-thread scratch,
// the order of the fp64 sums, and the loops' declarations. Not installed.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu_target.h"
#include "fp8wb/kernels/codec_cpu.h"
#include "fp8wb/kernels/quantize_cpu.h"
#include "fp8wb/kernels/quantize_element.h"

// The AVX2 and AVX-512 loops: on x86-64 with GCC, built by target attributes next to the
// portable ones and chosen at run time (CpuStatsPath).
#if defined(__x86_64__) && defined(__GNUC__)
#define FP8WB_HAVE_AVX2_PATH 1
#define FP8WB_AVX2 __attribute__((target("avx2")))
#define FP8WB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
// The histogram's field counting where the processor also has GFNI and AVX-512 BITALG.
#define FP8WB_AVX512_GFNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,gfni,avx512bitalg")))
// GCC 12's AVX-512 headers start unmasked operations from _mm512_undefined_*() values,
// which -Wuninitialized reports at every use (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace fp8wb {
namespace quantize_cpu_detail {

FP8WB_INLINE float load(const TensorRef& x, int64_t i) {
  return x.f32 ? x.f32[i] : bits_float(static_cast<uint32_t>(x.bf16[i]) << 16);
}

FP8WB_INLINE float widen(float v) {
  return v;
}
FP8WB_INLINE float widen(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

// The histogram as the loops count it: by the biased fp32 exponent field of |x * scale|
// (a shift, no clamps or selects per element), zeros and non-finite x included. Where
// the scale is finite, a zero x lands on field 0 and a non-finite x on field 255 (Inf or
// NaN), so the bins of numerics.md follow from the fields and the zero and non-finite
// counts: fold_into().
struct RawHistogram {
  std::array<uint64_t, 256> field{};
  uint64_t zeros = 0, nonfinite = 0;  // of the elements counted here

  void fold_into(uint64_t* hist) const {
    auto bin_of = [](int f) { return std::clamp(f - 127 - kHistMinExp, 0, kHistExpBins - 1); };
    for (int f = 0; f < 256; ++f) hist[bin_of(f)] += field[static_cast<size_t>(f)];
    hist[bin_of(0)] -= zeros;
    hist[kHistZeroBin] += zeros;
    hist[bin_of(255)] -= nonfinite;
    hist[kHistNonfiniteBin] += nonfinite;
  }
};

struct Accum {
  StatsBuffer buf{};
  RawHistogram raw_hist;
  // Four interleaved sub-histograms of 32-bit counts, kept across a chunk's segments (a
  // segment may be a row of a few elements) and added into raw_hist before they could
  // overflow and at the end: consecutive values mostly hit the same few fields, and one
  // counter would serialise on its own store-to-load latency.
  uint32_t sub_hist[4][256] = {};
  uint64_t sub_hist_count = 0;
  void flush_sub_hist() {
    for (size_t f = 0; f < 256; ++f) {
      raw_hist.field[f] +=
          uint64_t{sub_hist[0][f]} + sub_hist[1][f] + sub_hist[2][f] + sub_hist[3][f];
    }
    std::memset(sub_hist, 0, sizeof sub_hist);
    sub_hist_count = 0;
  }
  // The error map's cells [map_first, map_first + map_err.size()): those of the chunk's rows.
  std::vector<double> map_err, map_sum;
  size_t map_first = 0;
};

struct SegmentCounts {
  uint32_t zeros = 0, nonfinite = 0, underflow = 0, subnormal = 0, saturated = 0, amax = 0;
};

// Where one segment's statistics loop leaves its per-element terms for the sums, the
// histogram and the dequantized values that need the table (a row's worth each).
struct Scratch {
  std::vector<float> err, sq;
  std::vector<uint8_t> codes, bins;
  std::vector<double> cell_err, cell_sq;  // a segment's error-map cells (at most one each)
  explicit Scratch(int64_t n)
      : err(static_cast<size_t>(std::max<int64_t>(n, 1))),
        sq(err.size()),
        codes(err.size()),
        bins(err.size()),
        cell_err(err.size() + 1),
        cell_sq(err.size() + 1) {}
};

// The squared errors and squares of one segment, cell by cell (cells of the error map:
// the first `first_len` elements, then `cell_cols` at a time), in fp64: each fp32 term
// widened exactly, squared (exact in fp64) and added in fp64, in sixteen partial sums
// (element k of a cell into sum k % 16, in element order) so that the adds do not wait on
// one another, then added in a fixed tree: lane l + lane l + 8, then l + 4, l + 2, l + 1.
// The AVX2 and AVX-512 loops add in exactly this order, so all give the same bits.
constexpr int kSumLanes = 16;
FP8WB_INLINE double lane_total(const double* l) {
  double t[8];
  for (int i = 0; i < 8; ++i) t[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) t[i] = t[i] + t[i + 4];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

// The error-map cells that a segment of n elements spans, in order: its first `first_len`
// elements, then `cell_cols` at a time. Cell `index` holds elements [begin, end):
//   for (CellWalk c(n, first_len, cell_cols); c.more(); c.next()) ...
struct CellWalk {
  int64_t n, cell_cols, index = 0, begin = 0, end;
  CellWalk(int64_t count, int64_t first_len, int64_t cols)
      : n(count), cell_cols(cols), end(std::min(count, first_len)) {}
  bool more() const { return begin < n; }
  void next() {
    ++index;
    begin = end;
    end = std::min(n, end + cell_cols);
  }
};

// How the portable and AVX2 cell sums end a cell: its last elements [k, end), fewer than
// kSumLanes, into lanes 0, 1, ... of its partial sums ae and ax, then its two totals.
FP8WB_INLINE void finish_cell(const float* __restrict__ e, const float* __restrict__ x, int64_t k,
                              int64_t end, double* ae, double* ax, double& cell_err,
                              double& cell_sq) {
  for (int l = 0; k < end; ++k, ++l) {
    const double de = e[k], dx = x[k];
    ae[l] += de * de;
    ax[l] += dx * dx;
  }
  cell_err = lane_total(ae);
  cell_sq = lane_total(ax);
}

// Cells of one element (narrow tensors' maps): the lane total of one square is the
// square itself, exactly.
inline bool one_element_cells(const float* __restrict__ e, const float* __restrict__ x, int64_t n,
                              int64_t first_len, int64_t cell_cols, double* __restrict__ cell_err,
                              double* __restrict__ cell_sq) {
  if (first_len != 1 || (cell_cols != 1 && n > 1)) return false;
  for (int64_t k = 0; k < n; ++k) {
    const double de = e[k], dx = x[k];
    cell_err[k] = de * de;
    cell_sq[k] = dx * dx;
  }
  return true;
}

// The loops, declared for their callers (the definitions' pointers are __restrict__).
// The portable loops (quantize_cpu_portable.cpp), defined with FP8WB_TARGET_CLONES or
// FP8WB_TARGET_CLONES_512: declared here without the attribute, which would make every
// caller emit a resolver of its own.
template <class In>
uint32_t finite_amax_bits(const In* p, int64_t n);
template <Format F, Overflow ov, bool kCodes, bool kDequant, class In>
uint32_t segment_stats_loop(const In* in, uint8_t* out, float* dequant, float* err, float* sq,
                            uint8_t* bins, int64_t n, float scale, float scale_inv,
                            SegmentCounts& c);
void cell_sums(const float* e, const float* x, int64_t n, int64_t first_len, int64_t cell_cols,
               double* cell_err, double* cell_sq);
// How far ahead of their element the quantize loops prefetch their input, in bytes (0: they
// do not). The processors' own prefetchers do not run far enough ahead of loops that spend
// tens of cycles on a cache line. A build may set FP8WB_CPU_PREFETCH_BYTES (CMake's option
// of that name) for a processor whose memory wants another distance.
#ifndef FP8WB_CPU_PREFETCH_BYTES
#define FP8WB_CPU_PREFETCH_BYTES 4096
#endif
constexpr uintptr_t kPrefetchBytes = FP8WB_CPU_PREFETCH_BYTES;
static_assert(kPrefetchBytes == 0 || kPrefetchBytes >= 2048,
              "the codes loop prefetches a 1 KiB chunk at least a chunk past its end");

template <Format F, Overflow ov, class In>
void segment_codes_loop(const In* in, uint8_t* out, int64_t n, float scale);

// The figures of format F under overflow mode ov that the statistics loops (portable,
// AVX2, AVX-512) compute with, defined once so that the loops agree to the bit. Values
// are fp32 bit patterns.
template <Format F, Overflow ov>
struct LoopConstants {
  static constexpr CodecSpec s = codec_spec(F);
  static constexpr int emin = 1 - s.bias;
  // A normal magnitude code is |x * scale|'s bits less rebias, rounded to nearest even at
  // bit `shift` (adding round_half and the bit itself) and shifted right by `shift`.
  static constexpr int shift = 23 - s.mbits;
  static constexpr uint32_t round_half = (1u << (shift - 1)) - 1u;
  static constexpr uint32_t rebias = static_cast<uint32_t>(127 - s.bias) << 23;
  // 2^emin: |x * scale| below it rounds to a subnormal code, in units of sub_unit (a
  // product by to_sub_units counts them).
  static constexpr uint32_t min_normal_bits = static_cast<uint32_t>(emin + 127) << 23;
  static constexpr uint32_t to_sub_units_bits = static_cast<uint32_t>(127 + s.mbits - emin) << 23;
  static constexpr uint32_t sub_unit_bits = static_cast<uint32_t>(127 + emin - s.mbits) << 23;
  static constexpr bool ieee_over = ov == Overflow::Ieee && s.nan != NanRule::None;
  // An IEEE overflow's code decodes to Inf (E5M2) or NaN: its error is that value's.
  // The values of the NaN codes (what a NaN x * scale encodes to), by the sign of x * scale.
  static constexpr uint32_t nan_value_pos = decode_bits(codec_detail::nan_code(s, false), s);
  static constexpr uint32_t nan_value_neg = decode_bits(codec_detail::nan_code(s, true), s);
  static constexpr uint32_t over_value_pos = s.has_inf ? 0x7F800000u : nan_value_pos;
  static constexpr uint32_t over_value_neg = s.has_inf ? 0xFF800000u : nan_value_neg;
  // Whether a NaN code carries the sign of x * scale (else there is one NaN code).
  static constexpr bool nan_follows_sign =
      s.nan == NanRule::MantissaAllOnes || s.nan == NanRule::Ieee || s.nan == NanRule::None;
};

// Whether segment_stats_avx2() may take its shortcuts with this scale pair: x * scale is
// zero for a zero x and NaN or infinite for a non-finite one (a finite scale), and the
// smallest nonzero value times scale_inv is not zero (so no nonzero code dequantizes to 0).
template <Format F>
bool avx2_scales_ok(float scale, float scale_inv) {
  constexpr CodecSpec s = codec_spec(F);
  const float min_sub = bits_float(static_cast<uint32_t>(127 + 1 - s.bias - s.mbits) << 23);
  return std::isfinite(scale) && std::isfinite(scale_inv) && min_sub * scale_inv != 0.0f;
}

#if defined(FP8WB_HAVE_AVX2_PATH)
// The AVX2 loops (quantize_cpu_avx2.cpp).
template <Format F, Overflow ov, bool kCodes, bool kDequant, class In>
FP8WB_AVX2 uint32_t segment_stats_avx2(const In* in, uint8_t* out, float* dequant, float* err_out,
                                       float* sq_out, uint8_t* bins, int64_t n, float scale,
                                       float scale_inv, SegmentCounts& c);
FP8WB_AVX2 void cell_sums_avx2(const float* e, const float* x, int64_t n, int64_t first_len,
                               int64_t cell_cols, double* cell_err, double* cell_sq);

// The AVX-512 loops (quantize_cpu_avx512.cpp). segment_stats_avx512() returns
// kRedoSegment, having counted nothing, for a segment that must go through the loops
// whose order is the portable one.
constexpr uint32_t kRedoSegment = 0xFFFFFFFFu;
template <Format F, Overflow ov, bool kCodes, bool kDequant, class In>
FP8WB_AVX512 uint32_t segment_stats_avx512(const In* in, uint8_t* out, float* dequant,
                                           uint8_t* bins, int64_t n, int64_t first_len,
                                           int64_t cell_cols, double* cell_err, double* cell_sq,
                                           float scale, float scale_inv, SegmentCounts& c);
template <Format F>
FP8WB_AVX512 void count_fields_avx512(const uint8_t* bins, int64_t n, RawHistogram& raw);
template <Format F>
FP8WB_AVX512_GFNI void count_fields_gfni(const uint8_t* bins, int64_t n, RawHistogram& raw);
#endif

// One segment's work (quantize_cpu_segment.cpp): [c0, c1) of row r, all with one scale,
// by the loop CpuStatsPath picks, into the chunk's accumulators.
using SegmentFn = void (*)(const TensorRef&, int64_t, int64_t, int64_t, float, float, Overflow,
                           const float*, uint8_t*, uint8_t*, float*, int64_t, const StatsOptions&,
                           const MapGrid&, Accum&, Scratch&);
SegmentFn segment_fn(Format f);

// The loops' instances, each file's made where it is defined: M(F, ov, kCodes, kDequant,
// In) for every statistics loop a segment may take (every element format of
// dispatch_element_format(), both overflow modes, codes and dequantized values, codes
// only, or neither, fp32 or bf16 input); M(F, ov, In) for every codes-only loop; M(F) for
// every loop of one format alone. The formats are dispatch_element_format()'s: one added
// there and not here leaves its loops undefined, and the library fails to link.
// clang-format off
#define FP8WB_LOOPS_BY_INPUT(M, ...) M(__VA_ARGS__, float) M(__VA_ARGS__, uint16_t)
#define FP8WB_STATS_LOOPS_BY_OUTPUT(M, F, O) \
  FP8WB_LOOPS_BY_INPUT(M, F, O, true, true) \
  FP8WB_LOOPS_BY_INPUT(M, F, O, true, false) \
  FP8WB_LOOPS_BY_INPUT(M, F, O, false, false)
#define FP8WB_STATS_LOOPS_BY_OVERFLOW(M, F) \
  FP8WB_STATS_LOOPS_BY_OUTPUT(M, F, Overflow::Saturate) \
  FP8WB_STATS_LOOPS_BY_OUTPUT(M, F, Overflow::Ieee)
#define FP8WB_CODES_LOOPS_BY_OVERFLOW(M, F) \
  FP8WB_LOOPS_BY_INPUT(M, F, Overflow::Saturate) \
  FP8WB_LOOPS_BY_INPUT(M, F, Overflow::Ieee)
#define FP8WB_FOR_EACH_ELEMENT_FORMAT(M, BY) \
  BY(M, Format::E4M3FN) BY(M, Format::E5M2) BY(M, Format::E4M3FNUZ) BY(M, Format::E5M2FNUZ) \
  BY(M, Format::E2M1FN) BY(M, Format::E3M2FN) BY(M, Format::E2M3FN)
#define FP8WB_FOR_EACH_STATS_LOOP(M) FP8WB_FOR_EACH_ELEMENT_FORMAT(M, FP8WB_STATS_LOOPS_BY_OVERFLOW)
#define FP8WB_FOR_EACH_CODES_LOOP(M) FP8WB_FOR_EACH_ELEMENT_FORMAT(M, FP8WB_CODES_LOOPS_BY_OVERFLOW)
#define FP8WB_LOOP_OF_FORMAT(M, F) M(F)
#define FP8WB_FOR_EACH_FORMAT_LOOP(M) FP8WB_FOR_EACH_ELEMENT_FORMAT(M, FP8WB_LOOP_OF_FORMAT)
// clang-format on

}  // namespace quantize_cpu_detail
}  // namespace fp8wb
