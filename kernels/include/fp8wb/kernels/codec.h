// defines: encode_bits(), encode(), decode_bits(), decode(), sr_bits(): the one
// implementation of every format's codec, shared by the CPU code and the CUDA/HIP kernels.
#pragma once

#include <cstdint>

#include "fp8wb/kernels/format.h"
#include "fp8wb/kernels/host_device.h"

namespace fp8wb {

namespace codec_detail {

// A canonical quiet NaN in fp32, with the given sign.
FP8WB_INLINE constexpr uint32_t f32_nan(bool negative) {
  return negative ? 0xFFC00000u : 0x7FC00000u;
}

FP8WB_INLINE constexpr uint8_t sign_bit(const CodecSpec& s) {
  return static_cast<uint8_t>(1u << (s.bits - 1));
}

FP8WB_INLINE constexpr uint8_t nan_code(const CodecSpec& s, bool negative) {
  // ml_dtypes keeps the sign of NaN where the format has a signed NaN, and maps NaN to a
  // zero of the opposite sign where the format has no NaN at all (FP4/FP6).
  const bool follows_sign =
      s.nan == NanRule::MantissaAllOnes || s.nan == NanRule::Ieee || s.nan == NanRule::None;
  return static_cast<uint8_t>(s.nan_code ^ ((follows_sign && negative) ? sign_bit(s) : 0u));
}

// The code for a value beyond the finite range (or +-Inf).
FP8WB_INLINE constexpr uint8_t overflow_code(const CodecSpec& s, bool negative, Overflow ov) {
  const uint8_t sign = negative ? sign_bit(s) : 0;
  if (ov == Overflow::Saturate || s.nan == NanRule::None) {
    return static_cast<uint8_t>(sign | s.max_mag);
  }
  if (s.has_inf) return static_cast<uint8_t>(sign | (s.max_mag + 1));  // E5M2: S.11111.00
  return nan_code(s, negative);
}

// E8M0FNU is a pure power of two with no sign and no zero; ml_dtypes rounds a mantissa of
// one half or more up, maps fp32 subnormals above 2^-127 to 2^-126, and maps zero,
// negatives and NaN to NaN.
FP8WB_INLINE constexpr uint8_t encode_e8m0(uint32_t u, Overflow ov, bool stochastic, uint32_t rnd) {
  if (u == 0x7F800000u) return ov == Overflow::Saturate ? 0xFE : 0xFF;
  if ((u >> 31) != 0 || u == 0 || u > 0x7F800000u) return 0xFF;
  const uint32_t e = u >> 23;
  const uint32_t m = u & 0x7FFFFFu;
  uint32_t code = 0;
  if (e == 0) {
    code = u > 0x00400000u ? 1u : 0u;
  } else if (stochastic) {
    code = e + ((m + (rnd & 0x7FFFFFu)) >> 23);
  } else {
    code = e + (m >= 0x400000u ? 1u : 0u);
  }
  if (code > 0xFE) return ov == Overflow::Saturate ? 0xFE : 0xFF;
  return static_cast<uint8_t>(code);
}

}  // namespace codec_detail

// Round to nearest even without branches, so that bulk loops vectorise: normal results
// round the re-biased fp32 bits with a constant shift; subnormal results scale |x| to
// units of the smallest subnormal, where the fp32 adder's own nearest-even rounding does
// the work. Both are exact, and the overflow and NaN cases are selects.
FP8WB_INLINE uint8_t encode_rne_bits_mag(uint32_t u, const CodecSpec& s, Overflow ov,
                                         uint32_t& rounded_mag) {
  using namespace codec_detail;
  const uint32_t neg = u >> 31;
  const uint32_t a = u & 0x7FFFFFFFu;
  const int emin = 1 - s.bias;
  const uint32_t min_normal_bits = static_cast<uint32_t>(emin + 127) << 23;
  // Normal range: exponent field becomes (exp + bias), then round away 23 - mbits bits.
  const uint32_t shift = 23u - s.mbits;
  const uint32_t t = a - (static_cast<uint32_t>(127 - s.bias) << 23);
  const uint32_t q_norm = (t + ((1u << (shift - 1)) - 1u) + ((t >> shift) & 1u)) >> shift;
  // Subnormal range: |x| * 2^(mbits - emin) < 2^mbits; adding 2^23 rounds it to an integer.
  const float scaled =
      bits_float(a) * bits_float(static_cast<uint32_t>(127 + s.mbits - emin) << 23);
  const uint32_t q_sub = float_bits(scaled + 8388608.0f) - 0x4B000000u;
  const uint32_t mag = a >= min_normal_bits ? q_norm : q_sub;
  rounded_mag = mag;
  const uint8_t sign = static_cast<uint8_t>(neg << (s.bits - 1));
  const uint8_t over = overflow_code(s, neg != 0, ov);
  const uint8_t nan = nan_code(s, neg != 0);
  uint8_t code = static_cast<uint8_t>(mag | sign);
  code = (mag == 0 && !s.has_neg_zero) ? uint8_t{0} : code;
  code = mag > s.max_mag ? over : code;  // also +-Inf, whose q_norm is far past max
  return a > 0x7F800000u ? nan : code;
}

// `rounded_mag` > max_mag tells that a finite input was clamped (saturated) or overflowed.
FP8WB_INLINE uint8_t encode_rne_bits(uint32_t u, const CodecSpec& s, Overflow ov) {
  uint32_t mag = 0;
  return encode_rne_bits_mag(u, s, ov, mag);
}

// Encodes the fp32 value with bit pattern `u`. `rnd` supplies 32 uniform random bits for
// Rounding::Stochastic and is ignored otherwise.
FP8WB_INLINE uint8_t encode_bits(uint32_t u, const CodecSpec& s, Overflow ov,
                                 Rounding rounding = Rounding::NearestEven, uint32_t rnd = 0) {
  using namespace codec_detail;
  if (s.nan == NanRule::AllOnes) return encode_e8m0(u, ov, rounding == Rounding::Stochastic, rnd);
  if (rounding == Rounding::NearestEven) return encode_rne_bits(u, s, ov);
  const bool negative = (u >> 31) != 0;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return nan_code(s, negative);
  if (a == 0x7F800000u) return overflow_code(s, negative, ov);

  // fp32 value = sig * 2^(exp - 23), with the hidden bit for normals.
  const int fexp = static_cast<int>(a >> 23);
  const int exp = (fexp == 0 ? 1 : fexp) - 127;
  const uint32_t sig = (a & 0x7FFFFFu) | (fexp == 0 ? 0u : 0x800000u);
  // Below the smallest normal exponent the spacing stays that of the subnormals.
  const int emin = 1 - s.bias;
  int shift = 23 - s.mbits + (exp < emin ? emin - exp : 0);
  if (shift > 25) shift = 25;  // everything this far down rounds to zero either way
  // Stochastic: round up with probability (dropped bits) / 2^shift.
  const uint32_t q = (sig + (rnd & ((1u << shift) - 1u))) >> shift;
  // A carry out of the mantissa moves to the next exponent by itself.
  const uint32_t mag = q + (static_cast<uint32_t>(exp > emin ? exp - emin : 0) << s.mbits);
  if (mag > s.max_mag) return overflow_code(s, negative, ov);
  if (mag == 0 && (!negative || !s.has_neg_zero)) return 0;
  return static_cast<uint8_t>((negative ? sign_bit(s) : 0u) | mag);
}

FP8WB_INLINE uint8_t encode(float x, const CodecSpec& s, Overflow ov,
                            Rounding rounding = Rounding::NearestEven, uint32_t rnd = 0) {
  return encode_bits(float_bits(x), s, ov, rounding, rnd);
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
// An fp64 value rounded to fp32 by round-to-odd, which keeps enough bits for a final
// rounding to any format of at most 21 mantissa bits to come out as if done in one step.
// Values beyond the fp32 range become +-FLT_MAX, so they overflow as they should.
inline float f64_to_f32_odd(double x) {
  float f = static_cast<float>(x);
  if (x == x && static_cast<double>(f) != x) {
    // Truncate toward zero, then make the last bit sticky.
    const bool too_big =
        (f < 0 ? -static_cast<double>(f) : static_cast<double>(f)) > (x < 0 ? -x : x);
    uint32_t b = float_bits(f);
    if (too_big) b -= 1;  // the next fp32 value toward zero (same sign)
    f = bits_float(b | 1u);
  }
  return f;
}

// Encodes an fp64 value correctly rounded (no double rounding through fp32).
inline uint8_t encode_f64(double x, const CodecSpec& s, Overflow ov) {
  return encode(f64_to_f32_odd(x), s, ov);
}
#endif

// The fp32 bit pattern of the value a code stands for (every value of every format is
// exact in fp32). NaN codes decode to the canonical quiet NaN of their sign.
FP8WB_INLINE constexpr uint32_t decode_bits(uint8_t code, const CodecSpec& s) {
  using namespace codec_detail;
  if (s.nan == NanRule::AllOnes) {  // E8M0FNU: 2^(code - 127)
    if (code == 0xFF) return f32_nan(false);
    return code == 0 ? 0x00400000u : static_cast<uint32_t>(code) << 23;
  }
  code = static_cast<uint8_t>(code & ((1u << s.bits) - 1u));
  const bool negative = s.has_sign && ((code >> (s.bits - 1)) & 1u);
  const uint32_t mag = code & (sign_bit(s) - 1u);
  const uint32_t sign = negative ? 0x80000000u : 0u;
  switch (s.nan) {
    case NanRule::NegativeZero:
      if (code == 0x80) return f32_nan(true);
      break;
    case NanRule::MantissaAllOnes:
      if (mag == 0x7F) return f32_nan(negative);
      break;
    case NanRule::Ieee:
      if (mag > s.max_mag + 1u) return f32_nan(negative);
      if (mag == s.max_mag + 1u) return sign | 0x7F800000u;
      break;
    default: break;
  }
  const uint32_t e = mag >> s.mbits;
  const uint32_t m = mag & ((1u << s.mbits) - 1u);
  if (e == 0) {
    if (m == 0) return sign;
    // Subnormal: m * 2^(1 - bias - mbits); normalise it for fp32.
    int exp = 1 - s.bias - s.mbits;
    uint32_t mm = m;
    while ((mm & (1u << s.mbits)) == 0) {
      mm <<= 1;
      --exp;
    }
    exp += s.mbits;
    mm &= (1u << s.mbits) - 1u;
    return sign | (static_cast<uint32_t>(exp + 127) << 23) | (mm << (23 - s.mbits));
  }
  const int exp = static_cast<int>(e) - s.bias;
  return sign | (static_cast<uint32_t>(exp + 127) << 23) | (m << (23 - s.mbits));
}

FP8WB_INLINE float decode(uint8_t code, const CodecSpec& s) {
  return bits_float(decode_bits(code, s));
}

// 32 random bits for element `index` of a stream seeded by `seed`: a counter-based
// generator (splitmix64 finaliser), so CPU threads and GPU threads that split the work
// differently still draw the same bits for the same element.
FP8WB_INLINE constexpr uint32_t sr_bits(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 32);
}

}  // namespace fp8wb
