// Scaled quantization on the GPU with every statistic in the same pass.
//
// Work is cut into items of one window of 4 x warp-width columns x 32 rows; a warp takes
// an item, each lane four consecutive columns (16-byte fp32 loads, coalesced across the
// warp), and walks down the rows. Counters and sums stay in registers, the exponent
// histogram in a lane-private column of shared memory (no atomics, no bank conflicts);
// the error map is flushed with one atomic per cell touched (a segmented warp reduction)
// when the walk leaves a row of cells. Tensorwise passes without statistics or
// transposed codes take a flat kernel, 16 elements a thread. Shapes or pointers the fast
// paths cannot take go to a plain element-per-thread kernel.
//
// E4M3FN and E5M2 with saturation (the FP8 training formats) convert with the hardware's
// cvt.rn.satfinite instructions where the GPU has them (sm_89+), two elements an
// instruction, and decode with cvt.rn.f16x2; bit for bit the software codec's result
// (tests/gpu: every fp32 bit pattern). Every other format, overflow mode and GPU takes
// the software codec.
#include <algorithm>
#include <cfloat>
#include <climits>
#include <memory>
#include <mutex>

#if !defined(FP8WB_HIP)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#include "fp8wb/kernels/quantize_cuda.h"
#include "fp8wb/kernels/quantize_element.h"
#include "fp8wb/kernels/scale_math.h"
#include "gpu_runtime.h"
#include "gpu_warp.h"

