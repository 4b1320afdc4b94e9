// defines (for the quantize_*_cuda.cu files only): the pieces the GPU quantize kernels
// share: block sizes, Geometry, vector loads, warp and block reductions of the counters
// (LaneStats), the four-element encode step (software codec or the hardware conversion),
// the counters read off four codes (count4), the fp32-then-fp64 square sums, the
// lane-private histograms' shared-memory set-up, and the launchers of each kernel family:
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
  __device__ explicit TileWalk(const Geometry& G)
      : col_tiles(static_cast<uint32_t>((G.cols + 63) / 64)),
        tiles(col_tiles * static_cast<uint32_t>((G.rows + 255) / 256)),
        tile(blockIdx.x),
        row(tile / col_tiles),
        col(tile % col_tiles),
        step_rows(gridDim.x / col_tiles),
        step_cols(gridDim.x % col_tiles) {}
  __device__ bool more() const { return tile < tiles; }
  __device__ void next() {
    tile += gridDim.x;
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

struct LaneStats {
  uint32_t numel = 0, zeros = 0, nonfinite = 0, underflow = 0, subnormal = 0, saturated = 0,
           amax = 0;
  double sq_err = 0, sq_sum = 0;
};

using gpu::warp_max;
using gpu::warp_sum;

// Reduces every lane's counters into the block, then one atomic per counter per block.
// lane_hist: kHistBins rows of kThreads lane-private counters (null: no histogram).
// zeros_in_first_bin: the lanes counted zero inputs in bin 0 (where a zero's exponent
// field puts it), to be moved to the zero bin here (count4 does).
__device__ inline void flush_block_stats(LaneStats ls, StatsBuffer* out, const uint32_t* lane_hist,
                                         bool zeros_in_first_bin = false) {
  __shared__ unsigned long long counts[kWarps][6];
  __shared__ double sums[kWarps][2];
  __shared__ uint32_t amax[kWarps];
  const int lane = gpu::lane_id(), warp = gpu::warp_id();
  const uint32_t c[6] = {ls.numel,     ls.zeros,     ls.nonfinite,
                         ls.underflow, ls.subnormal, ls.saturated};
#pragma unroll
  for (int i = 0; i < 6; ++i) {
    const unsigned long long s = warp_sum(static_cast<unsigned long long>(c[i]));
    if (lane == 0) counts[warp][i] = s;
  }
  const double e = warp_sum(ls.sq_err), q = warp_sum(ls.sq_sum);
  const uint32_t m = warp_max(ls.amax);
  if (lane == 0) {
    sums[warp][0] = e;
    sums[warp][1] = q;
    amax[warp] = m;
  }
  __syncthreads();
  if (threadIdx.x < 6) {
    unsigned long long s = 0;
    for (int w = 0; w < kWarps; ++w) s += counts[w][threadIdx.x];
    unsigned long long* dst[6] = {reinterpret_cast<unsigned long long*>(&out->numel),
                                  reinterpret_cast<unsigned long long*>(&out->zeros),
                                  reinterpret_cast<unsigned long long*>(&out->nonfinite),
                                  reinterpret_cast<unsigned long long*>(&out->underflow),
                                  reinterpret_cast<unsigned long long*>(&out->subnormal),
                                  reinterpret_cast<unsigned long long*>(&out->saturated)};
    if (s) atomicAdd(dst[threadIdx.x], s);
  } else if (threadIdx.x == 32 || threadIdx.x == 33) {
    double s = 0;
    for (int w = 0; w < kWarps; ++w) s += sums[w][threadIdx.x - 32];
    if (s != 0) atomicAdd(threadIdx.x == 32 ? &out->sq_err : &out->sq_sum, s);
  } else if (threadIdx.x == 64) {
    uint32_t mm = 0;
    for (int w = 0; w < kWarps; ++w) mm = max(mm, amax[w]);
    atomicMax(&out->amax_bits, mm);
  }
  if (lane_hist) {
    unsigned long long block_zeros = 0;
    if (zeros_in_first_bin) {
      for (int w = 0; w < kWarps; ++w) block_zeros += counts[w][1];
    }
    // A warp a bin: coalesced, conflict-free reads of the bin's row, then a warp sum.
    for (int b = warp; b < kHistBins; b += kWarps) {
      unsigned long long s = 0;
      for (int t = lane; t < kThreads; t += kWarpSize) s += lane_hist[b * kThreads + t];
      s = warp_sum(s);
      if (b == 0) s -= block_zeros;
      if (b == kHistZeroBin) s += block_zeros;
      if (lane == 0 && s) atomicAdd(reinterpret_cast<unsigned long long*>(&out->hist[b]), s);
    }
  }
}

// Squares go into per-row fp64 partials (re, rs) that the caller folds into the lane's
// and the map cell's sums once per row (fp32 squares overflow past 2^64).
// hist: this lane's column of the lane-private histogram (stride kThreads), or null.
template <Format F>
__device__ __forceinline__ void count_element(float v, const QuantizedElement& q, float scale,
                                              LaneStats& ls, double& re, double& rs,
                                              uint32_t* hist) {
  constexpr CodecSpec s = codec_spec(F);
  const uint32_t a = __float_as_uint(v) & 0x7FFFFFFFu;
  ls.numel++;
  ls.zeros += v == 0.0f;
  ls.nonfinite += !q.finite;
  ls.underflow += q.finite && v != 0.0f && q.dequant == 0.0f;
  ls.subnormal += is_subnormal_code(q.code, s);
  ls.saturated += q.saturated;
  if (q.finite) {
    ls.amax = max(ls.amax, a);
    const double e = static_cast<double>(v - q.dequant);  // the difference in fp32, as on the CPU
    re = fma(e, e, re);
    rs = fma(static_cast<double>(v), static_cast<double>(v), rs);
  }
  if (hist) {
    const int bin = !q.finite ? kHistNonfiniteBin : (a == 0 ? kHistZeroBin : hist_bin(v * scale));
    hist[bin * kThreads]++;
  }
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
// NaN or patches the NaN codes itself (patch_nan_codes), as count4 does.
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

// The smallest |y| bits that saturate (finite x whose x * scale rounds past the largest
// finite value): above 464 for E4M3FN (448 + half its spacing, which rounds to even 448),
// from 61440 for E5M2 (the tie rounds to the even 65536).
template <Format F>
constexpr uint32_t saturating_bits() {
  return F == Format::E4M3FN ? 0x43E80001u : 0x47700000u;
}

// Squares of four differences and four inputs (finite inputs only; the caller zeroes the
// rest) summed in fp32, then taken to fp64. Partials outside [2^-100, 2^126] (zeros,
// values whose squares would leave fp32's normal range) are summed in fp64 instead.
__device__ __forceinline__ void square_sums4(const float e[4], const float v[4], double& re,
                                             double& rs) {
  const float pe = fmaf(e[3], e[3], fmaf(e[2], e[2], fmaf(e[1], e[1], e[0] * e[0])));
  const float ps = fmaf(v[3], v[3], fmaf(v[2], v[2], fmaf(v[1], v[1], v[0] * v[0])));
  if (pe >= 0x1p-100f && pe <= 0x1p126f && ps >= 0x1p-100f && ps <= 0x1p126f) {
    re = pe;
    rs = ps;
    return;
  }
  re = rs = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    re = fma(static_cast<double>(e[k]), static_cast<double>(e[k]), re);
    rs = fma(static_cast<double>(v[k]), static_cast<double>(v[k]), rs);
  }
}

// Dynamic shared memory past the default 48 KB must be allowed once per kernel.
template <auto Kernel>
void allow_lane_hist() {
  static std::once_flag once;
  std::call_once(once, [] {
    FP8WB_GPU_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(Kernel),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kLaneHistBytes)));
  });
}

