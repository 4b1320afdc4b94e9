// defines: FP8WB_HD, FP8WB_INLINE, bit casts usable on the host and on CUDA/HIP devices.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>  // nvcc includes its runtime header by itself; hipcc does not
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
#define FP8WB_HD __host__ __device__
#else
#define FP8WB_HD
#endif

#define FP8WB_INLINE FP8WB_HD inline

namespace fp8wb {

FP8WB_INLINE uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

FP8WB_INLINE float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

}  // namespace fp8wb