namespace fp8wb {
namespace {

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

struct Geometry {
  int64_t rows, cols, block_rows, block_cols, group_cols;
  int64_t cell_rows, cell_cols, map_cols, cells;
  bool map;
};

Geometry geometry(const GroupLayout& L, const DeviceStatsTargets& t) {
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

// load4 under another name, for structs whose own load4 hides it.
__device__ __forceinline__ void load4_at(const float* f, const uint16_t* b, int64_t i, float v[4]) {
  load4(f, b, i, v);
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
__device__ void flush_block_stats(LaneStats ls, StatsBuffer* out, const uint32_t* lane_hist) {
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
    // A warp a bin: coalesced, conflict-free reads of the bin's row, then a warp sum.
    for (int b = warp; b < kHistBins; b += kWarps) {
      unsigned long long s = 0;
      for (int t = lane; t < kThreads; t += kWarpSize) s += lane_hist[b * kThreads + t];
      s = warp_sum(s);
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
__device__ void flush_block_amax(uint32_t m, uint32_t* out) {
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

// Codes of four scaled values y (element k in byte k of the result) and, when asked,
// their dequantized values decode(code) * si.
template <Format F, bool kHw, bool kDequant>
__device__ __forceinline__ uint32_t encode4(const float y[4], float si, Overflow ov,
                                            const float* lut, float dq[4]) {
  constexpr CodecSpec s = codec_spec(F);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(FP8WB_HIP)
  if constexpr (kHw && hw_format<F>()) {
    constexpr __nv_fp8_interpretation_t kind = F == Format::E4M3FN ? __NV_E4M3 : __NV_E5M2;
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(y[0], y[1]), __NV_SATFINITE, kind);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(y[2], y[3]), __NV_SATFINITE, kind);
    uint32_t word = lo | (hi << 16);
    // The instruction gives one NaN; the codec's keeps the sign.
    bool any_nan = false;
#pragma unroll
    for (int k = 0; k < 4; ++k) any_nan |= (float_bits(y[k]) & 0x7FFFFFFFu) > 0x7F800000u;
    if (any_nan) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint32_t u = float_bits(y[k]);
        if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
          word = (word & ~(0xFFu << (8 * k))) |
                 (static_cast<uint32_t>(codec_detail::nan_code(s, (u >> 31) != 0)) << (8 * k));
        }
      }
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
template <Format F, bool kHw, bool kDequant>
__device__ __forceinline__ uint32_t quantize4(const float v[4], float sc, float si, Overflow ov,
                                              const float* lut, float y[4], float dq[4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) y[k] = v[k] * sc;
  return encode4<F, kHw, kDequant>(y, si, ov, lut, dq);
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

// kStats: every statistic into `stats` (its amax included); else kAmax: only the amax,
// into amax_out (what delayed scaling records for the next step's scale). kHw: the
// hardware conversion where the GPU and format have it.
template <Format F, bool kStats, bool kAmax, bool kHw>
__global__ void __launch_bounds__(kThreads)
    quantize_fast_kernel(const float* xf, const uint16_t* xb, Geometry G,
                         const float* __restrict__ scale, const float* __restrict__ scale_inv,
                         Overflow ov, uint8_t* codes, uint8_t* codes_t, StatsBuffer* stats,
                         double* map, bool with_hist, uint32_t* amax_out) {
  constexpr CodecSpec s = codec_spec(F);
  constexpr bool kCodeStats = kHw && hw_format<F>();  // statistics from the code bits
  extern __shared__ uint32_t lane_hist[];             // kStats && with_hist: kLaneHistBytes
  __shared__ float lut[256];
  for (int c = threadIdx.x; c < 256; c += blockDim.x) lut[c] = decode(static_cast<uint8_t>(c), s);
  if (kStats && with_hist) {
    for (int i = threadIdx.x; i < kHistBins * kThreads; i += blockDim.x) lane_hist[i] = 0;
  }
  __syncthreads();
  const int lane = gpu::lane_id(), warp = gpu::warp_id();
  uint32_t* my_hist = kStats && with_hist ? lane_hist + threadIdx.x : nullptr;
  const int64_t windows = (G.cols + kWindow - 1) / kWindow;
  const int64_t items = windows * ((G.rows + kRowChunk - 1) / kRowChunk);
  const bool trans = codes_t != nullptr;
  LaneStats ls;
  for (int64_t item = int64_t{blockIdx.x} * kWarps + warp; item < items;
       item += int64_t{gridDim.x} * kWarps) {
    const int64_t col = (item % windows) * kWindow + lane * 4;
    const bool active = col < G.cols;
    const int64_t r0 = (item / windows) * kRowChunk;
    const int64_t r1 = min(G.rows, r0 + kRowChunk);
    // 64-bit divisions cost ~100 instructions each: work out group and cell once per
    // item and step them as the rows go by.
    const int64_t gcol = active ? col / G.block_cols : 0;
    int64_t grow = r0 / G.block_rows, grow_end = (grow + 1) * G.block_rows;
    float sc = active ? scale[grow * G.group_cols + gcol] : 1.0f;
    float si = active ? scale_inv[grow * G.group_cols + gcol] : 1.0f;
    int64_t cell_row = kStats && G.map ? r0 / G.cell_rows : 0;
    int64_t cell_end = (cell_row + 1) * G.cell_rows;
    const int64_t cell_col = kStats && G.map && active ? col / G.cell_cols : 0;
    // This lane's squared-error and squared sums since the last flush (the tensor's sums
    // take them in at each flush).
    double cell_err = 0, cell_sum = 0;
    auto flush_cells = [&]() {
      if (!kStats) return;
      ls.sq_err += cell_err;
      ls.sq_sum += cell_sum;
      if (!G.map) {
        cell_err = cell_sum = 0;
        return;
      }
      const int64_t key = active ? cell_row * G.map_cols + cell_col : LLONG_MAX;
      const double e = segmented_reduce(key, cell_err, [](double a, double b) { return a + b; });
      const double q = segmented_reduce(key, cell_sum, [](double a, double b) { return a + b; });
      if (last_of_run(key) && active) {
        atomicAdd(&map[key], e);
        atomicAdd(&map[G.cells + key], q);
      }
      cell_err = cell_sum = 0;
    };
    // Transposed codes are staged for kStage rows: 32 (whole 32-byte sectors a column)
    // where no statistics take registers, else 16.
    constexpr int kStage = kStats ? 16 : 32;
    for (int64_t rb = r0; rb < r1; rb += kStage) {
      uint32_t t[4][kStage / 4] = {};  // transposed staging: 4 columns x kStage rows of codes
#pragma unroll
      for (int half = 0; half < kStage / 8; ++half) {
        // Eight rows' loads in flight before the first use.
        float v[8][4];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int64_t r = rb + half * 8 + j;
          if (active && r < r1) load4(xf, xb, r * G.cols + col, v[j]);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int i = half * 8 + j;
          const int64_t r = rb + i;
          if (r < r1) {
            if (kStats && G.map && r == cell_end) {
              flush_cells();
              ++cell_row;
              cell_end += G.cell_rows;
            }
            if (r == grow_end) {
              ++grow;
              grow_end += G.block_rows;
              if (active) {
                sc = scale[grow * G.group_cols + gcol];
                si = scale_inv[grow * G.group_cols + gcol];
              }
            }
            if (active) {
              uint32_t word = 0;
              if constexpr (kStats && !kCodeStats) {
                // The software codec's element step, flags from its rounding.
                double re = 0, rs = 0;
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                  const QuantizedElement q =
                      quantize_element(v[j][k], sc, si, s, ov, [&](uint8_t c) { return lut[c]; });
                  word |= static_cast<uint32_t>(q.code) << (8 * k);
                  count_element<F>(v[j][k], q, sc, ls, re, rs, my_hist);
                }
                cell_err += re;
                cell_sum += rs;
              } else {
                float y[4], dq[4];
                word = quantize4<F, kHw, kStats>(v[j], sc, si, ov, lut, y, dq);
                if constexpr (kStats) {
                  float e[4], vf[4];
#pragma unroll
                  for (int k = 0; k < 4; ++k) {
                    const uint32_t a = float_bits(v[j][k]) & 0x7FFFFFFFu;
                    const bool fin = a < 0x7F800000u;
                    const uint32_t m = (word >> (8 * k)) & 0x7Fu;
                    ls.zeros += a == 0;
                    ls.nonfinite += !fin;
                    ls.underflow += fin && a != 0 && m == 0;
                    ls.subnormal += m - 1u < (1u << s.mbits) - 1u;
                    ls.saturated += fin && (float_bits(y[k]) & 0x7FFFFFFFu) >= saturating_bits<F>();
                    ls.amax = fin ? max(ls.amax, a) : ls.amax;
                    e[k] = fin ? v[j][k] - dq[k] : 0.0f;  // the difference in fp32, as on the CPU
                    vf[k] = fin ? v[j][k] : 0.0f;
                    if (my_hist) {
                      const int bin =
                          !fin ? kHistNonfiniteBin : (a == 0 ? kHistZeroBin : hist_bin(y[k]));
                      my_hist[bin * kThreads]++;
                    }
                  }
                  ls.numel += 4;
                  double re, rs;
                  square_sums4(e, vf, re, rs);
                  cell_err += re;
                  cell_sum += rs;
                }
              }
#pragma unroll
              for (int k = 0; k < 4; ++k) {
                t[k][i / 4] |= ((word >> (8 * k)) & 0xFFu) << (8 * (i % 4));
                if (kAmax) ls.amax = finite_abs_max(ls.amax, v[j][k]);
              }
              if (codes) *reinterpret_cast<uint32_t*>(codes + r * G.cols + col) = word;
            }
          }
        }
      }
      if (trans && active) {
        if (rb + kStage <= r1 && G.rows % 16 == 0) {
#pragma unroll
          for (int k = 0; k < 4; ++k) {
#pragma unroll
            for (int q = 0; q < kStage / 16; ++q) {
              *reinterpret_cast<uint4*>(codes_t + (col + k) * G.rows + rb + 16 * q) =
                  make_uint4(t[k][4 * q], t[k][4 * q + 1], t[k][4 * q + 2], t[k][4 * q + 3]);
            }
          }
        } else {
          for (int i = 0; i < kStage && rb + i < r1; ++i) {
            for (int k = 0; k < 4; ++k) {
              codes_t[(col + k) * G.rows + rb + i] =
                  static_cast<uint8_t>(t[k][i / 4] >> (8 * (i % 4)));
            }
          }
        }
      }
    }
    flush_cells();
  }
  if (kStats) {
    __syncthreads();
    flush_block_stats(ls, stats, with_hist ? lane_hist : nullptr);
  } else if (kAmax) {
    flush_block_amax(ls.amax, amax_out);
  }
}

// No statistics, transposed codes (with the row-major ones and the amax where asked): a
// 16 x 16 block takes a tile of 64 columns x 256 rows, a thread 4 columns x 16 rows
// (sixteen loads in flight), one scale a thread (tensorwise or 128x128 blocks), and
// stores 16 bytes of each of its columns' transposed rows.
template <Format F, bool kHw, bool kAmax>
__global__ void __launch_bounds__(kThreads)
    tile_quantize_t_kernel(const float* xf, const uint16_t* xb, Geometry G,
                           const float* __restrict__ scale, Overflow ov, uint8_t* codes,
                           uint8_t* __restrict__ codes_t, uint32_t* amax_out) {
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int64_t col_tiles = (G.cols + 63) / 64;
  const int64_t tiles = col_tiles * ((G.rows + 255) / 256);
  uint32_t m = 0;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t c0 = (tile % col_tiles) * 64 + tx * 4;
    const int64_t r0 = (tile / col_tiles) * 256 + ty * 16;
    if (c0 >= G.cols || r0 >= G.rows) continue;
    const float sc = scale[(r0 / G.block_rows) * G.group_cols + c0 / G.block_cols];
    float v[16][4];
#pragma unroll
    for (int i = 0; i < 16; ++i) load4(xf, xb, (r0 + i) * G.cols + c0, v[i]);
    uint32_t t[4][4] = {};
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float y[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        y[k] = v[i][k] * sc;
        if (kAmax) m = finite_abs_max(m, v[i][k]);
      }
      const uint32_t w = encode4<F, kHw, false>(y, 1.0f, ov, nullptr, nullptr);
      if (codes) *reinterpret_cast<uint32_t*>(codes + (r0 + i) * G.cols + c0) = w;
#pragma unroll
      for (int k = 0; k < 4; ++k) t[k][i / 4] |= ((w >> (8 * k)) & 0xFFu) << (8 * (i % 4));
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      *reinterpret_cast<uint4*>(codes_t + (c0 + k) * G.rows + r0) =
          make_uint4(t[k][0], t[k][1], t[k][2], t[k][3]);
    }
  }
  if (kAmax) flush_block_amax(m, amax_out);
}

// Every statistic in the tile layout of tile_quantize_t_kernel (codes, and transposed
// codes where asked), for E4M3FN and E5M2 with saturation: flags off the codes, squares
// summed four at a time. A tile lies inside one error-map cell (or there is no map), so a
// block adds its tile's sums to the map once.
template <Format F, bool kHw>
__global__ void __launch_bounds__(kThreads)
    tile_stats_kernel(const float* xf, const uint16_t* xb, Geometry G,
                      const float* __restrict__ scale, const float* __restrict__ scale_inv,
                      uint8_t* codes, uint8_t* __restrict__ codes_t, StatsBuffer* stats,
                      double* map, bool with_hist) {
  constexpr CodecSpec s = codec_spec(F);
  extern __shared__ uint32_t lane_hist[];  // with_hist: kLaneHistBytes
  __shared__ float lut[256];
  __shared__ double tile_sums[kWarps][2];
  for (int c = threadIdx.x; c < 256; c += blockDim.x) lut[c] = decode(static_cast<uint8_t>(c), s);
  if (with_hist) {
    for (int i = threadIdx.x; i < kHistBins * kThreads; i += blockDim.x) lane_hist[i] = 0;
  }
  __syncthreads();
  uint32_t* my_hist = with_hist ? lane_hist + threadIdx.x : nullptr;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int64_t col_tiles = (G.cols + 63) / 64;
  const int64_t tiles = col_tiles * ((G.rows + 255) / 256);
  LaneStats ls;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t tc = (tile % col_tiles) * 64, tr = (tile / col_tiles) * 256;
    const int64_t c0 = tc + tx * 4, r0 = tr + ty * 16;
    double te = 0, ts = 0;
    if (c0 < G.cols && r0 < G.rows) {
      const int64_t g = (r0 / G.block_rows) * G.group_cols + c0 / G.block_cols;
      const float sc = scale[g], si = scale_inv[g];
      uint32_t t[4][4] = {};
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float v[8][4];
#pragma unroll
        for (int j = 0; j < 8; ++j) load4(xf, xb, (r0 + half * 8 + j) * G.cols + c0, v[j]);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int i = half * 8 + j;
          float y[4], dq[4], e[4], vf[4];
          const uint32_t word =
              quantize4<F, kHw, true>(v[j], sc, si, Overflow::Saturate, lut, y, dq);
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const uint32_t a = float_bits(v[j][k]) & 0x7FFFFFFFu;
            const bool fin = a < 0x7F800000u;
            const uint32_t m = (word >> (8 * k)) & 0x7Fu;
            ls.zeros += a == 0;
            ls.nonfinite += !fin;
            ls.underflow += fin && a != 0 && m == 0;
            ls.subnormal += m - 1u < (1u << s.mbits) - 1u;
            ls.saturated += fin && (float_bits(y[k]) & 0x7FFFFFFFu) >= saturating_bits<F>();
            ls.amax = fin ? max(ls.amax, a) : ls.amax;
            e[k] = fin ? v[j][k] - dq[k] : 0.0f;  // the difference in fp32, as on the CPU
            vf[k] = fin ? v[j][k] : 0.0f;
            if (my_hist) {
              const int bin = !fin ? kHistNonfiniteBin : (a == 0 ? kHistZeroBin : hist_bin(y[k]));
              my_hist[bin * kThreads]++;
            }
            t[k][i / 4] |= ((word >> (8 * k)) & 0xFFu) << (8 * (i % 4));
          }
          ls.numel += 4;
          double re, rs;
          square_sums4(e, vf, re, rs);
          te += re;
          ts += rs;
          if (codes) *reinterpret_cast<uint32_t*>(codes + (r0 + i) * G.cols + c0) = word;
        }
      }
      if (codes_t) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          *reinterpret_cast<uint4*>(codes_t + (c0 + k) * G.rows + r0) =
              make_uint4(t[k][0], t[k][1], t[k][2], t[k][3]);
        }
      }
    }
    ls.sq_err += te;
    ls.sq_sum += ts;
    if (map) {
      te = warp_sum(te);
      ts = warp_sum(ts);
      if (gpu::lane_id() == 0) {
        tile_sums[gpu::warp_id()][0] = te;
        tile_sums[gpu::warp_id()][1] = ts;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        double se = 0, ss = 0;
        for (int w = 0; w < kWarps; ++w) {
          se += tile_sums[w][0];
          ss += tile_sums[w][1];
        }
        const int64_t cell = (tr / G.cell_rows) * G.map_cols + tc / G.cell_cols;
        if (se != 0) atomicAdd(&map[cell], se);
        if (ss != 0) atomicAdd(&map[G.cells + cell], ss);
      }
      __syncthreads();
    }
  }
  __syncthreads();
  flush_block_stats(ls, stats, with_hist ? lane_hist : nullptr);
}

