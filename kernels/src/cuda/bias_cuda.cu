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

// The bias's gradient, pass 1: block (x, y) sums rows y, y + gridDim.y, ... of columns
// [256 x, 256 x + 256): thread (tx, ty) 8 columns of every 8th of those rows, 16 bytes a
// load; the 8 row sums of a column are added in ty's order and written to share y.
constexpr int kGradCols = 256;  // columns a block: 32 threads x 8
constexpr int kGradRowThreads = 8;

__global__ void __launch_bounds__(32 * kGradRowThreads)
    bias_grad_shares_kernel(const uint4* __restrict__ dy, int64_t rows, int64_t per_row,
                            int64_t rows_per_share, float* __restrict__ shares, int64_t cols) {
  __shared__ float part[kGradRowThreads][kGradCols + 4];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t group = int64_t{blockIdx.x} * 32 + tx;  // 8 columns from 8 * group
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t r0 = int64_t{blockIdx.y} * rows_per_share;
  const int64_t r1 = r0 + rows_per_share < rows ? r0 + rows_per_share : rows;
  if (group < per_row) {
    for (int64_t r = r0 + ty; r < r1; r += kGradRowThreads) {
      const uint4 v = dy[r * per_row + group];
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        acc[2 * j] += __uint_as_float(w[j] << 16);
        acc[2 * j + 1] += __uint_as_float(w[j] & 0xFFFF0000u);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) part[ty][tx * 8 + j] = acc[j];
  __syncthreads();
  // 256 threads, one column each: the 8 row threads' sums in order.
  const int c = ty * 32 + tx;
  const int64_t col = int64_t{blockIdx.x} * kGradCols + c;
  if (col < cols) {
    float s = 0;
#pragma unroll
    for (int t = 0; t < kGradRowThreads; ++t) s += part[t][c];
    shares[int64_t{blockIdx.y} * cols + col] = s;
  }
}

// Pass 2: the shares of each column added in a fixed order, rounded to bf16 and widened.
// A block takes 32 columns with 8 lanes each: lane l adds shares l, l + 8, ... in turn,
// then the lanes' sums are added in lane order (a lone thread a column waited on 100 and
// more loads one after another: 7 us a launch). blockIdx.y picks the second of two share
// arrays (a layer norm's weight and bias), which follows the first.
constexpr int kSumLanes = 8;

__global__ void __launch_bounds__(32 * kSumLanes)
    grad_sum_kernel(const float* __restrict__ shares, int64_t count, int64_t cols,
                    float* __restrict__ out, float* __restrict__ out2) {
  __shared__ float part[kSumLanes][33];
  const int tx = threadIdx.x, lane = threadIdx.y;
  const int64_t c = int64_t{blockIdx.x} * 32 + tx;
  const float* sh = shares + int64_t{blockIdx.y} * count * cols;
  float s = 0;
  if (c < cols) {
#pragma unroll 4
    for (int64_t i = lane; i < count; i += kSumLanes) s += sh[i * cols + c];
  }
  part[lane][tx] = s;
  __syncthreads();
  if (lane == 0 && c < cols) {
    float t = 0;
#pragma unroll
    for (int j = 0; j < kSumLanes; ++j) t += part[j][tx];
    (blockIdx.y == 0 ? out : out2)[c] = __uint_as_float(to_bf16(t) << 16);
  }
}

void launch_grad_sum(const float* shares, int64_t count, int64_t cols, float* out, float* out2,
                     cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), out2 ? 2u : 1u);
  grad_sum_kernel<<<grid, dim3(32, kSumLanes), 0, s>>>(shares, count, cols, out, out2);
  FP8WB_GPU_CHECK(cudaGetLastError());
}

