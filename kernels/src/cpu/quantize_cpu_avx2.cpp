// The AVX2 loops of the CPU quantize pass: the statistics loop eight elements a step and
// the fp64 cell sums in four registers, bit for bit the portable loops' results. Built
// for AVX2 by target attributes; quantize_segment() calls them only where the processor
// has AVX2 (CpuStatsPath).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "quantize_cpu_internal.h"

#if defined(FP8WB_HAVE_AVX2_PATH)
namespace fp8wb {
namespace quantize_cpu_detail {

#define FP8WB_AVX2_INLINE __attribute__((target("avx2"), always_inline)) inline

template <class In>
FP8WB_AVX2_INLINE __m256 load8(const In* p) {
  if constexpr (std::is_same_v<In, float>) {
    return _mm256_loadu_ps(p);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

FP8WB_AVX2_INLINE uint32_t hsum_epi32(__m256i v) {
  alignas(32) uint32_t l[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), v);
  uint32_t t = 0;
  for (uint32_t x : l) t += x;
  return t;
}

// segment_stats_loop() eight elements at a time with AVX2 intrinsics: the same operations
// on the same values, so the same bits out (codes, dequantized values, counters, error
// terms). The last n % 8 elements go through segment_stats_loop() itself. Counters are
// per-lane masks subtracted from a lane count. For a scale pair that avx2_scales_ok()
// accepts, some facts come cheaper than their definitions: a dequantized value is zero
// exactly when its magnitude code is; a zero x has a zero magnitude; a non-finite x
// rounds past the top (so counts as "over" and as normal). Non-finite x are rare: the
// loop leaves their codes, error terms, squares and amax alone, and a scalar pass puts
// them right where the segment has any.
template <Format F, Overflow ov, bool kCodes, bool kDequant, class In>
FP8WB_AVX2 uint32_t segment_stats_avx2(const In* __restrict__ in, uint8_t* __restrict__ out,
                                       float* __restrict__ dequant, float* __restrict__ err_out,
                                       float* __restrict__ sq_out, uint8_t* __restrict__ bins,
                                       int64_t n, float scale, float scale_inv, SegmentCounts& c) {
  using K = LoopConstants<F, ov>;
  constexpr CodecSpec s = K::s;
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i inf_bits = _mm256_set1_epi32(0x7F800000);
  const __m256i v_rebias = _mm256_set1_epi32(static_cast<int>(K::rebias));
  const __m256i half = _mm256_set1_epi32(static_cast<int>(K::round_half));
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i below_normal = _mm256_set1_epi32(static_cast<int>(K::min_normal_bits) - 1);
  const __m256 to_sub_units = _mm256_set1_ps(bits_float(K::to_sub_units_bits));
  const __m256i max_mag = _mm256_set1_epi32(s.max_mag);
  const __m256i below_normal_mag = _mm256_set1_epi32((1 << s.mbits) - 1);
  const __m256 sub_unit = _mm256_set1_ps(bits_float(K::sub_unit_bits));
  const __m256 v_scale = _mm256_set1_ps(scale);
  const __m256 v_scale_inv = _mm256_set1_ps(scale_inv);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i over_value_pos = _mm256_set1_epi32(static_cast<int>(K::over_value_pos));
  const __m256i over_value_neg = _mm256_set1_epi32(static_cast<int>(K::over_value_neg));
  const __m256i nan_code = _mm256_set1_epi32(s.nan_code);
  const __m256i over_code = _mm256_set1_epi32(s.max_mag + 1);
  const __m256i pack_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i zeros = zero, finite_count = zero, mag_zeros = zero, normal_or_zero = zero, overs = zero;
  __m256i amax = _mm256_set1_epi32(static_cast<int>(c.amax));
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 v = load8(in + k);
    // The input kPrefetchBytes ahead: as the AVX-512 loop, this one otherwise waits on its
    // loads. A prefetch never faults, past the input's end included.
    if constexpr (kPrefetchBytes > 0) {
      _mm_prefetch(
          reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(in + k) + kPrefetchBytes),
          _MM_HINT_T0);
    }
    const __m256i vi = _mm256_castps_si256(v);
    const __m256i a = _mm256_and_si256(vi, abs_mask);
    const __m256i fin = _mm256_cmpgt_epi32(inf_bits, a);
    const __m256i u = _mm256_castps_si256(_mm256_mul_ps(v, v_scale));
    const __m256i sign = _mm256_andnot_si256(abs_mask, u);
    const __m256i ya = _mm256_and_si256(u, abs_mask);
    const __m256i t = _mm256_sub_epi32(ya, v_rebias);
    const __m256i q_norm =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(t, half),
                                           _mm256_and_si256(_mm256_srli_epi32(t, K::shift), one)),
                          K::shift);
    // The conversion rounds to nearest even, as the portable loop's 2^23 addition does.
    const __m256i q_sub = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(ya), to_sub_units));
    const __m256i rounded = _mm256_blendv_epi8(q_sub, q_norm, _mm256_cmpgt_epi32(ya, below_normal));
    const __m256i over = _mm256_cmpgt_epi32(rounded, max_mag);
    const __m256i mag = _mm256_min_epi32(rounded, max_mag);
    const __m256i normal = _mm256_cmpgt_epi32(mag, below_normal_mag);
    const __m256i mag_zero = _mm256_cmpeq_epi32(mag, zero);
    const __m256i normal_bits = _mm256_add_epi32(_mm256_slli_epi32(mag, K::shift), v_rebias);
    const __m256i sub_bits = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(mag), sub_unit));
    const __m256i code_sign = s.has_neg_zero ? sign : _mm256_andnot_si256(mag_zero, sign);
    __m256i value = _mm256_or_si256(_mm256_blendv_epi8(sub_bits, normal_bits, normal), code_sign);
    if constexpr (K::ieee_over) {
      // The sign bit of each lane picks (blendv_ps looks at bit 31 only).
      const __m256i over_value = _mm256_castps_si256(
          _mm256_blendv_ps(_mm256_castsi256_ps(over_value_pos), _mm256_castsi256_ps(over_value_neg),
                           _mm256_castsi256_ps(sign)));
      value = _mm256_blendv_epi8(value, over_value, over);
    }
    const __m256 dq = _mm256_mul_ps(_mm256_castsi256_ps(value), v_scale_inv);
    if constexpr (kDequant) _mm256_storeu_ps(dequant + k, dq);
    const __m256 e = _mm256_sub_ps(v, dq);
    const __m256i x_zero = _mm256_cmpeq_epi32(a, zero);
    zeros = _mm256_sub_epi32(zeros, x_zero);
    finite_count = _mm256_sub_epi32(finite_count, fin);
    mag_zeros = _mm256_sub_epi32(mag_zeros, mag_zero);  // underflows + zeros
    normal_or_zero = _mm256_sub_epi32(normal_or_zero, _mm256_or_si256(normal, mag_zero));
    overs = _mm256_sub_epi32(overs, over);  // saturated + non-finite
    amax = _mm256_max_epu32(amax, a);       // non-finite: redone below
    _mm256_storeu_ps(err_out + k, e);
    _mm256_storeu_ps(sq_out + k, v);
    const __m256i bin = _mm256_srli_epi32(ya, 23);  // see RawHistogram
    __m256i code = zero;
    if constexpr (kCodes) {
      code = _mm256_or_si256(mag, _mm256_srli_epi32(code_sign, 32 - s.bits));
      if constexpr (K::ieee_over) {
        const __m256i sign8 = _mm256_srli_epi32(sign, 32 - s.bits);
        const __m256i oc =
            s.has_inf ? _mm256_or_si256(over_code, sign8)
                      : (K::nan_follows_sign ? _mm256_xor_si256(nan_code, sign8) : nan_code);
        code = _mm256_blendv_epi8(code, oc, over);
      }
    }
    // Codes and bins to bytes: [codes 0-7, bins 0-7] in the low 16 bytes.
    const __m256i w = _mm256_packus_epi32(code, bin);
    const __m128i b =
        _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_packus_epi16(w, w), pack_order));
    if constexpr (kCodes) _mm_storel_epi64(reinterpret_cast<__m128i*>(out + k), b);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(bins + k), _mm_unpackhi_epi64(b, b));
  }
  const int64_t vector_elems = k;
  SegmentCounts tail;  // the last elements, through the portable loop
  tail.amax = c.amax;
  const uint32_t tail_special = segment_stats_loop<F, ov, kCodes, kDequant>(
      in + k, kCodes ? out + k : nullptr, kDequant ? dequant + k : nullptr, err_out + k, sq_out + k,
      bins + k, n - k, scale, scale_inv, tail);
  const auto count = static_cast<uint32_t>(vector_elems);
  const uint32_t nonfinite = count - hsum_epi32(finite_count);
  const uint32_t x_zeros = hsum_epi32(zeros);
  const uint32_t sat = hsum_epi32(overs) - nonfinite;
  alignas(32) uint32_t m[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(m), amax);
  uint32_t mx = tail.amax;
  for (uint32_t x : m) mx = std::max(mx, x);
  if (nonfinite > 0) {
    // Their codes (NaN, or the top), no error terms or squares, no part in amax.
    for (int64_t j = 0; j < vector_elems; ++j) {
      const float v = widen(in[j]);
      if ((float_bits(v) & 0x7FFFFFFFu) < 0x7F800000u) continue;
      err_out[j] = 0.0f;
      sq_out[j] = 0.0f;
      if constexpr (kCodes) out[j] = encode_rne_bits(float_bits(v * scale), s, ov);
    }
    mx = std::max(tail.amax, finite_amax_bits(in, vector_elems));
  }
  c.zeros += x_zeros + tail.zeros;
  c.nonfinite += nonfinite + tail.nonfinite;
  c.underflow += hsum_epi32(mag_zeros) - x_zeros + tail.underflow;
  c.subnormal += count - hsum_epi32(normal_or_zero) + tail.subnormal;
  c.saturated += sat + tail.saturated;
  c.amax = mx;
  return tail_special + nonfinite + (K::ieee_over ? sat : 0u);
}