// Tensorwise (one scale), no statistics, no transposed codes: 16 consecutive elements a
// thread, 16-byte loads and one 16-byte store of codes; kAmax: the tensor's amax too.
template <Format F, bool kAmax, bool kHw>
__global__ void __launch_bounds__(kThreads)
    quantize_flat_kernel(const float* __restrict__ xf, const uint16_t* __restrict__ xb, int64_t n16,
                         const float* __restrict__ scale, Overflow ov, uint8_t* __restrict__ codes,
                         uint32_t* amax_out) {
  const float sc = *scale;
  uint32_t m = 0;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n16;
       i += int64_t{gridDim.x} * blockDim.x) {
    float v[16];
    if (xf) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float4 f = reinterpret_cast<const float4*>(xf)[i * 4 + q];
        v[4 * q] = f.x;
        v[4 * q + 1] = f.y;
        v[4 * q + 2] = f.z;
        v[4 * q + 3] = f.w;
      }
    } else {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const uint4 b = reinterpret_cast<const uint4*>(xb)[i * 2 + q];
        const uint32_t w[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          v[8 * q + 2 * k] = __uint_as_float(w[k] << 16);
          v[8 * q + 2 * k + 1] = __uint_as_float(w[k] & 0xFFFF0000u);
        }
      }
    }
    uint32_t out[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float y[4];
      out[q] = quantize4<F, kHw, false>(v + 4 * q, sc, 1.0f, ov, nullptr, y, nullptr);
    }
    reinterpret_cast<uint4*>(codes)[i] = make_uint4(out[0], out[1], out[2], out[3]);
    if (kAmax) {
#pragma unroll
      for (int k = 0; k < 16; ++k) m = finite_abs_max(m, v[k]);
    }
  }
  if (kAmax) flush_block_amax(m, amax_out);
}

