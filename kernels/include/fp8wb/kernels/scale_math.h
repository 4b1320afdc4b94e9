// defines: tensor_scale(), mx_scale_exponent(), nvfp4_block_scale(): the per-group scale
// formulas, one __host__ __device__ implementation for compute_scales() on the CPU and
// the scale kernels on the GPU.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "fp8wb/kernels/codec.h"

namespace fp8wb {

// fp32(fmax / max(fp64(amax), 1e-12)) / 2^margin, 1 when amax is 0 or not finite, then
// optionally rounded down to a power of two.
FP8WB_INLINE float tensor_scale(float amax, double fmax, int margin, bool pow2) {
  if (!(amax > 0.0f) || !(amax <= FLT_MAX)) return 1.0f;
  const double a = static_cast<double>(amax) > 1e-12 ? static_cast<double>(amax) : 1e-12;
  double s = static_cast<double>(static_cast<float>(fmax / a));
  s = ldexp(s, -margin);
  float f = s > static_cast<double>(FLT_MAX) ? FLT_MAX : static_cast<float>(s);
  if (pow2 && f > 0.0f) {
    int e = 0;
    frexpf(f, &e);  // f = m * 2^e, m in [0.5, 1)
    f = ldexpf(1.0f, e - 1);
  }
  return f;
}

// The unbiased exponent e of an MX block's shared scale X = 2^e, clamped to [-127, 127]:
// FLOOR: floor(log2 amax) - emax_elem; RCEIL: ceil(log2(amax / fmax)). 0 for amax 0.
FP8WB_INLINE int mx_scale_exponent(float amax, int emax_elem, double fmax, bool rceil) {
  if (!(amax > 0.0f) || !(amax <= FLT_MAX)) return 0;
  int e = 0;
  if (!rceil) {
    int k = 0;
    frexpf(amax, &k);  // floor(log2 amax) = k - 1
    e = (k - 1) - emax_elem;
  } else {
    int k = 0;
    const double m = frexp(static_cast<double>(amax) / fmax, &k);
    e = m == 0.5 ? k - 1 : k;
  }
  return e < -127 ? -127 : (e > 127 ? 127 : e);
}

struct Nvfp4BlockScale {
  uint8_t code;     // E4M3 block scale
  float scale;      // element encode scale: global / decode(code)
  float scale_inv;  // decode(code) / global
};

// NVFP4: the block's decode scale amax / 6 is expressed against the global scale and
// stored in E4M3; elements are encoded as x * global / decode(code).
FP8WB_INLINE Nvfp4BlockScale nvfp4_block_scale(float block_amax, float global, double elem_fmax) {
  const CodecSpec e4m3 = codec_spec(Format::E4M3FN);
  const float sd = static_cast<float>(static_cast<double>(block_amax) / elem_fmax) * global;
  Nvfp4BlockScale b;
  b.code = encode(sd, e4m3, Overflow::Saturate);
  const float ds = decode(b.code, e4m3);
  b.scale = ds > 0.0f ? global / ds : 0.0f;
  b.scale_inv = ds / global;
  return b;
}

// The NVFP4 global scale: maps the tensor amax to E4M3 max x element max.
FP8WB_INLINE float nvfp4_global_scale(float tensor_amax, double elem_fmax) {
  return tensor_amax > 0.0f && tensor_amax <= FLT_MAX
             ? static_cast<float>(448.0 * elem_fmax / static_cast<double>(tensor_amax))
             : 1.0f;
}

}  // namespace fp8wb
