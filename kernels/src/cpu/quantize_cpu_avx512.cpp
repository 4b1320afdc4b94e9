// The AVX-512 loops of the CPU quantize pass: the statistics loop sixteen elements a step
// with the error map's cell sums, and the histogram's field counts, bit for bit the
// portable loops' results. Built for AVX-512 F/BW/VL/DQ by target attributes;
// quantize_segment() calls them only where the processor has all four (CpuStatsPath).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "quantize_cpu_internal.h"

#if defined(FP8WB_HAVE_AVX2_PATH)
namespace fp8wb {
namespace quantize_cpu_detail {

// lane_total() of the sixteen lanes lo (0-7) and hi (8-15) with the same adds, in vector
// registers: lane l + lane l + 8, then l + 4 (the halves of a 512-bit register), then l + 2
// (of a 256-bit one), then lane 0 + lane 1.
FP8WB_AVX512 FP8WB_INLINE double lane_total_avx512(__m512d lo, __m512d hi) {
  const __m512d t8 = _mm512_add_pd(lo, hi);
  const __m256d t4 = _mm256_add_pd(_mm512_castpd512_pd256(t8), _mm512_extractf64x4_pd(t8, 1));
  const __m128d t2 = _mm_add_pd(_mm256_castpd256_pd128(t4), _mm256_extractf128_pd(t4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(t2, _mm_unpackhi_pd(t2, t2)));
}

// The mask of the first i of sixteen lanes, i = 0 to 16.
alignas(64) constexpr __mmask16 kLiveLanes[17] = {0x0000, 0x0001, 0x0003, 0x0007, 0x000F, 0x001F,
                                                  0x003F, 0x007F, 0x00FF, 0x01FF, 0x03FF, 0x07FF,
                                                  0x0FFF, 0x1FFF, 0x3FFF, 0x7FFF, 0xFFFF};

// segment_stats_loop() sixteen elements a step with AVX-512 (F, BW, VL, DQ), with the error
// map's cell sums in the same step: the loop walks the segment cell by cell (the first
// `first_len` elements, then `cell_cols` at a time), sixteen elements from the cell's start
// at a time, the last step of a cell under a mask, and adds each element's fp64 square into
// lane k % 16 of its cell's sixteen partial sums in element order (as cell_sums() does; a
// square of an fp32 value is exact in fp64, so a fused multiply-add rounds once, like the
// add) and totals them as lane_total() does. Lanes past the cell are loaded as +0, whose
// error and square are +0 (adding them leaves a sum of squares as it is) and which the
// zero, underflow and subnormal counts take in alike: the zero count drops them at the end
// (the other two are differences of those counts). Same shortcuts as segment_stats_avx2()
// (for a scale pair that avx2_scales_ok() accepts), plus: a subnormal code's value is
// 2 * v - 2^(1 - bias), v being the value of its bits read as a normal code (exact, one
// fused multiply-subtract). Each element's fp32 exponent field goes to `bins` (see
// RawHistogram). Two cases are rare and left to a loop whose order is the portable one
// (the loop returns kRedoSegment without counting anything): a non-finite x * scale
// (a non-finite x, which takes no part in the sums and amax), and, where an IEEE overflow
// turns a finite x's error into a NaN, any overflow (which NaN a sum ends with depends on
// the order of the operands in each add).
template <Format F, Overflow ov, bool kCodes, bool kDequant, class In>
FP8WB_AVX512 uint32_t segment_stats_avx512(const In* __restrict__ in, uint8_t* __restrict__ out,
                                           float* __restrict__ dequant, uint8_t* __restrict__ bins,
                                           int64_t n, int64_t first_len, int64_t cell_cols,
                                           double* __restrict__ cell_err,
                                           double* __restrict__ cell_sq, float scale,
                                           float scale_inv, SegmentCounts& c) {
  using K = LoopConstants<F, ov>;
  constexpr CodecSpec s = K::s;
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i sign_mask = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  // (ya - rebias + round_half + lsb) >> shift, with rebias a multiple of 2^23 > 2^shift:
  // the lsb of (ya - rebias) >> shift is that of ya >> shift.
  const __m512i round_add = _mm512_set1_epi32(static_cast<int>(K::round_half - K::rebias));
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i lsb = _mm512_set1_epi32(1 << K::shift);
  const __m512i below_normal = _mm512_set1_epi32(static_cast<int>(K::min_normal_bits) - 1);
  const __m512 to_sub_units = _mm512_set1_ps(bits_float(K::to_sub_units_bits));
  const __m512i max_mag = _mm512_set1_epi32(s.max_mag);
  const __m512i first_normal_mag = _mm512_set1_epi32(1 << s.mbits);
  const __m512i v_rebias = _mm512_set1_epi32(static_cast<int>(K::rebias));
  const __m512 two = _mm512_set1_ps(2.0f);
  const __m512 sub_offset = _mm512_set1_ps(bits_float(K::min_normal_bits));  // 2^(1 - bias)
  const __m512 v_scale = _mm512_set1_ps(scale);
  const __m512 v_scale_inv = _mm512_set1_ps(scale_inv);
  const __m512i over_value_pos = _mm512_set1_epi32(static_cast<int>(K::over_value_pos));
  const __m512i over_value_neg = _mm512_set1_epi32(static_cast<int>(K::over_value_neg));
  const __m512i code_sign_bit = _mm512_set1_epi32(1 << (s.bits - 1));
  const __m512i nan_code = _mm512_set1_epi32(s.nan_code);
  const __m512i over_code = _mm512_set1_epi32(s.max_mag + 1);
  __m512i x_zeros = _mm512_setzero_si512(), overs = x_zeros, small = x_zeros, mag_zeros = x_zeros;
  __m512 amax = _mm512_set1_ps(bits_float(c.amax));
  __m512i y_max = _mm512_setzero_si512();
  __mmask16 any_overflow = 0;
  int64_t steps = 0;
  // One loop over the steps of all cells (a loop per cell made the compiler load the
  // constants again at each cell's start): a cell's last step ends at its end, then its
  // totals are stored and the next cell starts.
  __m512d se_lo = _mm512_setzero_pd(), se_hi = se_lo, sx_lo = se_lo, sx_hi = se_lo;
  CellWalk cw(n, first_len, cell_cols);
  for (int64_t k = 0; k < n;) {
    const int64_t end = cw.end;
    {
      // From memory: a mask register loaded takes no vector port, one moved from a general
      // register does.
      const __mmask16 live = kLiveLanes[std::min<int64_t>(end - k, 16)];
      __m512 v;
      if constexpr (std::is_same_v<In, float>) {
        v = _mm512_maskz_loadu_ps(live, in + k);
      } else {
        const __m256i h = _mm256_maskz_loadu_epi16(live, in + k);
        v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
      }
      // The input kPrefetchBytes ahead: without it the loop waits on its loads (on the
      // development machine 2048 to 8192 bytes ran alike, 1024 was slower, none 1.3x
      // slower). A prefetch never faults, past the input's end included.
      if constexpr (kPrefetchBytes > 0) {
        _mm_prefetch(
            reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(in + k) + kPrefetchBytes),
            _MM_HINT_T0);
      }
      ++steps;
      const __m512i vi = _mm512_castps_si512(v);
      const __mmask16 x_zero = _mm512_testn_epi32_mask(vi, abs_mask);
      const __m512i u = _mm512_castps_si512(_mm512_mul_ps(v, v_scale));
      const __m512i ya = _mm512_and_si512(u, abs_mask);
      y_max = _mm512_max_epu32(y_max, ya);
      const __m512i biased = _mm512_add_epi32(ya, round_add);
      const __m512i q_norm = _mm512_srli_epi32(
          _mm512_mask_add_epi32(biased, _mm512_test_epi32_mask(ya, lsb), biased, one), K::shift);
      // The conversion rounds to nearest even, as the portable loop's 2^23 addition does.
      const __m512i q_sub =
          _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(ya), to_sub_units));
      const __m512i rounded =
          _mm512_mask_mov_epi32(q_sub, _mm512_cmpgt_epu32_mask(ya, below_normal), q_norm);
      const __mmask16 over = _mm512_cmpgt_epu32_mask(rounded, max_mag);
      if constexpr (K::ieee_over && !s.has_inf) any_overflow = _kor_mask16(any_overflow, over);
      const __m512i mag = _mm512_min_epu32(rounded, max_mag);
      const __mmask16 sub_or_zero = _mm512_cmplt_epu32_mask(mag, first_normal_mag);
      const __mmask16 mag_zero = _mm512_testn_epi32_mask(mag, mag);
      x_zeros = _mm512_mask_add_epi32(x_zeros, x_zero, x_zeros, one);
      overs = _mm512_mask_add_epi32(overs, over, overs, one);
      small = _mm512_mask_add_epi32(small, sub_or_zero, small, one);
      mag_zeros = _mm512_mask_add_epi32(mag_zeros, mag_zero, mag_zeros, one);
      amax = _mm512_range_ps(amax, v, 0x0B);  // max of |.|, sign cleared
      __m512 value =
          _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(mag, K::shift), v_rebias));
      value = _mm512_mask_fmsub_ps(value, sub_or_zero, two, sub_offset);
      __m512i value_bits = _mm512_castps_si512(value);
      // The code's sign survives unless the magnitude is zero in a format without -0.
      if constexpr (s.has_neg_zero) {
        value_bits = _mm512_ternarylogic_epi32(value_bits, u, sign_mask, 0xF8);  // a | (b & c)
      } else {
        value_bits =
            _mm512_mask_ternarylogic_epi32(value_bits, _knot_mask16(mag_zero), u, sign_mask, 0xF8);
      }
      const __mmask16 negative = _mm512_movepi32_mask(u);
      if constexpr (K::ieee_over) {
        value_bits = _mm512_mask_mov_epi32(
            value_bits, over, _mm512_mask_blend_epi32(negative, over_value_pos, over_value_neg));
      }
      __m512 dq = _mm512_mul_ps(_mm512_castsi512_ps(value_bits), v_scale_inv);
      // The error is x minus the rounded product: keep the compiler from contracting the
      // two into one fused multiply-subtract.
      asm("" : "+v"(dq));
      if constexpr (kDequant) _mm512_mask_storeu_ps(dequant + k, live, dq);
      const __m512 e = _mm512_sub_ps(v, dq);
      const __m512 x = v;
      const __m512d e_lo = _mm512_cvtps_pd(_mm512_castps512_ps256(e));
      const __m512d e_hi =
          _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
      const __m512d x_lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
      const __m512d x_hi =
          _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
      // Lanes 0-7 and 8-15 of the sums. The sums' NaNs (IEEE overflows) never get here.
      se_lo = _mm512_fmadd_pd(e_lo, e_lo, se_lo);
      se_hi = _mm512_fmadd_pd(e_hi, e_hi, se_hi);
      sx_lo = _mm512_fmadd_pd(x_lo, x_lo, sx_lo);
      sx_hi = _mm512_fmadd_pd(x_hi, x_hi, sx_hi);
      _mm_mask_storeu_epi8(bins + k, live, _mm512_cvtepi32_epi8(_mm512_srli_epi32(ya, 23)));
      if constexpr (kCodes) {
        __m512i code =
            _mm512_ternarylogic_epi32(mag, _mm512_srli_epi32(u, 32 - s.bits), code_sign_bit, 0xF8);
        if constexpr (!s.has_neg_zero) code = _mm512_mask_mov_epi32(code, mag_zero, mag);
        if constexpr (K::ieee_over) {
          const __m512i sign_code = _mm512_maskz_mov_epi32(negative, code_sign_bit);
          const __m512i oc =
              s.has_inf ? _mm512_or_si512(over_code, sign_code)
                        : (K::nan_follows_sign ? _mm512_xor_si512(nan_code, sign_code) : nan_code);
          code = _mm512_mask_mov_epi32(code, over, oc);
        }
        _mm_mask_storeu_epi8(out + k, live, _mm512_cvtepi32_epi8(code));
      }
    }
    k += 16;
    if (k >= end) {
      cell_err[cw.index] = lane_total_avx512(se_lo, se_hi);
      cell_sq[cw.index] = lane_total_avx512(sx_lo, sx_hi);
      se_lo = se_hi = sx_lo = sx_hi = _mm512_setzero_pd();
      k = end;
      cw.next();
    }
  }
  if (any_overflow || static_cast<uint32_t>(_mm512_reduce_max_epu32(y_max)) >= 0x7F800000u)
    return kRedoSegment;
  const auto past_end = static_cast<uint32_t>(steps * 16 - n);
  const auto zeros = static_cast<uint32_t>(_mm512_reduce_add_epi32(x_zeros)) - past_end;
  const auto sat = static_cast<uint32_t>(_mm512_reduce_add_epi32(overs));
  const auto mag_zero_count = static_cast<uint32_t>(_mm512_reduce_add_epi32(mag_zeros));
  c.zeros += zeros;
  c.underflow += mag_zero_count - past_end - zeros;
  c.subnormal += static_cast<uint32_t>(_mm512_reduce_add_epi32(small)) - mag_zero_count;
  c.saturated += sat;
  c.amax = float_bits(_mm512_reduce_max_ps(amax));
  return K::ieee_over ? sat : 0u;
}