// Any shape, any alignment: one element per thread per step.
template <Format F>
__global__ void quantize_generic_kernel(const float* xf, const uint16_t* xb, Geometry G,
                                        const float* scale, const float* scale_inv, Overflow ov,
                                        uint8_t* codes, uint8_t* codes_t, StatsBuffer* stats,
                                        double* map, bool with_hist, uint32_t* amax_out) {
  constexpr CodecSpec s = codec_spec(F);
  extern __shared__ uint32_t lane_hist[];  // stats && with_hist: kLaneHistBytes
  if (stats && with_hist) {
    for (int i = threadIdx.x; i < kHistBins * kThreads; i += blockDim.x) lane_hist[i] = 0;
  }
  __syncthreads();
  uint32_t* my_hist = stats && with_hist ? lane_hist + threadIdx.x : nullptr;
  LaneStats ls;
  const int64_t n = G.rows * G.cols;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / G.cols, c = i % G.cols;
    const int64_t g = (r / G.block_rows) * G.group_cols + c / G.block_cols;
    const float v = load1(xf, xb, i);
    const QuantizedElement q = quantize_element(
        v, scale[g], scale_inv[g], s, ov, [](uint8_t cc) { return decode(cc, codec_spec(F)); });
    if (codes) codes[i] = q.code;
    if (codes_t) codes_t[c * G.rows + r] = q.code;
    if (amax_out && !stats) ls.amax = finite_abs_max(ls.amax, v);
    if (stats) {
      double ce = 0, cs = 0;
      count_element<F>(v, q, scale[g], ls, ce, cs, my_hist);
      ls.sq_err += ce;
      ls.sq_sum += cs;
      if (G.map && (ce != 0 || cs != 0)) {
        const int64_t cell = (r / G.cell_rows) * G.map_cols + c / G.cell_cols;
        atomicAdd(&map[cell], ce);
        atomicAdd(&map[G.cells + cell], cs);
      }
    }
  }
  if (stats) {
    __syncthreads();
    flush_block_stats(ls, stats, with_hist ? lane_hist : nullptr);
  } else if (amax_out) {
    flush_block_amax(ls.amax, amax_out);
  }
}