// Blocks of a kernel with lane-private histograms that fit on the GPU at once: each block
// flushes its histogram once, so more blocks than fit would only add flushes.
template <auto Kernel>
unsigned resident_hist_blocks(int64_t want) {
  allow_lane_hist<Kernel>();
  static const int per_sm = [] {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, kThreads, kLaneHistBytes) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      n = 2;
    }
    return std::max(1, n);
  }();
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(want, int64_t{sm_count()} * per_sm)));
}

#if defined(FP8WB_HIP)
// The tile kernels' blocks are 16 x 16 threads, twice HIP's kThreads, by which their block
// reductions and lane histograms are sized: AMD GPUs take the row-walk kernels instead.
constexpr bool kTileKernels = false;
#else
constexpr bool kTileKernels = true;
#endif

// hist_bin() of a finite y as the GPU counts it: the exponent field clamped to the fields
// of the first and last exponent bins, then shifted (two min/max and a subtraction the
// address arithmetic absorbs, where hist_bin() compares and selects).
__device__ __forceinline__ int hist_row(float y) {
  constexpr int kFirst = 127 + kHistMinExp, kLast = kFirst + kHistExpBins - 1;
  const int field = static_cast<int>((__float_as_uint(y) >> 23) & 0xFFu);
  return min(max(field, kFirst), kLast) - kFirst;
}

// One count in bin hist_row(y) of a lane's column of the lane-private histogram (hist:
// the lane's counter of bin 0; rows kThreads counters apart): the exponent field is
// clamped where it already stands as a byte offset (field * 1 KB, a row's size).
__device__ __forceinline__ void hist_inc(uint32_t* hist, float y) {
  constexpr uint32_t kRowBytes = kThreads * sizeof(uint32_t);
  static_assert(kRowBytes == 1024 || kRowBytes == 512, "a histogram row is 2^shift bytes");
  constexpr int kShift = kRowBytes == 1024 ? 10 : 9;
  constexpr uint32_t kFirst = 127 + kHistMinExp, kLast = kFirst + kHistExpBins - 1;
  const uint32_t field = (__float_as_uint(y) >> (23 - kShift)) & (0xFFu << kShift);
  const uint32_t off = min(max(field, kFirst << kShift), kLast << kShift) - (kFirst << kShift);
  atomicAdd(reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(hist) + off), 1u);
}