// The fields both counters below count by vector: zero, and the kCount fields up to one
// past the fp32 field of the format's largest finite value (whose exponent is
// (max_mag >> mbits) - bias), from lo to top.
template <Format F>
struct HotFields {
  static constexpr CodecSpec s = codec_spec(F);
  static constexpr int kCount = 15;
  static constexpr int top = 127 + (s.max_mag >> s.mbits) - s.bias + 1;
  static constexpr int lo = top - (kCount - 1);
  static_assert(lo > 0 && top < 255);
};

// One step of both counters over the fields [k, min(k + 64, stop)): the fields, their
// offsets from lo, which lie in the hot range, which are field 0; any other field (values
// far below the format's range, overflows past it, non-finite values) is counted here, one
// element at a time.
struct FieldStep {
  __m512i b, d;
  __mmask64 in_hot, zero;
};

FP8WB_AVX512 inline FieldStep field_step(const uint8_t* __restrict__ bins, int64_t k, int64_t stop,
                                         __m512i v_lo, __m512i v_span, RawHistogram& raw) {
  const __mmask64 live =
      stop - k >= 64 ? ~__mmask64{0} : static_cast<__mmask64>((uint64_t{1} << (stop - k)) - 1u);
  FieldStep f;
  f.b = _mm512_maskz_loadu_epi8(live, bins + k);
  f.d = _mm512_sub_epi8(f.b, v_lo);
  f.in_hot = _mm512_mask_cmple_epu8_mask(live, f.d, v_span);
  f.zero = _mm512_mask_testn_epi8_mask(live, f.b, f.b);
  uint64_t other = _cvtmask64_u64(live) & ~_cvtmask64_u64(_kor_mask64(f.in_hot, f.zero));
  for (; other; other &= other - 1) ++raw.field[bins[k + __builtin_ctzll(other)]];
  return f;
}

