// Scaled quantization on the GPU, column-scaled passes: the codes of a tensor's transpose
// with one scale per column (what a rowwise GEMM's backward operands need), from the
// tensor or from its row-scaled codes, without materialising the transpose.
#include "quantize_cuda_internal.cuh"

namespace fp8wb {
namespace {

using namespace qgpu;

// Sources of the column-scaled passes: four consecutive columns of one row as fp32.
struct TensorSource {
  const float* f32;
  const uint16_t* bf16;
  int64_t cols;
  __device__ __forceinline__ void load4(int64_t r, int64_t c, float v[4], const float*) const {
    load4_at(f32, bf16, r * cols + c, v);
  }
};

// Codes with one scale_inv a row, dequantized as dequantize_kernel does (a decode table in
// shared memory, an fp32 product).
struct CodesSource {
  const uint8_t* codes;
  const float* row_scale_inv;
  int64_t cols;
  __device__ __forceinline__ void load4(int64_t r, int64_t c, float v[4], const float* lut) const {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(codes + r * cols + c);
    const float si = row_scale_inv[r];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = __fmul_rn(lut[(w >> (8 * k)) & 0xFFu], si);
  }
};

constexpr int kColTile = 64;  // columns a block takes: 16 threads x 4
constexpr int kRowsPerThread = 16;
static_assert(kRowsPerThread == 16,
              "transposed codes are packed four rows of four columns at a time");
// The column-scaled passes' blocks are 16 x 16 threads, whatever kThreads is (128 under HIP).
constexpr int kColThreads = 16 * 16;

// Per-column amax over finite values (fp32 bits, atomicMax: zero them first). A block is
// 16 x 16 threads over 64 columns; each thread walks every 16th row of its share.
template <class Src>
__global__ void __launch_bounds__(kColThreads)
    col_amax_kernel(Src src, int64_t rows, int64_t cols, int64_t rows_per_block, CodecSpec spec,
                    uint32_t* col_amax) {
  __shared__ float lut[256];
  __shared__ uint32_t part[16][kColTile];
  for (int c = threadIdx.x; c < 256; c += blockDim.x)
    lut[c] = decode(static_cast<uint8_t>(c), spec);
  __syncthreads();
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int64_t c0 = int64_t{blockIdx.x} * kColTile + tx * 4;
  const int64_t r_begin = int64_t{blockIdx.y} * rows_per_block;
  const int64_t r_end = min(rows, r_begin + rows_per_block);
  uint32_t m[4] = {0, 0, 0, 0};
  if (c0 < cols) {
    for (int64_t r = r_begin + ty; r < r_end; r += 16) {
      float v[4];
      src.load4(r, c0, v, lut);
#pragma unroll
      for (int k = 0; k < 4; ++k) m[k] = finite_abs_max(m[k], v[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) part[ty][tx * 4 + k] = m[k];
  __syncthreads();
  if (threadIdx.x < kColTile) {
    uint32_t mm = 0;
    for (int t = 0; t < 16; ++t) mm = max(mm, part[t][threadIdx.x]);
    const int64_t c = int64_t{blockIdx.x} * kColTile + threadIdx.x;
    if (c < cols && mm) atomicMax(&col_amax[c], mm);
  }
}

// Codes of the transpose with one scale a column: thread (tx, ty) of a 16 x 16 block
// quantizes 4 columns x 16 rows and stores 16 bytes of each column's transposed row.
template <Format F, bool kHw, class Src>
__global__ void __launch_bounds__(kColThreads)
    col_quantize_t_kernel(Src src, int64_t rows, int64_t cols, const float* __restrict__ scale,
                          Overflow ov, CodecSpec spec, uint8_t* __restrict__ codes_t) {
  __shared__ float lut[256];
  for (int c = threadIdx.x; c < 256; c += blockDim.x)
    lut[c] = decode(static_cast<uint8_t>(c), spec);
  __syncthreads();
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int64_t col_tiles = (cols + kColTile - 1) / kColTile;
  const int64_t row_tiles = (rows + 16 * kRowsPerThread - 1) / (16 * kRowsPerThread);
  for (int64_t tile = blockIdx.x; tile < col_tiles * row_tiles; tile += gridDim.x) {
    const int64_t c0 = (tile % col_tiles) * kColTile + tx * 4;
    const int64_t r0 = (tile / col_tiles) * (16 * kRowsPerThread) + ty * kRowsPerThread;
    if (c0 >= cols || r0 >= rows) continue;
    float sc[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) sc[k] = scale[c0 + k];
    uint32_t t[4][4];  // t[q][k]: column k of rows 4q..4q+3
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t w[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        float v[4], y[4];
        src.load4(r0 + 4 * q + r, c0, v, lut);
#pragma unroll
        for (int k = 0; k < 4; ++k) y[k] = v[k] * sc[k];
        w[r] = encode4<F, kHw, false>(y, 1.0f, ov, nullptr, nullptr);
      }
      transpose_bytes4(w, t[q]);
    }
    store_transposed16(codes_t, rows, r0, c0, t);
  }
}

template <class Src>
void rowwise_transposed(const Src& src, int64_t rows, int64_t cols, const CodecSpec& src_spec,
                        const QuantRecipe& recipe, float* d_col_amax, float* d_scale,
                        float* d_scale_inv, uint8_t* codes_t, cudaStream_t st) {
  FP8WB_GPU_CHECK(cudaMemsetAsync(d_col_amax, 0, static_cast<size_t>(cols) * sizeof(float), st));
  const int64_t col_blocks = (cols + kColTile - 1) / kColTile;
  // Enough blocks down the rows to fill the GPU, each at least 256 rows.
  const int64_t want = std::max<int64_t>(1, int64_t{sm_count()} * 8 / col_blocks);
  const int64_t splits = std::min<int64_t>(want, std::max<int64_t>(1, rows / 256));
  const int64_t per_block = (rows + splits - 1) / splits;
  col_amax_kernel<<<dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(splits)),
                    kColThreads, 0, st>>>(src, rows, cols, per_block, src_spec,
                                          reinterpret_cast<uint32_t*>(d_col_amax));
  FP8WB_GPU_CHECK(cudaGetLastError());
  launch_scales(ScalingKind::Rowwise, cols, d_col_amax, nullptr, format_info(recipe.format),
                recipe.margin, recipe.pow2_scales, false, d_scale, d_scale_inv, nullptr, nullptr,
                st);
  const int64_t tiles = col_blocks * ((rows + 16 * kRowsPerThread - 1) / (16 * kRowsPerThread));
  const unsigned grid = blocks_for(tiles, 1);
  dispatch_element_format(recipe.format, [&](auto tag) {
    constexpr Format F = decltype(tag)::value;
    if (hw_format<F>() && recipe.overflow == Overflow::Saturate) {
      col_quantize_t_kernel<F, true><<<grid, kColThreads, 0, st>>>(
          src, rows, cols, d_scale, recipe.overflow, src_spec, codes_t);
    } else {
      col_quantize_t_kernel<F, false><<<grid, kColThreads, 0, st>>>(
          src, rows, cols, d_scale, recipe.overflow, src_spec, codes_t);
    }
  });
  FP8WB_GPU_CHECK(cudaGetLastError());
}

}  // namespace

bool rowwise_transposed_cuda(const DeviceTensor& x, const QuantRecipe& recipe, float* d_col_amax,
                             float* d_scale, float* d_scale_inv, uint8_t* codes_t,
                             fp8wb_stream_t stream) {
  validate_recipe(recipe);
  const uintptr_t in =
      reinterpret_cast<uintptr_t>(x.f32 ? static_cast<const void*>(x.f32) : x.bf16);
  if (recipe.kind != ScalingKind::Rowwise || x.rows % 16 != 0 || x.cols % 4 != 0 ||
      in % (x.f32 ? 16 : 8) != 0 || reinterpret_cast<uintptr_t>(codes_t) % 16 != 0 ||
      (!x.f32 && !x.bf16)) {
    return false;
  }
  if (x.rows * x.cols == 0) return true;
  rowwise_transposed(TensorSource{x.f32, x.bf16, x.cols}, x.rows, x.cols, codec_spec(recipe.format),
                     recipe, d_col_amax, d_scale, d_scale_inv, codes_t,
                     reinterpret_cast<cudaStream_t>(stream));
  return true;
}

bool rowwise_transposed_cuda(const DeviceCodes& x, const QuantRecipe& recipe, float* d_col_amax,
                             float* d_scale, float* d_scale_inv, uint8_t* codes_t,
                             fp8wb_stream_t stream) {
  validate_recipe(recipe);
  if (recipe.kind != ScalingKind::Rowwise || x.rows % 16 != 0 || x.cols % 4 != 0 ||
      reinterpret_cast<uintptr_t>(x.codes) % 4 != 0 ||
      reinterpret_cast<uintptr_t>(codes_t) % 16 != 0 || !x.codes || !x.row_scale_inv) {
    return false;
  }
  if (x.rows * x.cols == 0) return true;
  rowwise_transposed(CodesSource{x.codes, x.row_scale_inv, x.cols}, x.rows, x.cols,
                     codec_spec(x.format), recipe, d_col_amax, d_scale, d_scale_inv, codes_t,
                     reinterpret_cast<cudaStream_t>(stream));
  return true;
}

}  // namespace fp8wb