// Four elements' counters, amax and histogram from their codes (element k in byte k of
// `word`), for E4M3FN and E5M2 with saturation, where a code's magnitude byte tells zero,
// subnormal and largest: x, its scaled value y, its dequantized value dq. e and vf receive
// what the square sums take (the difference in fp32, as on the CPU, and x; zero where x is
// not finite). hist: this lane's column of the lane-private histogram; a zero input is
// counted in bin 0, where its exponent field puts it, and moved to the zero bin when the
// block flushes (flush_block_stats). The counters are lane-private: shared-memory atomic
// adds only spare the load and store of an increment.
//
// count4_finite counts the four when every x is finite and the scale is (nearly always),
// four codes at a time by byte arithmetic, testing saturation only where a code is the
// largest magnitude (a saturated element's code is), and returns true; else it counts
// nothing and returns false. It does not read the NaN codes, which therefore need not be
// patched (encode4's kNanCodes) before it: y has no NaN when x and the scale are finite.
// kHistGiven: hist is not null (no test an element).
template <Format F, bool kHistGiven = false>
__device__ __forceinline__ bool count4_finite(const float x[4], const float y[4], const float dq[4],
                                              uint32_t word, LaneStats& ls, uint32_t* hist,
                                              float e[4], float vf[4], bool finite_scale) {
  constexpr CodecSpec s = codec_spec(F);
  uint32_t a[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) a[k] = float_bits(x[k]) & 0x7FFFFFFFu;
  const uint32_t a4 = max(max(a[0], a[1]), max(a[2], a[3]));
  if (a4 >= 0x7F800000u || !finite_scale) return false;
  ls.numel += 4;
  ls.amax = max(ls.amax, a4);
  const uint32_t mags = word & 0x7F7F7F7Fu;
  // Bit 7 of each byte: the magnitude is not zero; it is at least the smallest normal.
  const uint32_t nonzero = (mags + 0x7F7F7F7Fu) & 0x80808080u;
  const uint32_t normal = (mags + (0x80u - (1u << s.mbits)) * 0x01010101u) & 0x80808080u;
  const uint32_t nonzero_codes = __popc(nonzero);
  ls.subnormal += __popc(nonzero & ~normal);
  const uint32_t top = mags ^ (uint32_t{s.max_mag} * 0x01010101u);  // a zero byte: largest
  const bool largest = (top - 0x01010101u) & ~top & 0x80808080u;
  if (nonzero_codes != 4 || largest) {  // one branch for both rare cases
    if (nonzero_codes != 4) {           // a zero input or an underflow
      const uint32_t zeros = (a[0] == 0) + (a[1] == 0) + (a[2] == 0) + (a[3] == 0);
      ls.zeros += zeros;
      ls.underflow += 4 - nonzero_codes - zeros;  // zero codes of nonzero inputs
    }
    if (largest) {
#pragma unroll
      for (int k = 0; k < 4; ++k)
        ls.saturated += (float_bits(y[k]) & 0x7FFFFFFFu) >= saturating_bits<F>();
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    e[k] = x[k] - dq[k];
    vf[k] = x[k];
    if (kHistGiven || hist) hist_inc(hist, y[k]);
  }
  return true;
}

// count4_finite, and any four elements else (word with its NaN codes).
template <Format F>
__device__ __forceinline__ void count4(const float x[4], const float y[4], const float dq[4],
                                       uint32_t word, LaneStats& ls, uint32_t* hist, float e[4],
                                       float vf[4]) {
  if (count4_finite<F>(x, y, dq, word, ls, hist, e, vf, true)) return;
  constexpr CodecSpec s = codec_spec(F);
  ls.numel += 4;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t a = float_bits(x[k]) & 0x7FFFFFFFu;
    const bool fin = a < 0x7F800000u;
    const uint32_t m = (word >> (8 * k)) & 0x7Fu;
    ls.zeros += a == 0;
    ls.nonfinite += !fin;
    ls.underflow += fin && a != 0 && m == 0;
    ls.subnormal += m - 1u < (1u << s.mbits) - 1u;
    ls.saturated += fin && (float_bits(y[k]) & 0x7FFFFFFFu) >= saturating_bits<F>();
    ls.amax = fin ? max(ls.amax, a) : ls.amax;
    e[k] = fin ? x[k] - dq[k] : 0.0f;
    vf[k] = fin ? x[k] : 0.0f;
    if (hist) {
      if (fin) {
        hist_inc(hist, y[k]);
      } else {
        atomicAdd(&hist[kHistNonfiniteBin * kThreads], 1u);
      }
    }
  }
}

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