// The histogram's exponent fields of a segment (`bins`, one byte each) into raw.field,
// 64 at a time without a store per element: the sixteen fields where scaled values mostly
// lie (zero, and the fifteen up to one past the format's largest finite value) are counted
// by compares into byte counters, one per field and byte lane (added up before they could
// wrap); any other field (values far below the format's range, overflows past it,
// non-finite values) one element at a time.
template <Format F>
FP8WB_AVX512 void count_fields_avx512(const uint8_t* __restrict__ bins, int64_t n,
                                      RawHistogram& raw) {
  constexpr int kHot = HotFields<F>::kCount, lo = HotFields<F>::lo;
  const __m512i v_lo = _mm512_set1_epi8(static_cast<char>(lo));
  const __m512i v_span = _mm512_set1_epi8(kHot - 1);
  const __m512i minus_one = _mm512_set1_epi8(-1);
  int64_t k = 0;
  while (k < n) {
    __m512i count[kHot + 1];  // [kHot]: field 0
    for (auto& c : count) c = _mm512_setzero_si512();
    // At most 255 steps before the byte counters are added up.
    const int64_t stop = std::min(n, k + 255 * 64);
    for (; k < stop; k += 64) {
      const FieldStep st = field_step(bins, k, stop, v_lo, v_span, raw);
      count[kHot] = _mm512_mask_sub_epi8(count[kHot], st.zero, count[kHot], minus_one);
      for (int f = 0; f < kHot; ++f) {
        const __mmask64 m = _mm512_cmpeq_epi8_mask(st.d, _mm512_set1_epi8(static_cast<char>(f)));
        count[f] = _mm512_mask_sub_epi8(count[f], m, count[f], minus_one);
      }
    }
    for (int f = 0; f <= kHot; ++f) {
      const auto c = static_cast<uint64_t>(
          _mm512_reduce_add_epi64(_mm512_sad_epu8(count[f], _mm512_setzero_si512())));
      raw.field[static_cast<size_t>(f == kHot ? 0 : lo + f)] += c;
    }
  }
}