template <bool kFast>
__global__ void amax_kernel(const float* xf, const uint16_t* xb, Geometry G, uint32_t* group_amax,
                            uint32_t* tensor_amax) {
  __shared__ uint32_t block_max[kWarps];
  const int lane = gpu::lane_id(), warp = gpu::warp_id();
  uint32_t total = 0;
  if (kFast) {
    const int64_t windows = (G.cols + kWindow - 1) / kWindow;
    const int64_t items = windows * ((G.rows + kRowChunk - 1) / kRowChunk);
    for (int64_t item = int64_t{blockIdx.x} * kWarps + warp; item < items;
         item += int64_t{gridDim.x} * kWarps) {
      const int64_t col = (item % windows) * kWindow + lane * 4;
      const bool active = col < G.cols;
      const int64_t r0 = (item / windows) * kRowChunk, r1 = min(G.rows, r0 + kRowChunk);
      int64_t group_row = r0 / G.block_rows, group_end = (group_row + 1) * G.block_rows;
      const int64_t gcol = active ? col / G.block_cols : 0;
      uint32_t m = 0;
      auto flush = [&]() {
        const int64_t key = active ? group_row * G.group_cols + gcol : LLONG_MAX;
        total = max(total, m);
        const uint32_t mm =
            segmented_reduce(key, m, [](uint32_t a, uint32_t b) { return max(a, b); });
        if (last_of_run(key) && active && mm) atomicMax(&group_amax[key], mm);
        m = 0;
      };
      for (int64_t rb = r0; rb < r1; rb += 8) {
        float v[8][4];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (active && rb + j < r1) load4(xf, xb, (rb + j) * G.cols + col, v[j]);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int64_t r = rb + j;
          if (r >= r1) break;
          if (r == group_end) {
            flush();
            ++group_row;
            group_end += G.block_rows;
          }
          if (active) {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              const uint32_t a = __float_as_uint(v[j][k]) & 0x7FFFFFFFu;
              m = a < 0x7F800000u ? max(m, a) : m;
            }
          }
        }
      }
      flush();
    }
  } else {
    const int64_t n = G.rows * G.cols;
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
         i += int64_t{gridDim.x} * blockDim.x) {
      const uint32_t a = __float_as_uint(load1(xf, xb, i)) & 0x7FFFFFFFu;
      if (a < 0x7F800000u && a) {
        const int64_t r = i / G.cols, c = i % G.cols;
        atomicMax(&group_amax[(r / G.block_rows) * G.group_cols + c / G.block_cols], a);
        total = max(total, a);
      }
    }
  }
  total = warp_max(total);
  if (lane == 0) block_max[warp] = total;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t mm = 0;
    for (int w = 0; w < kWarps; ++w) mm = max(mm, block_max[w]);
    if (mm) atomicMax(tensor_amax, mm);
  }
}

__global__ void scales_kernel(ScalingKind kind, int64_t groups, const float* amax,
                              const float* tensor_amax, double fmax, int emax, int margin,
                              bool pow2, bool rceil, float* scale, float* scale_inv, uint8_t* codes,
                              float* global_scale) {
  const int64_t g = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  const float a = amax[g];
  if (kind == ScalingKind::MX) {
    const int e = mx_scale_exponent(a, emax, fmax, rceil);
    scale[g] = ldexpf(1.0f, -e);
    scale_inv[g] = ldexpf(1.0f, e);
    codes[g] = static_cast<uint8_t>(e + 127);
  } else if (kind == ScalingKind::NVFP4) {
    const float gs = nvfp4_global_scale(*tensor_amax, fmax);
    const Nvfp4BlockScale b = nvfp4_block_scale(a, gs, fmax);
    scale[g] = b.scale;
    scale_inv[g] = b.scale_inv;
    codes[g] = b.code;
    if (g == 0 && global_scale) *global_scale = gs;
  } else {
    const float s = tensor_scale(a, fmax, margin, pow2);
    scale[g] = s;
    scale_inv[g] = 1.0f / s;
  }
}

__global__ void dequantize_kernel(const uint8_t* __restrict__ codes, Geometry G,
                                  const float* __restrict__ scale_inv, CodecSpec s,
                                  float* __restrict__ out) {
  __shared__ float lut[256];
  for (int c = threadIdx.x; c < 256; c += blockDim.x) lut[c] = decode(static_cast<uint8_t>(c), s);
  __syncthreads();
  const int64_t n = G.rows * G.cols;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / G.cols, c = i % G.cols;
    out[i] = lut[codes[i]] * scale_inv[(r / G.block_rows) * G.group_cols + c / G.block_cols];
  }
}

// DelayedScaler::update on the device: one block puts the step's amax in the ring at
// `head`, reduces the window and derives the next scale, as the host does in fp32.
__global__ void delayed_update_kernel(const uint32_t* amax_bits, float* history, int window,
                                      int head, float fmax, int margin, bool most_recent,
                                      float* scale, float* scale_inv, float* amax_h_out) {
  __shared__ float part[1024];
  const float amax = __uint_as_float(*amax_bits);
  if (threadIdx.x == 0) history[head] = amax;
  __syncthreads();
  float m = 0;
  for (int i = threadIdx.x; i < window; i += blockDim.x) m = fmaxf(m, history[i]);
  part[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s)
      part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  const float amax_h = most_recent ? amax : part[0];
  if (amax_h_out) *amax_h_out = amax_h;
  if (!(amax_h > 0) || !isfinite(amax_h)) return;  // keep the previous scale
  float s = ldexpf(fmax / amax_h, -margin);
  if (isinf(s)) s = FLT_MAX;
  *scale = s;
  *scale_inv = 1.0f / s;
}

int sm_count() {
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return 132;
    }
    return n;
  }();
  return sms;
}

unsigned blocks_for(int64_t work, int per_block) {
  const int64_t want = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(want, int64_t{sm_count()} * 8)));
}

