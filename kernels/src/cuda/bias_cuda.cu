// A linear layer's bias added to its output's rows, 16 bytes a thread (bias_cuda.h).
#include "gpu_runtime.h"

#include <algorithm>

#include "fp8wb/kernels/bias_cuda.h"

namespace fp8wb {
namespace {

constexpr int kThreads = 256;

// fp32 to bf16 bits, nearest even, NaN as 0x7FFF (the GPU's own conversion, which ATen's
// bf16 arithmetic on the GPU uses).
__device__ __forceinline__ uint32_t to_bf16(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFFu;
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

__device__ __forceinline__ uint32_t add2(uint32_t y, uint32_t b) {
  const float lo = __uint_as_float(y << 16) + __uint_as_float(b << 16);
  const float hi = __uint_as_float(y & 0xFFFF0000u) + __uint_as_float(b & 0xFFFF0000u);
  return to_bf16(lo) | (to_bf16(hi) << 16);
}

// Each thread one 16-byte group at a time: `per_row` groups a row, the bias's group the
// column's.
__global__ void __launch_bounds__(kThreads)
    bias_bf16_kernel(uint4* __restrict__ y, const uint4* __restrict__ bias, int64_t groups,
                     int64_t per_row) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < groups; i += stride) {
    const uint4 v = y[i], b = bias[i % per_row];
    y[i] = make_uint4(add2(v.x, b.x), add2(v.y, b.y), add2(v.z, b.z), add2(v.w, b.w));
  }
}

__global__ void __launch_bounds__(kThreads)
    bias_f32_kernel(float4* __restrict__ y, const float4* __restrict__ bias, int64_t groups,
                    int64_t per_row) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < groups; i += stride) {
    float4 v = y[i];
    const float4 b = bias[i % per_row];
    v.x += b.x;
    v.y += b.y;
    v.z += b.z;
    v.w += b.w;
    y[i] = v;
  }
}

// Four groups a thread at most: enough blocks to fill the GPU, few enough to reuse a
// thread's setup.
unsigned grid_for(int64_t groups) {
  const int64_t want = (groups + 4 * kThreads - 1) / (4 * kThreads);
  return static_cast<unsigned>(std::clamp<int64_t>(want, 1, int64_t{1} << 20));
}

}  // namespace

bool bias_rows_vectorisable(const void* y, const void* bias, int64_t cols, int element_bytes) {
  const int64_t per_group = 16 / element_bytes;
  return cols > 0 && cols % per_group == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(bias) % 16 == 0;
}

void add_bias_rows_bf16_cuda(uint16_t* y, const uint16_t* bias, int64_t rows, int64_t cols,
                             fp8wb_stream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (!bias_rows_vectorisable(y, bias, cols, 2))
    throw GpuError("bias add: columns not a multiple of 8 or tensors not 16-byte aligned");
  const int64_t groups = rows * cols / 8;
  bias_bf16_kernel<<<grid_for(groups), kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<uint4*>(y), reinterpret_cast<const uint4*>(bias), groups, cols / 8);
  FP8WB_GPU_CHECK(cudaGetLastError());
}

void add_bias_rows_f32_cuda(float* y, const float* bias, int64_t rows, int64_t cols,
                            fp8wb_stream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (!bias_rows_vectorisable(y, bias, cols, 4))
    throw GpuError("bias add: columns not a multiple of 4 or tensors not 16-byte aligned");
  const int64_t groups = rows * cols / 4;
  bias_f32_kernel<<<grid_for(groups), kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<float4*>(y), reinterpret_cast<const float4*>(bias), groups, cols / 4);
  FP8WB_GPU_CHECK(cudaGetLastError());
}

}  // namespace fp8wb