// count_fields_avx512() with GFNI and BITALG: the same fields counted without a compare
// per field. Each byte of a field in the hot range becomes one set bit (its bit in one of
// two bytes: fields lo to lo + 7, and lo + 8 to lo + 14 with field 0 as the eighth bit),
// an affine transform over GF(2) transposes each 8 x 8 bit block (eight bytes: bit j of
// byte i becomes bit i of byte j), and a byte's population count is then how many of those
// eight elements hold field lo + j: up to 8 per step into byte counters (added up after at
// most 31 steps, before they could wrap).
template <Format F>
FP8WB_AVX512_GFNI void count_fields_gfni(const uint8_t* __restrict__ bins, int64_t n,
                                         RawHistogram& raw) {
  constexpr int kHot = HotFields<F>::kCount, lo = HotFields<F>::lo;
  // Field 0 lies outside the hot range's offsets [0, kHot) (it would be 256 - lo).
  static_assert(256 - lo >= kHot);
  const __m512i v_lo = _mm512_set1_epi8(static_cast<char>(lo));
  const __m512i v_span = _mm512_set1_epi8(kHot - 1);
  // One bit per offset: offsets 0-7 in the first byte, 8-14 in the second (field 0: 0x80).
  const __m512i bit_lo =
      _mm512_broadcast_i32x4(_mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 0, 0, 0, 0, 0, 0, 0, 0));
  const __m512i bit_hi =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, 0));
  const __m512i zero_bit = _mm512_set1_epi8(-128);
  // Byte j of every quadword: bit j alone, which picks bit j of each of the block's bytes.
  const __m512i pick = _mm512_set1_epi64(static_cast<long long>(0x8040201008040201ull));
  int64_t k = 0;
  while (k < n) {
    __m512i count_lo = _mm512_setzero_si512(), count_hi = count_lo;
    const int64_t stop = std::min(n, k + 31 * 64);
    for (; k < stop; k += 64) {
      const FieldStep st = field_step(bins, k, stop, v_lo, v_span, raw);
      const __m512i one_lo = _mm512_maskz_shuffle_epi8(st.in_hot, bit_lo, st.d);
      const __m512i one_hi = _mm512_mask_mov_epi8(
          _mm512_maskz_shuffle_epi8(st.in_hot, bit_hi, st.d), st.zero, zero_bit);
      count_lo = _mm512_add_epi8(
          count_lo, _mm512_popcnt_epi8(_mm512_gf2p8affine_epi64_epi8(pick, one_lo, 0)));
      count_hi = _mm512_add_epi8(
          count_hi, _mm512_popcnt_epi8(_mm512_gf2p8affine_epi64_epi8(pick, one_hi, 0)));
    }
    // Byte j of a quadword's transform holds bit j of its eight bytes: byte j of the
    // eight quadwords added up as 16-bit sums (at most 8 * 248), each quadword widened to a
    // 128-bit lane, then the lanes folded: count_lo's in words 0-7, count_hi's in 16-23.
    const __m512i w_lo =
        _mm512_add_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(count_lo)),
                         _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(count_lo, 1)));
    const __m512i w_hi =
        _mm512_add_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(count_hi)),
                         _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(count_hi, 1)));
    const __m512i t = _mm512_add_epi16(_mm512_shuffle_i64x2(w_lo, w_hi, 0x44),
                                       _mm512_shuffle_i64x2(w_lo, w_hi, 0xEE));
    alignas(64) uint16_t sum[32];
    _mm512_store_si512(sum, _mm512_add_epi16(t, _mm512_shuffle_i64x2(t, t, 0xB1)));
    for (int j = 0; j < 8; ++j) {
      raw.field[static_cast<size_t>(lo + j)] += sum[j];
      raw.field[static_cast<size_t>(j == 7 ? 0 : lo + 8 + j)] += sum[16 + j];
    }
  }
}

#define FP8WB_INSTANCE(F, O, C, D, In) \
  template decltype(segment_stats_avx512<F, O, C, D, In>) segment_stats_avx512<F, O, C, D, In>;
FP8WB_FOR_EACH_STATS_LOOP(FP8WB_INSTANCE)
#undef FP8WB_INSTANCE
#define FP8WB_INSTANCE(F)                                           \
  template decltype(count_fields_avx512<F>) count_fields_avx512<F>; \
  template decltype(count_fields_gfni<F>) count_fields_gfni<F>;
FP8WB_FOR_EACH_FORMAT_LOOP(FP8WB_INSTANCE)
#undef FP8WB_INSTANCE

}  // namespace quantize_cpu_detail
}  // namespace fp8wb
#endif