bool fast_path_ok(const DeviceTensor& x, const GroupLayout& L, const DeviceStatsTargets& t,
                  const uint8_t* codes, const uint8_t* codes_t) {
  const uintptr_t in =
      reinterpret_cast<uintptr_t>(x.f32 ? static_cast<const void*>(x.f32) : x.bf16);
  const bool cell_ok = !(t.stats && t.map) || t.grid.cell_cols % 4 == 0;
  return x.cols % 4 == 0 && in % (x.f32 ? 16 : 8) == 0 &&
         reinterpret_cast<uintptr_t>(codes) % 4 == 0 &&
         reinterpret_cast<uintptr_t>(codes_t) % 16 == 0 && (L.block_cols % 4 == 0) && cell_ok;
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

// The statistics in tiles: rows a multiple of 16, groups of whole 16-row x 4-column
// pieces, error-map cells of whole 256-row x 64-column tiles (or no map), aligned pointers.
bool tile_stats_ok(const DeviceTensor& x, const Geometry& G, const uint8_t* codes,
                   const uint8_t* codes_t) {
  const uintptr_t in =
      reinterpret_cast<uintptr_t>(x.f32 ? static_cast<const void*>(x.f32) : x.bf16);
  return kTileKernels && x.rows % 16 == 0 && x.cols % 4 == 0 && G.block_rows % 16 == 0 &&
         G.block_cols % 4 == 0 && (!G.map || (G.cell_rows % 256 == 0 && G.cell_cols % 64 == 0)) &&
         in % (x.f32 ? 16 : 8) == 0 && reinterpret_cast<uintptr_t>(codes) % 4 == 0 &&
         reinterpret_cast<uintptr_t>(codes_t) % 16 == 0;
}

template <Format F, bool kHw>
void launch_quantize(const DeviceTensor& x, const Geometry& G, bool fast, bool flat, bool tile,
                     const float* sc, const float* si, Overflow ov, uint8_t* codes,
                     uint8_t* codes_t, const DeviceStatsTargets& t, cudaStream_t st) {
  double* map = G.map ? t.map : nullptr;
  const size_t smem = t.stats && t.histogram ? kLaneHistBytes : 0;
  if constexpr (kHw && hw_format<F>()) {
    if (t.stats && tile_stats_ok(x, G, codes, codes_t)) {
      constexpr auto k = &tile_stats_kernel<F, kHw>;
      const int64_t tiles = ((x.cols + 63) / 64) * ((x.rows + 255) / 256);
      const unsigned grid = smem ? resident_hist_blocks<k>(tiles) : blocks_for(tiles, 1);
      k<<<grid, kThreads, smem, st>>>(x.f32, x.bf16, G, sc, si, codes, codes_t, t.stats, map,
                                      t.histogram);
      FP8WB_GPU_CHECK(cudaGetLastError());
      return;
    }
  }
  if (tile) {
    const unsigned grid = blocks_for(((x.cols + 63) / 64) * ((x.rows + 255) / 256), 1);
    if (t.amax_bits) {
      tile_quantize_t_kernel<F, kHw, true>
          <<<grid, kThreads, 0, st>>>(x.f32, x.bf16, G, sc, ov, codes, codes_t, t.amax_bits);
    } else {
      tile_quantize_t_kernel<F, kHw, false>
          <<<grid, kThreads, 0, st>>>(x.f32, x.bf16, G, sc, ov, codes, codes_t, nullptr);
    }
  } else if (flat) {
    const int64_t n16 = x.rows * x.cols / 16;
    const unsigned grid = blocks_for(n16, kThreads);
    if (t.amax_bits) {
      quantize_flat_kernel<F, true, kHw>
          <<<grid, kThreads, 0, st>>>(x.f32, x.bf16, n16, sc, ov, codes, t.amax_bits);
    } else {
      quantize_flat_kernel<F, false, kHw>
          <<<grid, kThreads, 0, st>>>(x.f32, x.bf16, n16, sc, ov, codes, nullptr);
    }
  } else if (fast) {
    const int64_t items =
        ((x.cols + kWindow - 1) / kWindow) * ((x.rows + kRowChunk - 1) / kRowChunk);
    const int64_t want = (items + kWarps - 1) / kWarps;
    if (t.stats) {
      constexpr auto k = &quantize_fast_kernel<F, true, false, kHw>;
      const unsigned grid = smem ? resident_hist_blocks<k>(want) : blocks_for(items, kWarps);
      k<<<grid, kThreads, smem, st>>>(x.f32, x.bf16, G, sc, si, ov, codes, codes_t, t.stats, map,
                                      t.histogram, nullptr);
    } else if (t.amax_bits) {
      quantize_fast_kernel<F, false, true, kHw><<<blocks_for(items, kWarps), kThreads, 0, st>>>(
          x.f32, x.bf16, G, sc, si, ov, codes, codes_t, nullptr, nullptr, false, t.amax_bits);
    } else {
      quantize_fast_kernel<F, false, false, kHw><<<blocks_for(items, kWarps), kThreads, 0, st>>>(
          x.f32, x.bf16, G, sc, si, ov, codes, codes_t, nullptr, nullptr, false, nullptr);
    }
  } else {
    constexpr auto k = &quantize_generic_kernel<F>;
    if (smem) allow_lane_hist<k>();
    k<<<blocks_for(x.rows * x.cols, kThreads), kThreads, smem, st>>>(
        x.f32, x.bf16, G, sc, si, ov, codes, codes_t, t.stats, map, t.histogram, t.amax_bits);
  }
  FP8WB_GPU_CHECK(cudaGetLastError());
}

// No statistics (an amax at most), transposed codes, groups of whole 16-row x 4-column
// pieces (tensorwise, 128x128), rows a multiple of 16, aligned pointers.
bool tile_path_ok(const DeviceTensor& x, const GroupLayout& L, const DeviceStatsTargets& t,
                  const uint8_t* codes, const uint8_t* codes_t) {
  const uintptr_t in =
      reinterpret_cast<uintptr_t>(x.f32 ? static_cast<const void*>(x.f32) : x.bf16);
  return kTileKernels && !t.stats && codes_t && x.rows % 16 == 0 && x.cols % 4 == 0 &&
         L.block_rows % 16 == 0 && L.block_cols % 4 == 0 && in % (x.f32 ? 16 : 8) == 0 &&
         reinterpret_cast<uintptr_t>(codes) % 4 == 0 &&
         reinterpret_cast<uintptr_t>(codes_t) % 16 == 0;
}

// Tensorwise, no statistics (an amax at most), no transposed codes, whole 16-element
// pieces at 16-byte aligned addresses.
bool flat_path_ok(const DeviceTensor& x, const GroupLayout& L, const DeviceStatsTargets& t,
                  const uint8_t* codes, const uint8_t* codes_t) {
  const uintptr_t in =
      reinterpret_cast<uintptr_t>(x.f32 ? static_cast<const void*>(x.f32) : x.bf16);
  return !t.stats && !codes_t && codes && L.group_count() == 1 && (x.rows * x.cols) % 16 == 0 &&
         in % 16 == 0 && reinterpret_cast<uintptr_t>(codes) % 16 == 0;
}

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
    uint32_t t[4][4] = {};
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      float v[4], y[4];
      src.load4(r0 + i, c0, v, lut);
#pragma unroll
      for (int k = 0; k < 4; ++k) y[k] = v[k] * sc[k];
      const uint32_t w = encode4<F, kHw, false>(y, 1.0f, ov, nullptr, nullptr);
#pragma unroll
      for (int k = 0; k < 4; ++k) t[k][i / 4] |= ((w >> (8 * k)) & 0xFFu) << (8 * (i % 4));
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      *reinterpret_cast<uint4*>(codes_t + (c0 + k) * rows + r0) =
          make_uint4(t[k][0], t[k][1], t[k][2], t[k][3]);
    }
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
  const FormatInfo& info = format_info(recipe.format);
  scales_kernel<<<static_cast<unsigned>((cols + 255) / 256), 256, 0, st>>>(
      ScalingKind::Rowwise, cols, d_col_amax, nullptr, info.max_finite, info.emax, recipe.margin,
      recipe.pow2_scales, false, d_scale, d_scale_inv, nullptr, nullptr);
  FP8WB_GPU_CHECK(cudaGetLastError());
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