// A layer norm's weight and bias gradients, pass 1: as bias_grad_shares_kernel, two sums.
__global__ void __launch_bounds__(32 * kGradRowThreads)
    norm_grad_shares_kernel(const uint4* __restrict__ dy, const uint4* __restrict__ x,
                            const float* __restrict__ mean, const float* __restrict__ rstd,
                            int64_t rows, int64_t per_row, int64_t rows_per_share,
                            float* __restrict__ shares_w, float* __restrict__ shares_b,
                            int64_t cols) {
  __shared__ float part[2][kGradRowThreads][kGradCols + 4];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t group = int64_t{blockIdx.x} * 32 + tx;
  float aw[8] = {0, 0, 0, 0, 0, 0, 0, 0}, ab[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t r0 = int64_t{blockIdx.y} * rows_per_share;
  const int64_t r1 = r0 + rows_per_share < rows ? r0 + rows_per_share : rows;
  if (group < per_row) {
    for (int64_t r = r0 + ty; r < r1; r += kGradRowThreads) {
      const float m = mean[r], s = rstd[r];
      const uint4 gv = dy[r * per_row + group], xv = x[r * per_row + group];
      const uint32_t g[4] = {gv.x, gv.y, gv.z, gv.w}, v[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float g0 = __uint_as_float(g[j] << 16), g1 = __uint_as_float(g[j] & 0xFFFF0000u);
        const float x0 = __uint_as_float(v[j] << 16), x1 = __uint_as_float(v[j] & 0xFFFF0000u);
        aw[2 * j] += g0 * (x0 - m) * s;
        aw[2 * j + 1] += g1 * (x1 - m) * s;
        ab[2 * j] += g0;
        ab[2 * j + 1] += g1;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    part[0][ty][tx * 8 + j] = aw[j];
    part[1][ty][tx * 8 + j] = ab[j];
  }
  __syncthreads();
  const int c = ty * 32 + tx;
  const int64_t col = int64_t{blockIdx.x} * kGradCols + c;
  if (col < cols) {
    float sw = 0, sb = 0;
#pragma unroll
    for (int t = 0; t < kGradRowThreads; ++t) {
      sw += part[0][t][c];
      sb += part[1][t][c];
    }
    shares_w[int64_t{blockIdx.y} * cols + col] = sw;
    shares_b[int64_t{blockIdx.y} * cols + col] = sb;
  }
}

// Shares a gradient's rows are cut into: about four blocks an SM, at least 64 rows a share.
int64_t grad_shares(int64_t rows, int64_t cols) {
  const int64_t col_blocks = (cols + kGradCols - 1) / kGradCols;
  const int64_t want = (4 * 132 + col_blocks - 1) / col_blocks;
  const int64_t most = (rows + 63) / 64;
  return std::clamp<int64_t>(std::min(want, most), 1, 65535);
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

int64_t bias_grad_workspace(int64_t rows, int64_t cols) {
  return rows > 0 && cols > 0 ? grad_shares(rows, cols) * cols : 0;
}

void bias_grad_bf16_cuda(const uint16_t* dy, int64_t rows, int64_t cols, float* workspace,
                         float* out, fp8wb_stream_t stream) {
  if (cols <= 0) return;
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  if (rows <= 0) {
    FP8WB_GPU_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(cols) * sizeof(float), s));
    return;
  }
  if (!bias_rows_vectorisable(dy, out, cols, 2))
    throw GpuError("bias gradient: columns not a multiple of 8 or tensors not 16-byte aligned");
  const int64_t shares = grad_shares(rows, cols);
  const int64_t rows_per_share = (rows + shares - 1) / shares;
  const dim3 grid(static_cast<unsigned>((cols + kGradCols - 1) / kGradCols),
                  static_cast<unsigned>(shares));
  bias_grad_shares_kernel<<<grid, dim3(32, kGradRowThreads), 0, s>>>(
      reinterpret_cast<const uint4*>(dy), rows, cols / 8, rows_per_share, workspace, cols);
  FP8WB_GPU_CHECK(cudaGetLastError());
  launch_grad_sum(workspace, shares, cols, out, nullptr, s);
}

int64_t layer_norm_affine_grad_workspace(int64_t rows, int64_t cols) {
  return 2 * bias_grad_workspace(rows, cols);
}

void layer_norm_affine_grad_bf16_cuda(const uint16_t* dy, const uint16_t* x, const float* mean,
                                      const float* rstd, int64_t rows, int64_t cols,
                                      float* workspace, float* dw, float* db,
                                      fp8wb_stream_t stream) {
  if (cols <= 0) return;
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  if (rows <= 0) {
    FP8WB_GPU_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(cols) * sizeof(float), s));
    FP8WB_GPU_CHECK(cudaMemsetAsync(db, 0, static_cast<size_t>(cols) * sizeof(float), s));
    return;
  }
  if (!bias_rows_vectorisable(dy, x, cols, 2))
    throw GpuError(
        "layer norm gradient: columns not a multiple of 8 or tensors not 16-byte aligned");
  const int64_t shares = grad_shares(rows, cols);
  const int64_t rows_per_share = (rows + shares - 1) / shares;
  const dim3 grid(static_cast<unsigned>((cols + kGradCols - 1) / kGradCols),
                  static_cast<unsigned>(shares));
  float* shares_w = workspace;  // the bias's shares follow: launch_grad_sum() takes both
  float* shares_b = workspace + shares * cols;
  norm_grad_shares_kernel<<<grid, dim3(32, kGradRowThreads), 0, s>>>(
      reinterpret_cast<const uint4*>(dy), reinterpret_cast<const uint4*>(x), mean, rstd, rows,
      cols / 8, rows_per_share, shares_w, shares_b, cols);
  FP8WB_GPU_CHECK(cudaGetLastError());
  launch_grad_sum(shares_w, shares, cols, dw, db, s);
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
