// The portable loops of the CPU quantize pass: the statistics loop (also the AVX2 loop's
// tail), the fp64 cell sums, the finite amax and the codes-only loop. Plain C++ that GCC
// vectorises, built for each processor level as a target clone (cpu_target.h).
#include <algorithm>
#include <cstdint>

#include "quantize_cpu_internal.h"

namespace fp8wb {
namespace quantize_cpu_detail {

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

// The hot loop: codes (when asked for), counters, the error terms that the map and the
// sums add up afterwards, the histogram bin of each element, and the dequantized value.
// Every fact comes from the rounding bits and a few compares, and the value of the
// rounded magnitude is computed instead of looked up, so that the loop vectorises (no
// gather, no branch): every floating-point operation runs unconditionally and every
// choice is a select on integers (GCC keeps FP operations that might trap out of
// if-conversion). The overflow mode is a template parameter for the same reason.
// Codes equal encode_rne_bits(); counters and terms equal the definitions in
// numerics.md ("Statistics") with decode(code) * scale_inv as the dequantized value.
// Returns how many elements are non-finite or overflowed to an Inf/NaN code: the caller
// takes their dequantized values from the table.
template <Format F, Overflow ov, bool kCodes, bool kDequant, class In>
FP8WB_TARGET_CLONES uint32_t segment_stats_loop(const In* __restrict__ in,
                                                uint8_t* __restrict__ out,
                                                float* __restrict__ dequant,
                                                float* __restrict__ err, float* __restrict__ sq,
                                                uint8_t* __restrict__ bins, int64_t n, float scale,
                                                float scale_inv, SegmentCounts& c) {
  using K = LoopConstants<F, ov>;
  constexpr CodecSpec s = K::s;
  const float to_sub_units = bits_float(K::to_sub_units_bits);
  const float sub_unit = bits_float(K::sub_unit_bits);
  uint32_t zeros = 0, nonfinite = 0, underflow = 0, subnormal = 0, saturated = 0, special = 0,
           amax = c.amax;
  for (int64_t j = 0; j < n; ++j) {
    const float v = widen(in[j]);
    const uint32_t a = float_bits(v) & 0x7FFFFFFFu;
    const uint32_t finite = a < 0x7F800000u;
    const uint32_t u = float_bits(v * scale);
    const uint32_t sign = u & 0x80000000u;
    const uint32_t ya = u & 0x7FFFFFFFu;
    const uint32_t t = ya - K::rebias;
    const uint32_t q_norm = (t + K::round_half + ((t >> K::shift) & 1u)) >> K::shift;
    const uint32_t q_sub = float_bits(bits_float(ya) * to_sub_units + 8388608.0f) - 0x4B000000u;
    const uint32_t rounded = ya >= K::min_normal_bits ? q_norm : q_sub;
    const uint32_t over = rounded > s.max_mag;
    const uint32_t mag = over ? uint32_t{s.max_mag} : rounded;
    const uint32_t normal = (mag >> s.mbits) != 0;
    const uint32_t normal_bits = (mag << K::shift) + K::rebias;
    const uint32_t sub_bits = float_bits(static_cast<float>(static_cast<int32_t>(mag)) * sub_unit);
    // The code's sign survives unless the magnitude is zero in a format without -0.
    const uint32_t code_sign = (s.has_neg_zero || mag != 0) ? sign : 0u;
    uint32_t value_bits = (normal ? normal_bits : sub_bits) | code_sign;
    const uint32_t nan_value = sign ? K::nan_value_neg : K::nan_value_pos;
    if constexpr (K::ieee_over)
      value_bits = over ? (s.has_inf ? 0x7F800000u | sign : nan_value) : value_bits;
    value_bits = ya > 0x7F800000u ? nan_value : value_bits;
    const float dq = bits_float(value_bits) * scale_inv;
    const float e = v - dq;
    const uint32_t dq_zero = (float_bits(dq) & 0x7FFFFFFFu) == 0;
    if constexpr (kCodes) {
      uint32_t unused = 0;
      out[j] = encode_rne_bits_mag(u, s, ov, unused);
    }
    if constexpr (kDequant) dequant[j] = dq;
    special += (finite ^ 1u) | (K::ieee_over ? over : 0u);
    zeros += a == 0;
    nonfinite += finite ^ 1u;
    underflow += finite & (a != 0) & dq_zero;
    subnormal += finite & (mag != 0) & (normal ^ 1u);
    saturated += finite & over;
    amax = std::max(amax, a & (0u - finite));  // finite values only
    err[j] = bits_float(finite ? float_bits(e) : 0u);
    sq[j] = bits_float(finite ? a | (float_bits(v) & 0x80000000u) : 0u);
    bins[j] = static_cast<uint8_t>(ya >> 23);  // see RawHistogram
  }
  c.zeros += zeros;
  c.nonfinite += nonfinite;
  c.underflow += underflow;
  c.subnormal += subnormal;
  c.saturated += saturated;
  c.amax = amax;
  return special;
}

void cell_sums(const float* __restrict__ e, const float* __restrict__ x, int64_t n,
               int64_t first_len, int64_t cell_cols, double* __restrict__ cell_err,
               double* __restrict__ cell_sq) {
  if (one_element_cells(e, x, n, first_len, cell_cols, cell_err, cell_sq)) return;
  for (CellWalk c(n, first_len, cell_cols); c.more(); c.next()) {
    double ae[kSumLanes] = {}, ax[kSumLanes] = {};
    int64_t k = c.begin;
    for (; k + kSumLanes <= c.end; k += kSumLanes) {
      for (int l = 0; l < kSumLanes; ++l) {
        const double de = e[k + l], dx = x[k + l];
        ae[l] += de * de;
        ax[l] += dx * dx;
      }
    }
    finish_cell(e, x, k, c.end, ae, ax, cell_err[c.index], cell_sq[c.index]);
  }
}

template <Format F, Overflow ov, class In>
FP8WB_TARGET_CLONES_512 void segment_codes_loop(const In* __restrict__ in,
                                                uint8_t* __restrict__ out, int64_t n, float scale) {
  constexpr CodecSpec s = codec_spec(F);
  if constexpr (kPrefetchBytes == 0) {
    for (int64_t j = 0; j < n; ++j)
      out[j] = encode_rne_bits(float_bits(widen(in[j]) * scale), s, ov);
  } else {
    // 1 KiB of input at a time, its lines kPrefetchBytes ahead prefetched first, the inner
    // loop long enough for the compiler to vectorise. A prefetch never faults.
    constexpr int64_t kChunk = 1024 / sizeof(In);
    for (int64_t b = 0; b < n; b += kChunk) {
      const int64_t e = std::min(n, b + kChunk);
      const char* ahead = reinterpret_cast<const char*>(in + b) + kPrefetchBytes;
      for (int64_t line = 0; line < 1024; line += 64) __builtin_prefetch(ahead + line, 0, 3);
      for (int64_t j = b; j < e; ++j)
        out[j] = encode_rne_bits(float_bits(widen(in[j]) * scale), s, ov);
    }
  }
}

template uint32_t finite_amax_bits(const float* __restrict__, int64_t);
template uint32_t finite_amax_bits(const uint16_t* __restrict__, int64_t);
#define FP8WB_INSTANCE(F, O, C, D, In) \
  template decltype(segment_stats_loop<F, O, C, D, In>) segment_stats_loop<F, O, C, D, In>;
FP8WB_FOR_EACH_STATS_LOOP(FP8WB_INSTANCE)
#undef FP8WB_INSTANCE
#define FP8WB_INSTANCE(F, O, In) \
  template decltype(segment_codes_loop<F, O, In>) segment_codes_loop<F, O, In>;
FP8WB_FOR_EACH_CODES_LOOP(FP8WB_INSTANCE)
#undef FP8WB_INSTANCE

}  // namespace quantize_cpu_detail
}  // namespace fp8wb
