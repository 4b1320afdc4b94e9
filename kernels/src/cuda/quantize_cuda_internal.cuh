// defines (for the quantize_*_cuda.cu files only): the pieces the GPU quantize kernels
// share: block sizes, Geometry, vector loads, the tile walk, the block reduction of an
// amax, the four-element encode step (software codec or the hardware conversion), the
// byte transpose of four rows of codes, and the launchers of each kernel family (the
// statistics' counting steps are in quantize_cuda_stats.cuh):
//   quantize_rows_cuda.cu     row-walk kernels (any recipe, every statistic) and the
//                             element-per-thread kernel for shapes nothing else takes;
//   quantize_tiles_cuda.cu    tile kernels (transposed codes; statistics of E4M3FN/E5M2)
//                             and the flat codes-only kernel;
//   quantize_columns_cuda.cu  the column-scaled transposed pass of rowwise GEMMs;
//   quantize_cuda.cu          the entry points: amax, scales, quantize (which picks the
//                             family), dequantize, the delayed-scaling update.
#pragma once

#include <algorithm>
#include <climits>
#include <mutex>

#if !defined(FP8WB_HIP)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#include "fp8wb/kernels/quantize_cuda.h"
#include "fp8wb/kernels/quantize_element.h"
#include "gpu_runtime.h"
#include "gpu_warp.h"

