// Scaled quantization on the GPU with every statistic in the same pass.
//
// Work is cut into items of one 128-column window x 32 rows; a warp takes an item, each
// lane four consecutive columns (16-byte fp32 loads, coalesced across the warp), and
// walks down the rows. Counters and sums stay in registers, the exponent histogram in a
// warp-private shared array; the error map is flushed with one atomic per cell touched
// (a segmented warp reduction) when the walk leaves a row of cells. Shapes or pointers
// the fast path cannot take go to a plain element-per-thread kernel.
#include <algorithm>
#include <cfloat>
#include <climits>
#include <memory>

#include "fp8wb/kernels/quantize_cuda.h"
#include "fp8wb/kernels/quantize_element.h"
#include "fp8wb/kernels/scale_math.h"
#include "gpu_runtime.h"

namespace fp8wb {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kWindow = 128;
constexpr int kRowChunk = 32;
constexpr unsigned kFull = 0xFFFFFFFFu;

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

// Inclusive segmented reduction over lanes whose keys are contiguous runs; the last lane
// of each run ends up with the run's total.
template <class T, class Op>
__device__ __forceinline__ T segmented_reduce(int64_t key, T v, Op op) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T vo = __shfl_up_sync(kFull, v, o);
    const int64_t ko = __shfl_up_sync(kFull, key, o);
    if (lane >= o && ko == key) v = op(v, vo);
  }
  return v;
}

__device__ __forceinline__ bool last_of_run(int64_t key) {
  const int64_t next = __shfl_down_sync(kFull, key, 1);
  return (threadIdx.x & 31) == 31 || next != key;
}

struct LaneStats {
  uint32_t numel = 0, zeros = 0, nonfinite = 0, underflow = 0, subnormal = 0, saturated = 0,
           amax = 0;
  double sq_err = 0, sq_sum = 0;
};

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

__device__ __forceinline__ uint32_t warp_max(uint32_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

// Reduces every lane's counters into the block, then one atomic per counter per block.
__device__ void flush_block_stats(LaneStats ls, StatsBuffer* out, uint32_t (*hist)[kHistBins]) {
  __shared__ unsigned long long counts[kWarps][6];
  __shared__ double sums[kWarps][2];
  __shared__ uint32_t amax[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
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
  if (hist) {
    for (int b = threadIdx.x; b < kHistBins; b += blockDim.x) {
      unsigned long long s = 0;
      for (int w = 0; w < kWarps; ++w) s += hist[w][b];
      if (s) atomicAdd(reinterpret_cast<unsigned long long*>(&out->hist[b]), s);
    }
  }
}

// Squares go into per-row fp64 partials (re, rs) that the caller folds into the lane's
// and the map cell's sums once per row (fp32 squares overflow past 2^64).
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
    // Lanes that hit the same bin add once, through their lowest lane.
    const unsigned peers = __match_any_sync(__activemask(), bin);
    if ((threadIdx.x & 31) == __ffs(peers) - 1)
      atomicAdd(&hist[bin], static_cast<uint32_t>(__popc(peers)));
  }
}

// The tensor's amax (finite values) into one device word: a warp and block reduction,
// then one atomic per block.
__device__ void flush_block_amax(uint32_t m, uint32_t* out) {
  __shared__ uint32_t block_max[kWarps];
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) block_max[threadIdx.x >> 5] = m;
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

