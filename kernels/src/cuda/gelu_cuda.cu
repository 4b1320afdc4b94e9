// GELU and its input gradient on bf16 tensors by table lookup (gelu_cuda.h). Each block
// keeps the entries of the magnitudes most inputs have (2^-25 <= |x| < 2^5, both signs) in
// shared memory and reads any other entry from the full table in global memory (cached):
// every input gets its table entry, the common ones cheaply. A thread takes eight
// elements at a time (16-byte loads and stores), two such groups an iteration.
#include "gpu_runtime.h"

#include <algorithm>

#include "fp8wb/kernels/gelu_cuda.h"

namespace fp8wb {
namespace {

constexpr int kThreads = 256;
constexpr uint32_t kLo = 0x3300;      // |x| bits of 2^-25
constexpr uint32_t kHi = 0x4200;      // |x| bits of 2^5
constexpr uint32_t kWin = kHi - kLo;  // entries per sign in shared memory
constexpr uint32_t kSmem = 2 * kWin;  // both signs

// The shared-memory slot of bf16 bits b, or kSmem where b lies outside the window.
__device__ __forceinline__ uint32_t slot(uint32_t b) {
  const uint32_t off = (b & 0x7FFFu) - kLo;  // wraps past kWin below kLo
  return off < kWin ? off + (b >> 15) * kWin : kSmem;
}

template <class T>
__device__ __forceinline__ void load_window(T* win, const T* table) {
  for (uint32_t i = threadIdx.x; i < kSmem; i += blockDim.x) {
    win[i] = table[(i >= kWin ? 0x8000u : 0u) + kLo + (i >= kWin ? i - kWin : i)];
  }
  __syncthreads();
}

template <class T>
__device__ __forceinline__ T entry(const T* win, const T* __restrict__ table, uint32_t b) {
  const uint32_t s = slot(b);
  return s < kSmem ? win[s] : table[b];
}

__device__ __forceinline__ uint32_t gelu2(const uint16_t* win, const uint16_t* table, uint32_t w) {
  return entry(win, table, w & 0xFFFFu) | (uint32_t{entry(win, table, w >> 16)} << 16);
}

// fp32 to bf16 bits, nearest even, NaN as the canonical 0x7FFF (what the GPU's own
// conversion gives, and so PyTorch's bf16 results on it).
__device__ __forceinline__ uint16_t to_bf16(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ uint16_t grad1(const float* win, const float* table, uint32_t dy,
                                          uint32_t x) {
  return to_bf16(__uint_as_float(dy << 16) * entry(win, table, x));
}

__device__ __forceinline__ uint32_t grad2(const float* win, const float* table, uint32_t dy,
                                          uint32_t x) {
  return grad1(win, table, dy & 0xFFFFu, x & 0xFFFFu) |
         (uint32_t{grad1(win, table, dy >> 16, x >> 16)} << 16);
}

__global__ void __launch_bounds__(kThreads)
    gelu_kernel(const uint16_t* __restrict__ x, uint16_t* __restrict__ y, int64_t n,
                const uint16_t* __restrict__ table) {
  __shared__ uint16_t win[kSmem];
  load_window(win, table);
  const int64_t n8 = n / 8;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const auto* xv = reinterpret_cast<const uint4*>(x);
  auto* yv = reinterpret_cast<uint4*>(y);
  const auto gelu8 = [&](const uint4& v) {
    return make_uint4(gelu2(win, table, v.x), gelu2(win, table, v.y), gelu2(win, table, v.z),
                      gelu2(win, table, v.w));
  };
  int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (; i + stride < n8; i += 2 * stride) {  // two loads in flight before the lookups
    const uint4 v0 = xv[i], v1 = xv[i + stride];
    yv[i] = gelu8(v0);
    yv[i + stride] = gelu8(v1);
  }
  if (i < n8) yv[i] = gelu8(xv[i]);
  for (int64_t i = n8 * 8 + int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = entry(win, table, x[i]);
  }
}

__global__ void __launch_bounds__(kThreads)
    gelu_backward_kernel(const uint16_t* __restrict__ dy, const uint16_t* __restrict__ x,
                         uint16_t* __restrict__ dx, int64_t n, const float* __restrict__ table) {
  __shared__ float win[kSmem];
  load_window(win, table);
  const int64_t n8 = n / 8;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const auto* gv = reinterpret_cast<const uint4*>(dy);
  const auto* xv = reinterpret_cast<const uint4*>(x);
  auto* dv = reinterpret_cast<uint4*>(dx);
  const auto grad8 = [&](const uint4& g, const uint4& v) {
    return make_uint4(grad2(win, table, g.x, v.x), grad2(win, table, g.y, v.y),
                      grad2(win, table, g.z, v.z), grad2(win, table, g.w, v.w));
  };
  int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (; i + stride < n8; i += 2 * stride) {  // four loads in flight before the lookups
    const uint4 g0 = gv[i], v0 = xv[i], g1 = gv[i + stride], v1 = xv[i + stride];
    dv[i] = grad8(g0, v0);
    dv[i + stride] = grad8(g1, v1);
  }
  if (i < n8) dv[i] = grad8(gv[i], xv[i]);
  for (int64_t i = n8 * 8 + int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    dx[i] = grad1(win, table, dy[i], x[i]);
  }
}

// The blocks that fit on the GPU at once (fewer for small tensors): each loads its window
// of the table once, and no block waits for a second wave (the backward's larger window
// lets seven blocks an SM on an H200, not eight).
template <auto Kernel>
unsigned grid_for(int64_t n) {
  static const int64_t resident = [] {
    int dev = 0, sms = 0, per_sm = 0;
    FP8WB_GPU_CHECK(cudaGetDevice(&dev));
    FP8WB_GPU_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, kThreads, 0) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      per_sm = 1;
    }
    return int64_t{std::max(1, sms)} * std::max(1, per_sm);
  }();
  const int64_t want = (n / 8 + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(want, 1, resident));
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

void gelu_lookup_bf16_cuda(const uint16_t* x, uint16_t* y, int64_t n, const uint16_t* table,
                           fp8wb_stream_t stream) {
  if (n <= 0) return;
  if (!aligned16(x) || !aligned16(y)) throw GpuError("GELU lookup: tensors not 16-byte aligned");
  gelu_kernel<<<grid_for<gelu_kernel>(n), kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
      x, y, n, table);
  FP8WB_GPU_CHECK(cudaGetLastError());
}

void gelu_backward_lookup_bf16_cuda(const uint16_t* dy, const uint16_t* x, uint16_t* dx, int64_t n,
                                    const float* dtable, fp8wb_stream_t stream) {
  if (n <= 0) return;
  if (!aligned16(dy) || !aligned16(x) || !aligned16(dx))
    throw GpuError("GELU backward lookup: tensors not 16-byte aligned");
  gelu_backward_kernel<<<grid_for<gelu_backward_kernel>(n), kThreads, 0,
                         reinterpret_cast<cudaStream_t>(stream)>>>(dy, x, dx, n, dtable);
  FP8WB_GPU_CHECK(cudaGetLastError());
}

}  // namespace fp8wb