namespace fp8wb::qgpu {

using gpu::kWarpSize;
using gpu::warp_max;
using gpu::warp_sum;
#if defined(FP8WB_HIP)
// AMD GPUs give a workgroup at most 64 KB of LDS: at 256 threads the lane-private
// histograms (kLaneHistBytes) would take 66 KB, at 128 (two wavefronts) 33 KB.
constexpr int kThreads = 128;
#else
constexpr int kThreads = 256;
#endif
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kWindow = 4 * kWarpSize;
constexpr int kRowChunk = 32;
// Lane-private histograms: kHistBins rows of kThreads counters (dynamic shared memory).
constexpr size_t kLaneHistBytes = size_t{kHistBins} * kThreads * sizeof(uint32_t);
#if defined(FP8WB_HIP)
static_assert(kLaneHistBytes + 8 * 1024 <= 64 * 1024, "lane histograms beyond AMD's 64 KB of LDS");
#endif

// Host side, defined in quantize_cuda.cu.
int sm_count();
unsigned blocks_for(int64_t work, int per_block);

struct Geometry {
  int64_t rows, cols, block_rows, block_cols, group_cols;
  int64_t cell_rows, cell_cols, map_cols, cells;
  bool map;
};

inline Geometry geometry(const GroupLayout& L, const DeviceStatsTargets& t) {
  Geometry g{L.rows, L.cols, L.block_rows, L.block_cols, L.group_cols, 1, 1, 0, 0, false};
  if (t.stats && t.map && t.grid.cell_count() > 0) {
    g.cell_rows = t.grid.cell_rows;
    g.cell_cols = t.grid.cell_cols;
    g.map_cols = t.grid.cols;
    g.cells = t.grid.cell_count();
    g.map = true;
  }
  return g;
}

__device__ __forceinline__ float load1(const float* f, const uint16_t* b, int64_t i) {
  return f ? f[i] : __uint_as_float(static_cast<uint32_t>(b[i]) << 16);
}

__device__ __forceinline__ void load4(const float* f, const uint16_t* b, int64_t i, float v[4]) {
  if (f) {
    const float4 q = *reinterpret_cast<const float4*>(f + i);
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
  } else {
    const uint2 q = *reinterpret_cast<const uint2*>(b + i);
    v[0] = __uint_as_float(q.x << 16);
    v[1] = __uint_as_float(q.x & 0xFFFF0000u);
    v[2] = __uint_as_float(q.y << 16);
    v[3] = __uint_as_float(q.y & 0xFFFF0000u);
  }
}

// Four inputs held as loaded (bf16: two registers, not four) until they are used.
template <bool kBf16>
struct Raw4 {
  using Elem = float;
  float4 q;
  __device__ __forceinline__ void load(const float* f, const uint16_t*, int64_t i) {
    q = *reinterpret_cast<const float4*>(f + i);
  }
  __device__ __forceinline__ void load(const float* p) { q = *reinterpret_cast<const float4*>(p); }
  __device__ __forceinline__ void get(float v[4]) const {
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
  }
};
template <>
struct Raw4<true> {
  using Elem = uint16_t;
  uint2 q;
  __device__ __forceinline__ void load(const float*, const uint16_t* b, int64_t i) {
    q = *reinterpret_cast<const uint2*>(b + i);
  }
  __device__ __forceinline__ void load(const uint16_t* p) {
    q = *reinterpret_cast<const uint2*>(p);
  }
  __device__ __forceinline__ void get(float v[4]) const {
    v[0] = __uint_as_float(q.x << 16);
    v[1] = __uint_as_float(q.x & 0xFFFF0000u);
    v[2] = __uint_as_float(q.y << 16);
    v[3] = __uint_as_float(q.y & 0xFFFF0000u);
  }
};

// load4 under another name, for structs whose own load4 hides it.
__device__ __forceinline__ void load4_at(const float* f, const uint16_t* b, int64_t i, float v[4]) {
  load4(f, b, i, v);
}

// The tiles of 256 rows x 64 columns a block takes in turn (tile blockIdx.x, then every
// gridDim.x-th), walked by adding a fixed step of rows and columns instead of dividing
// each tile's index, in 32-bit counters (tile_walk_fits: at most 2^31 tiles).
struct TileWalk {
  uint32_t col_tiles, tiles, tile, row, col, step_rows, step_cols;
  uint32_t stride;
  __device__ explicit TileWalk(const Geometry& G) : TileWalk(G, blockIdx.x, gridDim.x) {}
  // Tile `first`, then every `step`-th: a block's share of the tiles, or a share of one
  // of several groups of kThreads threads in a block.
  __device__ TileWalk(const Geometry& G, uint32_t first, uint32_t step)
      : col_tiles(static_cast<uint32_t>((G.cols + 63) / 64)),
        tiles(col_tiles * static_cast<uint32_t>((G.rows + 255) / 256)),
        tile(first),
        row(tile / col_tiles),
        col(tile % col_tiles),
        step_rows(step / col_tiles),
        step_cols(step % col_tiles),
        stride(step) {}
  __device__ bool more() const { return tile < tiles; }
  __device__ void next() {
    tile += stride;
    row += step_rows;
    col += step_cols;
    if (col >= col_tiles) {
      col -= col_tiles;
      ++row;
    }
  }
  __device__ int64_t r() const { return int64_t{row} * 256; }  // the tile's first row, column
  __device__ int64_t c() const { return int64_t{col} * 64; }
};

inline bool tile_walk_fits(int64_t rows, int64_t cols) {
  return ((cols + 63) / 64) * ((rows + 255) / 256) <= (int64_t{1} << 31);
}

// The scale group of the piece at (r, c): no division where the tensor has one scale.
__device__ __forceinline__ int64_t group_of(const Geometry& G, int64_t r, int64_t c) {
  if (G.group_cols == 1 && G.block_rows >= G.rows) return 0;
  return (r / G.block_rows) * G.group_cols + c / G.block_cols;
}

// Inclusive segmented reduction over lanes whose keys are contiguous runs; the last lane
// of each run ends up with the run's total.
template <class T, class Op>
__device__ __forceinline__ T segmented_reduce(int64_t key, T v, Op op) {
  const int lane = gpu::lane_id();
#pragma unroll
  for (int o = 1; o < kWarpSize; o <<= 1) {
    const T vo = gpu::shfl_up(v, o);
    const int64_t ko = gpu::shfl_up(key, o);
    if (lane >= o && ko == key) v = op(v, vo);
  }
  return v;
}

__device__ __forceinline__ bool last_of_run(int64_t key) {
  const int64_t next = gpu::shfl_down(key, 1);
  return gpu::lane_id() == kWarpSize - 1 || next != key;
}

// The tensor's amax (finite values) into one device word: a warp and block reduction,
// then one atomic per block.
__device__ inline void flush_block_amax(uint32_t m, uint32_t* out) {
  __shared__ uint32_t block_max[kWarps];
  m = warp_max(m);
  if (gpu::lane_id() == 0) block_max[gpu::warp_id()] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t mm = 0;
    for (int w = 0; w < kWarps; ++w) mm = max(mm, block_max[w]);
    if (mm) atomicMax(out, mm);
  }
}

__device__ __forceinline__ uint32_t finite_abs_max(uint32_t m, float v) {
  const uint32_t a = __float_as_uint(v) & 0x7FFFFFFFu;
  return a < 0x7F800000u ? max(m, a) : m;
}

// The formats and overflow mode the hardware converts (on sm_89+; elsewhere the same
// instantiation runs the software codec).
template <Format F>
constexpr bool hw_format() {
  return F == Format::E4M3FN || F == Format::E5M2;
}

