// defines: the warp-level operations the kernels use, for any warp width: kWarpSize (32
// lanes on NVIDIA GPUs, 64-lane wavefronts on the AMD GPUs the HIP build targets),
// LaneMask, lane_id(), shuffles, ballot, warp_sum(), warp_max(). CUDA takes the *_sync
// forms over the full warp; HIP's unsynchronised forms act on the whole wavefront.
#pragma once

#include <cstdint>

#include "gpu_runtime.h"

namespace fp8wb::gpu {

#if defined(FP8WB_HIP)
inline constexpr int kWarpSize = 64;  // gfx90a, gfx940: wave64
using LaneMask = unsigned long long;
#else
inline constexpr int kWarpSize = 32;
using LaneMask = unsigned;
#endif
inline constexpr LaneMask kFullMask = ~LaneMask{0};

#if defined(__CUDACC__) || defined(__HIPCC__)

__device__ __forceinline__ int lane_id() {
  return static_cast<int>(threadIdx.x) & (kWarpSize - 1);
}
__device__ __forceinline__ int warp_id() {
  return static_cast<int>(threadIdx.x) / kWarpSize;
}

template <class T>
__device__ __forceinline__ T shfl_xor(T v, int mask) {
#if defined(FP8WB_HIP)
  return __shfl_xor(v, mask);
#else
  return __shfl_xor_sync(kFullMask, v, mask);
#endif
}

template <class T>
__device__ __forceinline__ T shfl_up(T v, int delta) {
#if defined(FP8WB_HIP)
  return __shfl_up(v, delta);
#else
  return __shfl_up_sync(kFullMask, v, delta);
#endif
}

template <class T>
__device__ __forceinline__ T shfl_down(T v, int delta) {
#if defined(FP8WB_HIP)
  return __shfl_down(v, delta);
#else
  return __shfl_down_sync(kFullMask, v, delta);
#endif
}

template <class T>
__device__ __forceinline__ T shfl(T v, int src) {
#if defined(FP8WB_HIP)
  return __shfl(v, src);
#else
  return __shfl_sync(kFullMask, v, src);
#endif
}

// Lanes (of all kWarpSize) whose predicate is true; every lane must take part.
__device__ __forceinline__ LaneMask ballot(bool p) {
#if defined(FP8WB_HIP)
  return __ballot(p);
#else
  return __ballot_sync(kFullMask, p);
#endif
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v += shfl_xor(v, o);
  return v;
}

__device__ __forceinline__ uint32_t warp_max(uint32_t v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v = max(v, shfl_xor(v, o));
  return v;
}

#endif  // __CUDACC__ || __HIPCC__

}  // namespace fp8wb::gpu
