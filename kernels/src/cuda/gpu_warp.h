// defines: the warp-level operations the kernels use, for any warp width: kWarpSize (32
// lanes on NVIDIA GPUs, 64-lane wavefronts on the AMD GPUs the HIP build targets),
// LaneMask, lane_id(), shuffles, ballot, any_of(), active_mask(), match_any(), lane_count(),
// lowest_lane(), warp_sum(), warp_max(). CUDA takes the *_sync forms over the full warp;
// HIP's unsynchronised forms act on the whole wavefront (hipcc 5.2 has no *_sync forms, no
// __activemask() and no __match_any(): they are built here from __ballot and __shfl).
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

#if defined(__HIP_DEVICE_COMPILE__)
static_assert(__AMDGCN_WAVEFRONT_SIZE == kWarpSize, "the HIP build targets wave64 GPUs");
#elif defined(__CUDA_ARCH__)
static_assert(kWarpSize == 32);
#endif

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

// Whether p holds on any lane of `lanes`, which must be exactly the lanes executing the
// call (HIP: the active lanes of the wavefront). Every one of them gets the same answer.
__device__ __forceinline__ bool any_of(LaneMask lanes, bool p) {
#if defined(FP8WB_HIP)
  (void)lanes;
  return __any(p);
#else
  return __any_sync(lanes, p);
#endif
}

// The lanes executing this call (on AMD, the wavefront's exec mask).
__device__ __forceinline__ LaneMask active_mask() {
#if defined(FP8WB_HIP)
  return __ballot(1);
#else
  return __activemask();
#endif
}

// Lanes in a mask, and the lowest lane of a nonzero mask.
__device__ __forceinline__ int lane_count(LaneMask m) {
#if defined(FP8WB_HIP)
  return __popcll(m);
#else
  return __popc(m);
#endif
}
__device__ __forceinline__ int lowest_lane(LaneMask m) {
#if defined(FP8WB_HIP)
  return __ffsll(static_cast<unsigned long long>(m)) - 1;
#else
  return __ffs(static_cast<int>(m)) - 1;
#endif
}

// The active lanes whose v equals this lane's (this lane included), over whatever lanes
// execute the call: __match_any_sync on CUDA; on HIP one round per distinct value among
// the active lanes, each round settling the lanes equal to the lowest unsettled lane.
__device__ __forceinline__ LaneMask match_any(int v) {
#if defined(FP8WB_HIP)
  LaneMask todo = active_mask();
  for (;;) {
    const int leader_value = __shfl(v, lowest_lane(todo));
    const bool mine = v == leader_value;
    const LaneMask peers = __ballot(mine);  // lanes that left the loop count as false
    if (mine) return peers;
    todo &= ~peers;
  }
#else
  return __match_any_sync(__activemask(), v);
#endif
}

// The sum of v over `peers`, this lane's match_any() lanes, for every lane of the warp
// (all take part): __reduce_add_sync on CUDA; on HIP one warp sum per distinct peer set.
__device__ __forceinline__ uint32_t peer_sum(LaneMask peers, uint32_t v);

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

__device__ __forceinline__ uint32_t peer_sum(LaneMask peers, uint32_t v) {
#if defined(FP8WB_HIP)
  uint32_t mine = 0;
  for (LaneMask todo = kFullMask; todo != 0;) {
    const LaneMask set = __shfl(peers, lowest_lane(todo));
    const uint32_t sum = warp_sum((set >> lane_id()) & 1 ? v : 0u);
    if ((set >> lane_id()) & 1) mine = sum;
    todo &= ~set;
  }
  return mine;
#else
  return __reduce_add_sync(peers, v);
#endif
}

#endif  // __CUDACC__ || __HIPCC__

}  // namespace fp8wb::gpu