// The codec's NaN codes (which keep the sign) for the NaN elements of y in `word`, where
// the hardware conversion gives one NaN for every sign.
template <Format F>
__device__ __forceinline__ uint32_t patch_nan_codes(uint32_t word, const float y[4]) {
  constexpr CodecSpec s = codec_spec(F);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t u = float_bits(y[k]);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
      word = (word & ~(0xFFu << (8 * k))) |
             (static_cast<uint32_t>(codec_detail::nan_code(s, (u >> 31) != 0)) << (8 * k));
    }
  }
  return word;
}

// Codes of four scaled values y (element k in byte k of the result) and, when asked,
// their dequantized values decode(code) * si. kNanCodes false: the caller knows y has no
// NaN or patches the NaN codes itself (patch_nan_codes), as count4_finite's callers do.
template <Format F, bool kHw, bool kDequant, bool kNanCodes = true>
__device__ __forceinline__ uint32_t encode4(const float y[4], float si, Overflow ov,
                                            const float* lut, float dq[4]) {
  constexpr CodecSpec s = codec_spec(F);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(FP8WB_HIP)
  if constexpr (kHw && hw_format<F>()) {
    constexpr __nv_fp8_interpretation_t kind = F == Format::E4M3FN ? __NV_E4M3 : __NV_E5M2;
    // Two conversions of two elements each, packed in one word (element 0 in the low byte:
    // the instruction's second source goes to the low byte of its result).
    uint32_t word;
    if constexpr (F == Format::E4M3FN) {
      asm("{.reg .b16 lo, hi;\n\t"
          "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n\t"
          "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n\t"
          "mov.b32 %0, {lo, hi};}"
          : "=r"(word)
          : "f"(y[0]), "f"(y[1]), "f"(y[2]), "f"(y[3]));
    } else {
      asm("{.reg .b16 lo, hi;\n\t"
          "cvt.rn.satfinite.e5m2x2.f32 lo, %2, %1;\n\t"
          "cvt.rn.satfinite.e5m2x2.f32 hi, %4, %3;\n\t"
          "mov.b32 %0, {lo, hi};}"
          : "=r"(word)
          : "f"(y[0]), "f"(y[1]), "f"(y[2]), "f"(y[3]));
    }
    if constexpr (kNanCodes) {
      // The instruction gives one NaN; the codec's keeps the sign.
      bool any_nan = false;
#pragma unroll
      for (int k = 0; k < 4; ++k) any_nan |= (float_bits(y[k]) & 0x7FFFFFFFu) > 0x7F800000u;
      if (any_nan) word = patch_nan_codes<F>(word, y);
    }
    if constexpr (kDequant) {
      const __half2 h0(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word), kind));
      const __half2 h1(
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> 16), kind));
      const float2 f0 = __half22float2(h0), f1 = __half22float2(h1);
      // Rounded products (no fused multiply-add into the caller's x - dq), as the codec.
      dq[0] = __fmul_rn(f0.x, si);
      dq[1] = __fmul_rn(f0.y, si);
      dq[2] = __fmul_rn(f1.x, si);
      dq[3] = __fmul_rn(f1.y, si);
    }
    return word;
  }
#endif
  uint32_t word = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint8_t c = encode_rne_bits(float_bits(y[k]), s, ov);
    word |= static_cast<uint32_t>(c) << (8 * k);
    if constexpr (kDequant) dq[k] = __fmul_rn(lut[c], si);
  }
  return word;
}

// Four elements: codes (element k in byte k of `word`), |y| bits of y = x * scale (for
// the saturation test and the histogram) and, when asked, the dequantized values.
template <Format F, bool kHw, bool kDequant, bool kNanCodes = true>
__device__ __forceinline__ uint32_t quantize4(const float v[4], float sc, float si, Overflow ov,
                                              const float* lut, float y[4], float dq[4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) y[k] = v[k] * sc;
  return encode4<F, kHw, kDequant, kNanCodes>(y, si, ov, lut, dq);
}

// A 4 x 4 byte transpose in eight byte permutes: t[k] holds byte k of w[0], w[1], w[2],
// w[3] in that order (column k of four rows of codes).
__device__ __forceinline__ void transpose_bytes4(const uint32_t w[4], uint32_t t[4]) {
  const uint32_t a = __byte_perm(w[0], w[1], 0x5140), b = __byte_perm(w[0], w[1], 0x7362);
  const uint32_t c = __byte_perm(w[2], w[3], 0x5140), d = __byte_perm(w[2], w[3], 0x7362);
  t[0] = __byte_perm(a, c, 0x5410);
  t[1] = __byte_perm(a, c, 0x7632);
  t[2] = __byte_perm(b, d, 0x5410);
  t[3] = __byte_perm(b, d, 0x7632);
}