// Every fp32 bit pattern (as y, scale 1) through quantize4's hardware step and through
// the software codec's element step; counts where the code, the saturation flag, the
// flags read off the code, or the dequantized value (times scale_inv) differ.
template <Format F>
__global__ void conversion_check_kernel(float scale_inv, unsigned long long* mismatches,
                                        uint32_t* first) {
  constexpr CodecSpec s = codec_spec(F);
  const auto decoded = [](uint8_t c) { return decode(c, codec_spec(F)); };
  for (uint64_t base = (uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) * 4; base < (1ull << 32);
       base += uint64_t{gridDim.x} * blockDim.x * 4) {
    float v[4], y[4], dq[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = __uint_as_float(static_cast<uint32_t>(base + k));
    const uint32_t word =
        quantize4<F, true, true>(v, 1.0f, scale_inv, Overflow::Saturate, nullptr, y, dq);
    unsigned bad = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const QuantizedElement q =
          quantize_element(v[k], 1.0f, scale_inv, s, Overflow::Saturate, decoded);
      const uint8_t c = static_cast<uint8_t>(word >> (8 * k));
      const uint32_t a = float_bits(v[k]) & 0x7FFFFFFFu;
      const bool fin = a < 0x7F800000u;
      const uint32_t m = c & 0x7Fu;
      const bool sat = fin && (float_bits(y[k]) & 0x7FFFFFFFu) >= saturating_bits<F>();
      const bool same_dq =
          float_bits(dq[k]) == float_bits(q.dequant) || (isnan(dq[k]) && isnan(q.dequant));
      const bool ok = c == q.code && sat == q.saturated && same_dq &&
                      (fin && a != 0 && m == 0) == (q.finite && a != 0 && q.dequant == 0.0f) &&
                      (m - 1u < (1u << s.mbits) - 1u) == is_subnormal_code(q.code, s);
      if (!ok) {
        ++bad;
        atomicMin(first, static_cast<uint32_t>(base + k));
      }
    }
    if (bad) atomicAdd(mismatches, static_cast<unsigned long long>(bad));
  }
}

}  // namespace

void group_amax_cuda(const DeviceTensor& x, const GroupLayout& L, float* d_group_amax,
                     float* d_tensor_amax, fp8wb_stream_t stream) {
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  FP8WB_GPU_CHECK(
      cudaMemsetAsync(d_group_amax, 0, static_cast<size_t>(L.group_count()) * sizeof(float), st));
  FP8WB_GPU_CHECK(cudaMemsetAsync(d_tensor_amax, 0, sizeof(float), st));
  if (x.rows * x.cols == 0) return;
  const Geometry G = geometry(L, {});
  const bool fast = fast_path_ok(x, L, {}, nullptr, nullptr);
  auto* ga = reinterpret_cast<uint32_t*>(d_group_amax);
  auto* ta = reinterpret_cast<uint32_t*>(d_tensor_amax);
  if (fast) {
    const int64_t items =
        ((x.cols + kWindow - 1) / kWindow) * ((x.rows + kRowChunk - 1) / kRowChunk);
    amax_kernel<true><<<blocks_for(items, kWarps), kThreads, 0, st>>>(x.f32, x.bf16, G, ga, ta);
  } else {
    amax_kernel<false>
        <<<blocks_for(x.rows * x.cols, kThreads), kThreads, 0, st>>>(x.f32, x.bf16, G, ga, ta);
  }
  FP8WB_GPU_CHECK(cudaGetLastError());
}

void compute_scales_cuda(const QuantRecipe& r, const GroupLayout& L, const float* d_group_amax,
                         const float* d_tensor_amax, float* d_scale, float* d_scale_inv,
                         uint8_t* d_scale_codes, float* d_global_scale, fp8wb_stream_t stream) {
  validate_recipe(r);
  if ((r.kind == ScalingKind::MX || r.kind == ScalingKind::NVFP4) && !d_scale_codes) {
    throw std::invalid_argument("MX and NVFP4 scales need a buffer for their scale codes");
  }
  const int64_t groups = L.group_count();
  if (groups == 0) return;
  const FormatInfo& info = format_info(r.format);
  scales_kernel<<<static_cast<unsigned>((groups + 255) / 256), 256, 0,
                  reinterpret_cast<cudaStream_t>(stream)>>>(
      r.kind, groups, d_group_amax, d_tensor_amax, info.max_finite, info.emax, r.margin,
      r.pow2_scales, r.mx_rounding == MxRounding::RCeil, d_scale, d_scale_inv, d_scale_codes,
      d_global_scale);
  FP8WB_GPU_CHECK(cudaGetLastError());
}