// lane_total() of the sixteen lanes l[0] (lanes 0-3) to l[3] (12-15) with the same adds, in
// vector registers: lane i + lane i + 8, then i + 4, then i + 2, then lane 0 + lane 1.
FP8WB_AVX2 inline double lane_total_avx2(const __m256d* l) {
  const __m256d t4 = _mm256_add_pd(_mm256_add_pd(l[0], l[2]), _mm256_add_pd(l[1], l[3]));
  const __m128d t2 = _mm_add_pd(_mm256_castpd256_pd128(t4), _mm256_extractf128_pd(t4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(t2, _mm_unpackhi_pd(t2, t2)));
}

// cell_sums() with its sixteen fp64 lanes in four registers: element k of a cell into
// lane k % 16, in element order, the same additions in the same order, so the same bits.
// A cell's last elements (fewer than sixteen) go into their lanes from masked loads, the
// lanes past the cell's end adding +0 (which leaves a sum of squares as it is).
FP8WB_AVX2 void cell_sums_avx2(const float* __restrict__ e, const float* __restrict__ x, int64_t n,
                               int64_t first_len, int64_t cell_cols, double* __restrict__ cell_err,
                               double* __restrict__ cell_sq) {
  if (one_element_cells(e, x, n, first_len, cell_cols, cell_err, cell_sq)) return;
  for (CellWalk c(n, first_len, cell_cols); c.more(); c.next()) {
    __m256d se[4], sx[4];
    for (int q = 0; q < 4; ++q) se[q] = sx[q] = _mm256_setzero_pd();
    int64_t k = c.begin;
    for (; k + kSumLanes <= c.end; k += kSumLanes) {
      for (int q = 0; q < 4; ++q) {
        const __m256d de = _mm256_cvtps_pd(_mm_loadu_ps(e + k + 4 * q));
        const __m256d dx = _mm256_cvtps_pd(_mm_loadu_ps(x + k + 4 * q));
        se[q] = _mm256_add_pd(se[q], _mm256_mul_pd(de, de));
        sx[q] = _mm256_add_pd(sx[q], _mm256_mul_pd(dx, dx));
      }
    }
    {
      __m256d te4[4] = {se[0], se[1], se[2], se[3]}, tx4[4] = {sx[0], sx[1], sx[2], sx[3]};
      for (int q = 0; q < 4 && k + 4 * q < c.end; ++q) {
        const __m128i live = _mm_cmpgt_epi32(
            _mm_set1_epi32(static_cast<int>(std::min<int64_t>(c.end - k - 4 * q, 4))),
            _mm_setr_epi32(0, 1, 2, 3));
        const __m256d de = _mm256_cvtps_pd(_mm_maskload_ps(e + k + 4 * q, live));
        const __m256d dx = _mm256_cvtps_pd(_mm_maskload_ps(x + k + 4 * q, live));
        te4[q] = _mm256_add_pd(te4[q], _mm256_mul_pd(de, de));
        tx4[q] = _mm256_add_pd(tx4[q], _mm256_mul_pd(dx, dx));
      }
      // A NaN's sign and payload depend on the order of each add's operands, which the
      // compiler may swap in vector adds: NaN totals come from the scalar adds below.
      const double te = lane_total_avx2(te4), tx = lane_total_avx2(tx4);
      if (!std::isnan(te) && !std::isnan(tx)) {
        cell_err[c.index] = te;
        cell_sq[c.index] = tx;
        continue;
      }
    }
    alignas(32) double ae[kSumLanes], ax[kSumLanes];
    for (int q = 0; q < 4; ++q) {
      _mm256_store_pd(ae + 4 * q, se[q]);
      _mm256_store_pd(ax + 4 * q, sx[q]);
    }
    finish_cell(e, x, k, c.end, ae, ax, cell_err[c.index], cell_sq[c.index]);
  }
}

#define FP8WB_INSTANCE(F, O, C, D, In) \
  template decltype(segment_stats_avx2<F, O, C, D, In>) segment_stats_avx2<F, O, C, D, In>;
FP8WB_FOR_EACH_STATS_LOOP(FP8WB_INSTANCE)
#undef FP8WB_INSTANCE

}  // namespace quantize_cpu_detail
}  // namespace fp8wb
#endif
