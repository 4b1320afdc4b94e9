// defines: round_to_float_grid(), round_bf16(), round_fp16(): fp32 values rounded onto the
// grid of a wider float format (bf16, IEEE fp16), to nearest even or stochastically, as
// the result of an fp32 operation is stored in that format. Host only.
#pragma once

#include <cmath>
#include <cstdint>

#include "fp8wb/kernels/format.h"
#include "fp8wb/kernels/host_device.h"

namespace fp8wb {

// Rounds x onto the grid of a binary float format with `mbits` stored mantissa bits,
// smallest normal exponent `emin` (subnormals below it, spacing 2^(emin - mbits)) and
// largest finite value `max_finite`; beyond that, +-Inf (IEEE overflow, as a cast to
// bf16 or fp16 does). NaN stays NaN, signed zeros keep their sign.
// Rounding::Stochastic rounds away from zero with probability (distance to the lower
// neighbour) / spacing, drawing on the 32 random bits `rnd` (quantised to 2^-32).
inline float round_to_float_grid(float x, int mbits, int emin, float max_finite,
                                 Rounding rounding = Rounding::NearestEven, uint32_t rnd = 0) {
  const uint32_t u = float_bits(x);
  const bool negative = (u >> 31) != 0;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return x;  // Inf and NaN pass
  // |x| = sig * 2^(exp - 23), with the hidden bit for normals.
  const int fexp = static_cast<int>(a >> 23);
  const int exp = (fexp == 0 ? 1 : fexp) - 127;
  const uint64_t sig = (a & 0x7FFFFFu) | (fexp == 0 ? 0u : 0x800000u);
  // The grid's spacing at this magnitude is 2^(max(exp, emin) - mbits): drop `shift` bits.
  const int grid_exp = (exp < emin ? emin : exp) - mbits;
  const int shift = grid_exp - (exp - 23);
  uint64_t q = sig;
  if (shift > 0) {
    if (shift > 62) {
      q = 0;  // far below half the smallest spacing (and below any 2^-32 probability)
    } else if (rounding == Rounding::NearestEven) {
      const uint64_t half = uint64_t{1} << (shift - 1);
      q = (sig + half - 1 + ((sig >> shift) & 1u)) >> shift;
    } else {
      // The dropped part in units of 2^-32 spacings; a carry past 2^32 rounds up.
      const uint64_t frac =
          shift <= 32 ? (sig << (32 - shift)) & 0xFFFFFFFFu : (sig >> (shift - 32)) & 0xFFFFFFFFu;
      q = (sig >> shift) + ((frac + rnd) >> 32);
    }
  } else {
    return x;  // already on the grid (a format at least as precise as fp32 here)
  }
  const float mag = std::ldexp(static_cast<float>(q), grid_exp);  // exact: q has few bits
  if (mag > max_finite) return negative ? -INFINITY : INFINITY;
  return negative ? -mag : mag;
}

// bfloat16: fp32's exponent range, 7 mantissa bits.
inline float round_bf16(float x, Rounding rounding = Rounding::NearestEven, uint32_t rnd = 0) {
  return round_to_float_grid(x, 7, -126, 0x1.FEp127f, rounding, rnd);
}

// IEEE 754 binary16: 10 mantissa bits, normals from 2^-14, subnormals down to 2^-24,
// largest finite 65504.
inline float round_fp16(float x, Rounding rounding = Rounding::NearestEven, uint32_t rnd = 0) {
  return round_to_float_grid(x, 10, -14, 65504.0f, rounding, rnd);
}

}  // namespace fp8wb
