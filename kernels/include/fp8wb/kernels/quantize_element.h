// defines: QuantizedElement, quantize_element(), hist_bin(), is_subnormal_code(): the
// per-element step of every quantize kernel (CPU and GPU): scale, encode, decode, and
// the facts the statistics count.
#pragma once

#include <cstdint>

#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/tensor_stats.h"

namespace fp8wb {

struct QuantizedElement {
  uint8_t code;
  bool finite;
  bool saturated;  // finite and clamped (or overflowed) at the top of the range
  float dequant;   // scale_inv * decode(code)
};

FP8WB_INLINE bool is_subnormal_code(uint8_t code, const CodecSpec& s) {
  if (s.nan == NanRule::AllOnes || s.mbits == 0) return false;
  const uint32_t mag = code & ((1u << (s.bits - 1)) - 1u);
  return mag != 0 && (mag >> s.mbits) == 0;
}

// floor(log2 |y|) bin of the exponent histogram for a finite nonzero y.
FP8WB_INLINE int hist_bin(float y) {
  const int e = static_cast<int>((float_bits(y) >> 23) & 0xFFu) - 127;  // fp32 subnormals: -127
  const int b = e - kHistMinExp;
  return b < 0 ? 0 : (b >= kHistExpBins ? kHistExpBins - 1 : b);
}

// `decoded` is the value of a code (a table on the CPU, decode() on the GPU).
template <class DecodeFn>
FP8WB_INLINE QuantizedElement quantize_element(float x, float scale, float scale_inv,
                                               const CodecSpec& s, Overflow ov,
                                               DecodeFn&& decoded) {
  QuantizedElement q;
  const uint32_t a = float_bits(x) & 0x7FFFFFFFu;
  q.finite = a < 0x7F800000u;
  uint32_t mag = 0;
  q.code = encode_rne_bits_mag(float_bits(x * scale), s, ov, mag);
  q.saturated = q.finite && mag > s.max_mag;
  q.dequant = decoded(q.code) * scale_inv;
  return q;
}

}  // namespace fp8wb