void zero_stats_cuda(const DeviceStatsTargets& t, fp8wb_stream_t stream) {
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  if (t.stats) FP8WB_GPU_CHECK(cudaMemsetAsync(t.stats, 0, sizeof(StatsBuffer), st));
  if (t.map && t.grid.cell_count() > 0) {
    FP8WB_GPU_CHECK(cudaMemsetAsync(
        t.map, 0, static_cast<size_t>(2 * t.grid.cell_count()) * sizeof(double), st));
  }
}

void quantize_cuda(const DeviceTensor& x, const QuantRecipe& recipe, const GroupLayout& L,
                   const float* d_scale, const float* d_scale_inv, uint8_t* codes, uint8_t* codes_t,
                   const DeviceStatsTargets& t, fp8wb_stream_t stream) {
  validate_recipe(recipe);
  if (codes_t && recipe.kind != ScalingKind::Tensorwise &&
      recipe.kind != ScalingKind::Block128x128) {
    throw std::invalid_argument("transposed codes need tensorwise or 128x128 scaling, not " +
                                recipe_name(recipe));
  }
  if (L.rows != x.rows || L.cols != x.cols)
    throw std::invalid_argument("quantize_cuda: layout and tensor shapes differ");
  if (x.rows * x.cols == 0) return;
  if (!x.f32 && !x.bf16) throw std::invalid_argument("quantize_cuda: null input");
  const Geometry G = geometry(L, t);
  const bool fast = fast_path_ok(x, L, t, codes, codes_t);
  const bool flat = flat_path_ok(x, L, t, codes, codes_t);
  const bool tile = tile_path_ok(x, L, t, codes, codes_t);
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  dispatch_element_format(recipe.format, [&](auto tag) {
    constexpr Format F = decltype(tag)::value;
    if constexpr (hw_format<F>()) {
      if (recipe.overflow == Overflow::Saturate) {
        launch_quantize<F, true>(x, G, fast, flat, tile, d_scale, d_scale_inv, recipe.overflow,
                                 codes, codes_t, t, st);
        return;
      }
    }
    launch_quantize<F, false>(x, G, fast, flat, tile, d_scale, d_scale_inv, recipe.overflow, codes,
                              codes_t, t, st);
  });
}

void dequantize_cuda(const uint8_t* codes, const QuantRecipe& recipe, const GroupLayout& L,
                     const float* d_scale_inv, float* out, fp8wb_stream_t stream) {
  validate_recipe(recipe);
  if (L.rows * L.cols == 0) return;
  const Geometry G = geometry(L, {});
  dequantize_kernel<<<blocks_for(L.rows * L.cols, kThreads), kThreads, 0,
                      reinterpret_cast<cudaStream_t>(stream)>>>(codes, G, d_scale_inv,
                                                                codec_spec(recipe.format), out);
  FP8WB_GPU_CHECK(cudaGetLastError());
}

void delayed_update_cuda(const uint32_t* d_amax_bits, float* d_history, int window, int head,
                         Format format, const DelayedScalingConfig& config, float* d_scale,
                         float* d_scale_inv, float* d_amax_h, fp8wb_stream_t stream) {
  validate_delayed_config(config);
  if (head < 0 || head >= window || window != config.window)
    throw std::invalid_argument("delayed_update_cuda: head outside the window");
  delayed_update_kernel<<<1, 1024, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
      d_amax_bits, d_history, window, head, static_cast<float>(format_info(format).max_finite),
      config.margin, config.algo == AmaxAlgo::MostRecent, d_scale, d_scale_inv, d_amax_h);
  FP8WB_GPU_CHECK(cudaGetLastError());
}

}  // namespace fp8wb

namespace fp8wb {

ConversionCheck check_conversion_cuda(Format format, float scale_inv) {
  ConversionCheck r;
  int dev = 0, major = 0, minor = 0;
  FP8WB_GPU_CHECK(cudaGetDevice(&dev));
  FP8WB_GPU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  FP8WB_GPU_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
#if defined(FP8WB_HIP)
  r.hardware = false;
#else
  r.hardware = major * 10 + minor >= 89;
#endif
  DeviceArray<unsigned long long> count(1);
  DeviceArray<uint32_t> first(1);
  FP8WB_GPU_CHECK(cudaMemset(count.p, 0, sizeof(unsigned long long)));
  FP8WB_GPU_CHECK(cudaMemset(first.p, 0xFF, sizeof(uint32_t)));
  const unsigned grid = static_cast<unsigned>(sm_count()) * 16;
  if (format == Format::E4M3FN) {
    conversion_check_kernel<Format::E4M3FN><<<grid, kThreads>>>(scale_inv, count.p, first.p);
  } else if (format == Format::E5M2) {
    conversion_check_kernel<Format::E5M2><<<grid, kThreads>>>(scale_inv, count.p, first.p);
  } else {
    throw std::invalid_argument("check_conversion_cuda: E4M3FN or E5M2 only");
  }
  FP8WB_GPU_CHECK(cudaGetLastError());
  unsigned long long n = 0;
  FP8WB_GPU_CHECK(cudaMemcpy(&n, count.p, sizeof n, cudaMemcpyDeviceToHost));
  FP8WB_GPU_CHECK(cudaMemcpy(&r.first_bits, first.p, sizeof r.first_bits, cudaMemcpyDeviceToHost));
  r.mismatches = n;
  return r;
}

}  // namespace fp8wb

namespace fp8wb {

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