// kStats: every statistic into `stats` (its amax included); else kAmax: only the amax,
// into amax_out (what delayed scaling records for the next step's scale).
template <Format F, bool kStats, bool kAmax>
__global__ void __launch_bounds__(kThreads)
    quantize_fast_kernel(const float* xf, const uint16_t* xb, Geometry G,
                         const float* __restrict__ scale, const float* __restrict__ scale_inv,
                         Overflow ov, uint8_t* codes, uint8_t* codes_t, StatsBuffer* stats,
                         double* map, bool with_hist, uint32_t* amax_out) {
  constexpr CodecSpec s = codec_spec(F);
  __shared__ float lut[256];
  __shared__ uint32_t hist[kWarps][kHistBins];
  for (int c = threadIdx.x; c < 256; c += blockDim.x) lut[c] = decode(static_cast<uint8_t>(c), s);
  if (kStats) {
    for (int i = threadIdx.x; i < kWarps * kHistBins; i += blockDim.x) (&hist[0][0])[i] = 0;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t* my_hist = kStats && with_hist ? hist[warp] : nullptr;
  const int64_t windows = (G.cols + kWindow - 1) / kWindow;
  const int64_t items = windows * ((G.rows + kRowChunk - 1) / kRowChunk);
  const bool trans = codes_t != nullptr;
  LaneStats ls;
  auto lut_decode = [&](uint8_t c) { return lut[c]; };
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
    double cell_err = 0, cell_sum = 0;
    auto flush_cells = [&]() {
      if (!kStats || !G.map) return;
      const int64_t key = active ? cell_row * G.map_cols + cell_col : LLONG_MAX;
      const double e = segmented_reduce(key, cell_err, [](double a, double b) { return a + b; });
      const double q = segmented_reduce(key, cell_sum, [](double a, double b) { return a + b; });
      if (last_of_run(key) && active) {
        atomicAdd(&map[key], e);
        atomicAdd(&map[G.cells + key], q);
      }
      cell_err = cell_sum = 0;
    };
    for (int64_t rb = r0; rb < r1; rb += 16) {
      uint32_t t[4][4] = {};  // transposed staging: 4 columns x 16 rows of codes
#pragma unroll
      for (int half = 0; half < 2; ++half) {
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
              double re = 0, rs = 0;
#pragma unroll
              for (int k = 0; k < 4; ++k) {
                const QuantizedElement q = quantize_element(v[j][k], sc, si, s, ov, lut_decode);
                word |= static_cast<uint32_t>(q.code) << (8 * k);
                t[k][i / 4] |= static_cast<uint32_t>(q.code) << (8 * (i % 4));
                if (kStats) count_element<F>(v[j][k], q, sc, ls, re, rs, my_hist);
                if (kAmax) ls.amax = finite_abs_max(ls.amax, v[j][k]);
              }
              if (kStats) {
                ls.sq_err += re;
                ls.sq_sum += rs;
                cell_err += re;
                cell_sum += rs;
              }
              if (codes) *reinterpret_cast<uint32_t*>(codes + r * G.cols + col) = word;
            }
          }
        }
      }
      if (trans && active) {
        if (rb + 16 <= r1 && G.rows % 16 == 0) {
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            *reinterpret_cast<uint4*>(codes_t + (col + k) * G.rows + rb) =
                make_uint4(t[k][0], t[k][1], t[k][2], t[k][3]);
          }
        } else {
          for (int i = 0; i < 16 && rb + i < r1; ++i) {
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
    flush_block_stats(ls, stats, with_hist ? hist : nullptr);
  } else if (kAmax) {
    flush_block_amax(ls.amax, amax_out);
  }
}

// Any shape, any alignment: one element per thread per step.
template <Format F>
__global__ void quantize_generic_kernel(const float* xf, const uint16_t* xb, Geometry G,
                                        const float* scale, const float* scale_inv, Overflow ov,
                                        uint8_t* codes, uint8_t* codes_t, StatsBuffer* stats,
                                        double* map, bool with_hist, uint32_t* amax_out) {
  constexpr CodecSpec s = codec_spec(F);
  __shared__ uint32_t hist[kWarps][kHistBins];
  for (int i = threadIdx.x; i < kWarps * kHistBins; i += blockDim.x) (&hist[0][0])[i] = 0;
  __syncthreads();
  uint32_t* my_hist = stats && with_hist ? hist[threadIdx.x >> 5] : nullptr;
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
    flush_block_stats(ls, stats, with_hist ? hist : nullptr);
  } else if (amax_out) {
    flush_block_amax(ls.amax, amax_out);
  }
}

template <bool kFast>
__global__ void amax_kernel(const float* xf, const uint16_t* xb, Geometry G, uint32_t* group_amax,
                            uint32_t* tensor_amax) {
  __shared__ uint32_t block_max[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
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

unsigned blocks_for(int64_t work, int per_block) {
  static int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return 132;
    }
    return n;
  }();
  const int64_t want = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(want, int64_t{sms} * 8)));
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

template <Format F>
void launch_quantize(const DeviceTensor& x, const Geometry& G, bool fast, const float* sc,
                     const float* si, Overflow ov, uint8_t* codes, uint8_t* codes_t,
                     const DeviceStatsTargets& t, cudaStream_t st) {
  double* map = G.map ? t.map : nullptr;
  if (fast) {
    const int64_t items =
        ((x.cols + kWindow - 1) / kWindow) * ((x.rows + kRowChunk - 1) / kRowChunk);
    const unsigned grid = blocks_for(items, kWarps);
    if (t.stats) {
      quantize_fast_kernel<F, true, false><<<grid, kThreads, 0, st>>>(
          x.f32, x.bf16, G, sc, si, ov, codes, codes_t, t.stats, map, t.histogram, nullptr);
    } else if (t.amax_bits) {
      quantize_fast_kernel<F, false, true><<<grid, kThreads, 0, st>>>(
          x.f32, x.bf16, G, sc, si, ov, codes, codes_t, nullptr, nullptr, false, t.amax_bits);
    } else {
      quantize_fast_kernel<F, false, false><<<grid, kThreads, 0, st>>>(
          x.f32, x.bf16, G, sc, si, ov, codes, codes_t, nullptr, nullptr, false, nullptr);
    }
  } else {
    quantize_generic_kernel<F><<<blocks_for(x.rows * x.cols, kThreads), kThreads, 0, st>>>(
        x.f32, x.bf16, G, sc, si, ov, codes, codes_t, t.stats, map, t.histogram, t.amax_bits);
  }
  FP8WB_GPU_CHECK(cudaGetLastError());
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
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  dispatch_element_format(recipe.format, [&](auto tag) {
    launch_quantize<decltype(tag)::value>(x, G, fast, d_scale, d_scale_inv, recipe.overflow, codes,
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