// A piece's sixteen rows of four codes, transposed (t[q][k]: column k of rows 4q..4q+3),
// into codes_t (`rows` codes a column): 16 bytes of each of the piece's four columns.
__device__ __forceinline__ void store_transposed16(uint8_t* codes_t, int64_t rows, int64_t r0,
                                                   int64_t c0, const uint32_t t[4][4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    *reinterpret_cast<uint4*>(codes_t + (c0 + k) * rows + r0) =
        make_uint4(t[0][k], t[1][k], t[2][k], t[3][k]);
  }
}

// Row r of a piece's four codes (`word`, element k in byte k) into the row-major codes
// (where given) and the transposed ones (kTrans), one byte at a time there.
template <bool kTrans>
__device__ __forceinline__ void store_codes_row(uint8_t* codes, uint8_t* codes_t, int64_t rows,
                                                int64_t cols, int64_t r, int64_t c0,
                                                uint32_t word) {
  if (codes) *reinterpret_cast<uint32_t*>(codes + r * cols + c0) = word;
  if constexpr (kTrans) {
    for (int k = 0; k < 4; ++k) codes_t[(c0 + k) * rows + r] = (word >> (8 * k)) & 0xFFu;
  }
}

#if defined(FP8WB_HIP)
// The tile kernels' blocks are 16 x 16 threads, twice HIP's kThreads, by which their block
// reductions and lane histograms are sized: AMD GPUs take the row-walk kernels instead.
constexpr bool kTileKernels = false;
#else
constexpr bool kTileKernels = true;
#endif

// Calls fn(FormatTag<F>, std::integral_constant<bool, kHw>) for the element format, with
// kHw true only for the formats the hardware converts and when `hw` asks for it.
template <class Fn>
void dispatch_codec(Format f, bool hw, Fn&& fn) {
  dispatch_element_format(f, [&](auto tag) {
    constexpr Format F = decltype(tag)::value;
    if constexpr (hw_format<F>()) {
      if (hw) {
        fn(tag, std::true_type{});
        return;
      }
    }
    fn(tag, std::false_type{});
  });
}

// The launchers of each family (cudaGetLastError checked). `hw`: the format is E4M3FN or
// E5M2 with saturation, so the hardware conversion may be used.
// quantize_rows_cuda.cu:
void launch_row_walk(Format f, bool hw, const DeviceTensor& x, const Geometry& G, const float* sc,
                     const float* si, Overflow ov, uint8_t* codes, uint8_t* codes_t,
                     const DeviceStatsTargets& t, cudaStream_t st);
void launch_generic(Format f, const DeviceTensor& x, const Geometry& G, const float* sc,
                    const float* si, Overflow ov, uint8_t* codes, uint8_t* codes_t,
                    const DeviceStatsTargets& t, cudaStream_t st);
// quantize_tiles_cuda.cu:
bool tile_stats_ok(const DeviceTensor& x, const Geometry& G, const uint8_t* codes,
                   const uint8_t* codes_t);
void launch_tile_stats(Format f, const DeviceTensor& x, const Geometry& G, const float* sc,
                       const float* si, uint8_t* codes, uint8_t* codes_t,
                       const DeviceStatsTargets& t, cudaStream_t st);
// quantize_keys_cuda.cu:
bool tile_keys_ok(const DeviceTensor& x, const Geometry& G, const uint8_t* codes,
                  const uint8_t* codes_t, bool histogram);
void launch_tile_keys(Format f, const DeviceTensor& x, const Geometry& G, const float* sc,
                      const float* si, uint8_t* codes, uint8_t* codes_t,
                      const DeviceStatsTargets& t, cudaStream_t st);
void launch_tile_transposed(Format f, bool hw, const DeviceTensor& x, const Geometry& G,
                            const float* sc, Overflow ov, uint8_t* codes, uint8_t* codes_t,
                            uint32_t* amax_bits, cudaStream_t st);
void launch_flat(Format f, bool hw, const DeviceTensor& x, const float* sc, Overflow ov,
                 uint8_t* codes, uint32_t* amax_bits, cudaStream_t st);
// quantize_cuda.cu:
void launch_scales(ScalingKind kind, int64_t groups, const float* amax, const float* tensor_amax,
                   const FormatInfo& info, int margin, bool pow2, bool rceil, float* scale,
                   float* scale_inv, uint8_t* codes, float* global_scale, cudaStream_t st);

}  // namespace fp8wb::qgpu
