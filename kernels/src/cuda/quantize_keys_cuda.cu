// Every statistic of a bf16 tensor under one scale (tensorwise E4M3FN or E5M2 with
// saturation, the FP8 training passes), counted by value.
//
// Under one scale, each of an element's counters, its histogram bin and its part in the
// amax depend on its magnitude alone, and a bf16 magnitude has 15 bits: a block counts
// how often each of the 32768 magnitudes occurs (one shared-memory add an element, in a
// 128 KB table), and derives the counters, the bins and the amax from that table once, at
// its end. None of these facts decreases with the magnitude, so the end finds, with the
// software codec (quantize_element(), which the hardware conversion equals bit for bit),
// the three magnitudes from which a code is nonzero, normal and saturated, and counts each
// magnitude against them; its bin comes from its scaled value. The squares' sums
// and the error map are summed element by element, as the tile statistics kernel does;
// codes and transposed codes are stored in its layout.
//
// The table leaves room for one block an SM: a block is three groups of kThreads threads,
// each walking its own share of the tiles as a block of the tile kernel would.
//
// Fresh statistics (DeviceStatsTargets::fresh) without transposed codes are zeroed by the
// kernel itself on CUDA: each block zeroes its share of the buffers, then waits at a grid
// barrier (a cooperative launch: every block is resident) before it starts. That saves
// the zeroing launch before the pass, which had cost 2-3 us of a 70 us pass.
#if !defined(FP8WB_HIP)
#include <cooperative_groups.h>
#define FP8WB_KEYS_ZERO_IN_KERNEL 1
#endif

#include "quantize_cuda_stats.cuh"

namespace fp8wb::qgpu {
namespace {

constexpr int kGroups = 3;
constexpr int kKeyThreads = kGroups * kThreads;
constexpr int kKeyWarps = kKeyThreads / kWarpSize;
constexpr int kKeys = 1 << 15;  // bf16 magnitudes
constexpr size_t kKeyTableBytes = size_t{kKeys} * sizeof(uint32_t);
// The end's loop over the magnitudes, four a lane, runs whole warps at every step
// (gpu::match_any()).
static_assert((kKeys / 4) % kWarpSize == 0 && kKeyThreads % kWarpSize == 0);

// Magnitudes from kFiniteKeys on are Inf and NaN.
constexpr uint32_t kFiniteKeys = 0x7F80;

// The first magnitude k in [lo, hi) that has a fact, or hi where none has it; the fact
// (`has`) holds from some magnitude on. The warp's lanes try kWarpSize magnitudes at once:
// three rounds for 2^15 of them on 32 lanes. Every lane gets the answer.
template <class Has>
__device__ uint32_t first_with(uint32_t lo, uint32_t hi, Has&& has) {
  const auto lane = static_cast<uint32_t>(gpu::lane_id());
  while (lo < hi) {
    const uint32_t step = (hi - lo + kWarpSize - 1) / kWarpSize;
    const uint32_t k = lo + step * lane;
    const gpu::LaneMask found = gpu::ballot(k < hi && has(k));
    if (found == 0) {  // none of the magnitudes tried below hi: past the last
      lo += step * min(static_cast<uint32_t>(kWarpSize - 1), (hi - 1 - lo) / step) + 1;
    } else {
      const auto j = static_cast<uint32_t>(gpu::lowest_lane(found));
      if (j == 0) return lo;
      hi = lo + step * j;
      lo += step * (j - 1) + 1;
    }
  }
  return lo;
}

// The 8-byte words a fresh pass zeroes before it adds to them (stats, then the map), or
// none where the caller zeroed them.
struct ZeroFirst {
  unsigned long long* a = nullptr;
  int64_t words_a = 0;
  unsigned long long* b = nullptr;
  int64_t words_b = 0;
};

// One count of each of the bf16 magnitudes in word w (two elements).
__device__ __forceinline__ void count_keys(uint32_t* keys, uint32_t w) {
  atomicAdd(&keys[w & 0x7FFFu], 1u);
  atomicAdd(&keys[(w >> 16) & 0x7FFFu], 1u);
}

// The squares of four elements as count4_common sums them (fp32 partials of four, taken
// to fp64), or false where that would lose them: a non-finite x (or a NaN difference: a
// NaN code under a non-finite scale), partials outside [2^-100, 2^126]. Every x zero
// (raw: the four bf16 words) sums exactly 0.
__device__ __forceinline__ bool square_sums_common(const float x[4], const float dq[4], uint2 raw,
                                                   double& te, double& ts) {
  float e[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) e[k] = x[k] - dq[k];
  const float pe = fmaf(e[3], e[3], fmaf(e[2], e[2], fmaf(e[1], e[1], e[0] * e[0])));
  const float ps = fmaf(x[3], x[3], fmaf(x[2], x[2], fmaf(x[1], x[1], x[0] * x[0])));
  const bool zeros = ((raw.x | raw.y) & 0x7FFF7FFFu) == 0 && pe == 0.0f;
  if (!((pe >= 0x1p-100f && pe <= 0x1p126f && ps >= 0x1p-100f && ps <= 0x1p126f) || zeros))
    return false;
  te += pe;
  ts += ps;
  return true;
}

// square_sums_common() without its decision: the partials are added whatever they are,
// and the decision is left to the tile's end (partials_fit()). lo follows the smallest
// partial's bits over the tile's rows (non-negative floats order as their bits do),
// leaving out a partial that is exactly 0 for want of nonzero terms (every x zero; every
// error zero, as a few percent of bf16 elements have), which loses nothing.
__device__ __forceinline__ void add_square_sums(const float x[4], const float dq[4], uint2 raw,
                                                double& te, double& ts, uint32_t& lo) {
  float e[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) e[k] = x[k] - dq[k];
  const float pe = fmaf(e[3], e[3], fmaf(e[2], e[2], fmaf(e[1], e[1], e[0] * e[0])));
  const float ps = fmaf(x[3], x[3], fmaf(x[2], x[2], fmaf(x[1], x[1], x[0] * x[0])));
  te += pe;
  ts += ps;
  const bool exact = ((__float_as_uint(e[0]) | __float_as_uint(e[1]) | __float_as_uint(e[2]) |
                       __float_as_uint(e[3])) &
                      0x7FFFFFFFu) == 0;
  const bool zeros = ((raw.x | raw.y) & 0x7FFF7FFFu) == 0;
  lo = min(lo, min(exact ? ~0u : __float_as_uint(pe), zeros ? ~0u : __float_as_uint(ps)));
}

// Whether every row add_square_sums() took into te, ts and lo has partials that lose
// nothing to fp32: each within [2^-100, 2^126], or exactly 0 for want of nonzero terms.
// The partials are not negative, so sums at most 2^126 (no NaN, no Inf) bound each of
// them; a tile whose sums pass 2^126 with smaller partials is only summed again.
// square_sums_common() takes each such row, but leaves to fp64 those whose errors are all
// zero and whose x are not; their fp32 partial of x^2 is within the same bound.
__device__ __forceinline__ bool partials_fit(uint32_t lo, double te, double ts) {
  return te <= 0x1p126 && ts <= 0x1p126 && lo >= 0x0D800000u;  // 2^-100
}

template <Format F, bool kTrans, bool kFresh>
__global__ void __launch_bounds__(kKeyThreads, 1)
    tile_keys_kernel(const uint16_t* xb, Geometry G, const float* __restrict__ scale,
                     const float* __restrict__ scale_inv, uint8_t* codes,
                     uint8_t* __restrict__ codes_t, StatsBuffer* stats, double* map,
                     bool tile_cells, ZeroFirst zero) {
  constexpr CodecSpec s = codec_spec(F);
  // The end's subnormal codes are those whose magnitude lies below the first normal one.
  static_assert(s.bits == 8 && s.mbits != 0 && s.nan != NanRule::AllOnes);
  extern __shared__ uint32_t keys[];  // kKeys counters
  __shared__ float lut[256];
  __shared__ unsigned long long hist[kHistBins];
  for (int c = threadIdx.x; c < 256; c += blockDim.x) lut[c] = decode(static_cast<uint8_t>(c), s);
  for (int i = threadIdx.x; i < kKeys / 4; i += blockDim.x)
    reinterpret_cast<uint4*>(keys)[i] = make_uint4(0, 0, 0, 0);
  for (int b = threadIdx.x; b < kHistBins; b += blockDim.x) hist[b] = 0;
#if defined(FP8WB_KEYS_ZERO_IN_KERNEL)
  // Fresh statistics: this block's share of the words zeroed, then a grid barrier (every
  // block is resident: a cooperative launch) before any block adds to them. A wait later,
  // in the tile loop (the first add is a tile in), spilled registers there, as did
  // fetching the first tile into L2 during the wait. The kernel without it is unchanged.
  if constexpr (kFresh) {
    namespace cg = cooperative_groups;
    // At most kMaxZeroWords words (launch_tile_keys()).
    const auto na = static_cast<uint32_t>(zero.words_a),
               words = static_cast<uint32_t>(zero.words_a + zero.words_b);
    const uint32_t lo = words * blockIdx.x / gridDim.x, hi = words * (blockIdx.x + 1) / gridDim.x;
    for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      if (i < na) {
        zero.a[i] = 0;
      } else {
        zero.b[i - na] = 0;
      }
    }
    cg::this_grid().sync();
  }
#else
  static_assert(!kFresh, "fresh statistics are zeroed in the kernel on CUDA only");
#endif
  (void)zero;
  __syncthreads();
  const float sc = *scale, si = *scale_inv;
  const int group = threadIdx.x / kThreads, gt = threadIdx.x % kThreads;
  const int tx = gt & 15, ty = gt >> 4;
  double sq_err = 0, sq_sum = 0;
  // Without transposed codes, the error map's sums of the tile before (its tile row prow,
  // column pcol; prow ~0u: none) are added once this tile's loads are in flight: their
  // lane sums and atomics then overlap the loads instead of holding them back (every
  // statistic: 68.6-69.0% -> 71.3-72.2% of copy on the H200). With transposed codes the
  // pass was slower that way (69% -> 54%): there they are added at the tile's end.
  double pe = 0, ps = 0;
  uint32_t prow = ~0u, pcol = 0;
  const auto add_previous_to_map = [&] {
    if (map && prow != ~0u) {
      const int64_t pr = int64_t{prow} * 256, pc = int64_t{pcol} * 64;
      const int64_t pr0 = pr + ty * 16, pc0 = pc + tx * 4;
      add_piece_to_map(G, map, tile_cells, pr, pc, pr0, pc0, pc0 < G.cols && pr0 < G.rows, pe, ps);
    }
  };
  // Group g of block b takes tile g * gridDim.x + b, then every (kGroups * gridDim.x)-th:
  // the tiles left over when the walks end are spread over the blocks (one an SM), not
  // given to the first blocks.
  for (TileWalk tw(G, group * gridDim.x + blockIdx.x, gridDim.x * kGroups); tw.more(); tw.next()) {
    const int64_t tc = tw.c(), tr = tw.r();
    const int64_t c0 = tc + tx * 4, r0 = tr + ty * 16;
    double te = 0, ts = 0;
    const bool in = c0 < G.cols && r0 < G.rows;
    // All sixteen rows' loads in flight before the first is used.
    Raw4<true> raw[16];
    if (in) {
      const uint16_t* src = xb + r0 * G.cols + c0;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        raw[i].load(src);
        src += G.cols;
      }
    }
    if constexpr (!kTrans) add_previous_to_map();
    if (in) {
      uint32_t lo = ~0u;  // the smallest partial's bits over the rows (add_square_sums())
      [[maybe_unused]] uint32_t t[4][4];  // kTrans: t[q][k], column k of rows 4q..4q+3
      int64_t dst = r0 * G.cols + c0;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t w[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int i = 4 * q + r;
          float v[4], y[4], dq[4];
          raw[i].get(v);
          w[r] = quantize4<F, true, true, false>(v, sc, si, Overflow::Saturate, lut, y, dq);
          count_keys(keys, raw[i].q.x);
          count_keys(keys, raw[i].q.y);
          add_square_sums(v, dq, raw[i].q, te, ts, lo);
          if (codes) *reinterpret_cast<uint32_t*>(codes + dst) = w[r];
          dst += G.cols;
        }
        if constexpr (kTrans) transpose_bytes4(w, t[q]);
      }
      if constexpr (kTrans) {
        store_transposed16(codes_t, G.rows, r0, c0, t);
      }
      // A tile with a row whose squares the fp32 partials would lose (a non-finite input or
      // scale, squares beyond fp32's range) is summed again, row by row: such rows' squares
      // in fp64 over the finite inputs, and their codes with the codec's NaN codes. Deciding
      // once a tile, not once a row, saves 8% of the kernel's instructions. The magnitudes
      // are counted above.
      if (!partials_fit(lo, te, ts)) {
        te = ts = 0;
#pragma unroll 1
        for (int i = 0; i < 16; ++i) {
          Raw4<true> row;  // in L1 still, most likely
          row.load(xb + (r0 + i) * G.cols + c0);
          float v[4], y[4], dq[4], e[4], vf[4];
          row.get(v);
          const uint32_t w = quantize4<F, true, true>(v, sc, si, Overflow::Saturate, lut, y, dq);
          if (square_sums_common(v, dq, row.q, te, ts)) continue;
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const bool fin = (float_bits(v[k]) & 0x7FFFFFFFu) < 0x7F800000u;
            e[k] = fin ? v[k] - dq[k] : 0.0f;
            vf[k] = fin ? v[k] : 0.0f;
          }
          double re, rs;
          square_sums4(e, vf, re, rs);
          te += re;
          ts += rs;
          store_codes_row<kTrans>(codes, codes_t, G.rows, G.cols, r0 + i, c0, w);
        }
      }
    }
    sq_err += te;
    sq_sum += ts;
    if constexpr (kTrans) {
      if (map) add_piece_to_map(G, map, tile_cells, tr, tc, r0, c0, in, te, ts);
    } else {
      pe = te;
      ps = ts;
      prow = tw.row;
      pcol = tw.col;
    }
  }
  if constexpr (!kTrans) add_previous_to_map();
  // The magnitudes from which an element has a nonzero code, a normal code and a saturated
  // one, found by three warps that have ended their walk (the last group's, which takes
  // fewer tiles where the walk ends unevenly); and the facts of a zero element.
  __shared__ uint32_t bounds[3];
  __shared__ bool zero_subnormal, zero_saturated;
  if (const int from_last = kKeyWarps - 1 - gpu::warp_id(); from_last < 3) {
    const auto element = [&](uint32_t k) {
      return quantize_element(__uint_as_float(k << 16), sc, si, s, Overflow::Saturate,
                              [&](uint8_t c) { return lut[c]; });
    };
    uint32_t b;
    if (from_last == 0) {
      b = first_with(1, kFiniteKeys, [&](uint32_t k) { return (element(k).code & 0x7Fu) != 0; });
    } else if (from_last == 1) {
      b = first_with(1, kFiniteKeys,
                     [&](uint32_t k) { return ((element(k).code & 0x7Fu) >> s.mbits) != 0; });
      if (gpu::lane_id() == 0) {
        const QuantizedElement z = element(0);
        zero_subnormal = is_subnormal_code(z.code, s);
        zero_saturated = z.saturated;
      }
    } else {
      b = first_with(1, kFiniteKeys, [&](uint32_t k) { return element(k).saturated; });
    }
    if (gpu::lane_id() == 0) bounds[from_last] = b;
  }
  __syncthreads();
  // The zero magnitude's count, taken out of the table for the loop below.
  uint32_t n = 0, zeros = 0, nonfinite = 0, underflow = 0, subnormal = 0, saturated = 0;
  if (threadIdx.x == 0) {
    zeros = n = keys[0];
    keys[0] = 0;
    if (zeros) {
      hist[kHistZeroBin] += zeros;
      if (zero_subnormal) subnormal = zeros;
      if (zero_saturated) saturated = zeros;
    }
  }
  const uint32_t nonzero_code = bounds[0], normal_code = bounds[1], saturates = bounds[2];
  __syncthreads();
  // The counters, bins and amax of every nonzero magnitude that occurred, as
  // count_element() counts an element. Under one scale, x * scale, and with it the code's
  // magnitude, its saturation and the bin, never decrease with |x| (the scale a NaN: every
  // nonzero x alike): the counters come from the bounds above, the bin from the scaled
  // magnitude. Each thread takes four magnitudes at a time (one 16-byte load), the threads
  // in turn (thread t: quad t, t + kKeyThreads, ...), so that the few thousand magnitudes
  // that occur in a typical tensor are shared by all the block's warps; every load is
  // issued before the first is used. A warp's 128 consecutive magnitudes mostly fall in
  // one bin, added to the block's histogram once (in two or more bins: once a bin, by
  // match_any(); a lane whose four span two bins adds each itself). The counts fit in 32
  // bits: a block takes fewer than 2^32 elements (tile_keys_ok()).
  uint32_t amax = 0;
  constexpr int kQuads = kKeys / 4;
  constexpr int kPerThread = (kQuads + kKeyThreads - 1) / kKeyThreads;
  uint4 quads[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const uint32_t u = threadIdx.x + i * kKeyThreads;
    quads[i] = u < kQuads ? reinterpret_cast<const uint4*>(keys)[u] : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const uint32_t u = threadIdx.x + i * kKeyThreads;
    if (i == kPerThread - 1 && u - gpu::lane_id() >= kQuads) break;
    const uint32_t c[4] = {quads[i].x, quads[i].y, quads[i].z, quads[i].w};
    if (gpu::ballot((c[0] | c[1] | c[2] | c[3]) != 0) == 0) continue;
    int b[4];
    uint32_t total = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t k = 4 * u + j, count = c[j];
      total += count;
      b[j] = kHistNonfiniteBin;
      if (k >= kFiniteKeys) {
        nonfinite += count;
      } else {
        b[j] = hist_bin(__uint_as_float(k << 16) * sc);
        if (count) amax = k;  // k grows
        if (k < nonzero_code) underflow += count;
        if (k - nonzero_code < normal_code - nonzero_code) subnormal += count;
        if (k >= saturates) saturated += count;
      }
    }
    n += total;
    int bin = b[0];
    if (b[3] != b[0]) {  // a bin starts among this lane's four: each to its own bin
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (c[j]) atomicAdd(&hist[b[j]], static_cast<unsigned long long>(c[j]));
      total = 0;
    }
    const int first = gpu::shfl(bin, 0);
    if (gpu::ballot(bin == first) == gpu::kFullMask) {
      const uint32_t sum = gpu::peer_sum(gpu::kFullMask, total);
      if (gpu::lane_id() == 0 && sum) atomicAdd(&hist[bin], static_cast<unsigned long long>(sum));
    } else {
      const gpu::LaneMask peers = gpu::match_any(bin);
      const uint32_t sum = gpu::peer_sum(peers, total);
      if (gpu::lane_id() == gpu::lowest_lane(peers) && sum)
        atomicAdd(&hist[bin], static_cast<unsigned long long>(sum));
    }
  }
  amax <<= 16;  // the largest's float bits
  __shared__ unsigned long long counts[kKeyWarps][6];
  __shared__ double sums[kKeyWarps][2];
  __shared__ uint32_t maxes[kKeyWarps];
  const int lane = gpu::lane_id(), warp = gpu::warp_id();
  const unsigned long long c[6] = {n, zeros, nonfinite, underflow, subnormal, saturated};
#pragma unroll
  for (int i = 0; i < 6; ++i) {
    const unsigned long long sum = warp_sum(c[i]);
    if (lane == 0) counts[warp][i] = sum;
  }
  const double e = warp_sum(sq_err), q = warp_sum(sq_sum);
  const uint32_t m = warp_max(amax);
  if (lane == 0) {
    sums[warp][0] = e;
    sums[warp][1] = q;
    maxes[warp] = m;
  }
  __syncthreads();
  unsigned long long* const dst[6] = {reinterpret_cast<unsigned long long*>(&stats->numel),
                                      reinterpret_cast<unsigned long long*>(&stats->zeros),
                                      reinterpret_cast<unsigned long long*>(&stats->nonfinite),
                                      reinterpret_cast<unsigned long long*>(&stats->underflow),
                                      reinterpret_cast<unsigned long long*>(&stats->subnormal),
                                      reinterpret_cast<unsigned long long*>(&stats->saturated)};
  if (threadIdx.x < 6) {
    unsigned long long sum = 0;
    for (int w = 0; w < kKeyWarps; ++w) sum += counts[w][threadIdx.x];
    if (sum) atomicAdd(dst[threadIdx.x], sum);
  } else if (threadIdx.x == 32 || threadIdx.x == 33) {
    double sum = 0;
    for (int w = 0; w < kKeyWarps; ++w) sum += sums[w][threadIdx.x - 32];
    if (sum != 0) atomicAdd(threadIdx.x == 32 ? &stats->sq_err : &stats->sq_sum, sum);
  } else if (threadIdx.x == 64) {
    uint32_t mm = 0;
    for (int w = 0; w < kKeyWarps; ++w) mm = max(mm, maxes[w]);
    atomicMax(&stats->amax_bits, mm);
  } else if (threadIdx.x >= 128 && threadIdx.x < 128 + kHistBins) {
    const unsigned long long h = hist[threadIdx.x - 128];
    if (h) atomicAdd(reinterpret_cast<unsigned long long*>(&stats->hist[threadIdx.x - 128]), h);
  }
}

// Blocks of tile_keys_kernel for a tensor of `tiles` tiles: one an SM at most.
unsigned keys_grid(int64_t tiles) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((tiles + kGroups - 1) / kGroups, sm_count())));
}

int64_t tile_count(const DeviceTensor& x) {
  return ((x.cols + 63) / 64) * ((x.rows + 255) / 256);
}

// The table's 128 KB past the default 48 KB of shared memory, allowed once per kernel.
template <auto Kernel>
void allow_key_table() {
  static std::once_flag once;
  std::call_once(once, [] {
    FP8WB_GPU_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(Kernel),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kKeyTableBytes)));
  });
}

// tile_keys_kernel's arguments, each of the type of its parameter (a cooperative launch
// takes their addresses).
struct KeysArgs {
  const uint16_t* xb;
  Geometry G;
  const float* scale;
  const float* scale_inv;
  uint8_t* codes;
  uint8_t* codes_t;
  StatsBuffer* stats;
  double* map;
  bool tile_cells;
  ZeroFirst zero;
};

template <auto Kernel>
void launch_plain(unsigned grid, cudaStream_t st, const KeysArgs& a) {
  allow_key_table<Kernel>();
  Kernel<<<grid, kKeyThreads, kKeyTableBytes, st>>>(
      a.xb, a.G, a.scale, a.scale_inv, a.codes, a.codes_t, a.stats, a.map, a.tile_cells, a.zero);
}

#if defined(FP8WB_KEYS_ZERO_IN_KERNEL)
// The most words a fresh pass zeroes in the kernel (a StatsBuffer and 2 x 256 x 256 cells:
// 32-bit index arithmetic); more are zeroed by a launch of their own.
constexpr int64_t kMaxZeroWords = int64_t{1} << 18;

// False where not every block fits on the GPU at once (a GPU whose SMs others' limits
// share out): the caller then zeroes by a launch of its own.
template <auto Kernel>
bool launch_cooperative(unsigned grid, cudaStream_t st, KeysArgs a) {
  allow_key_table<Kernel>();
  void* args[] = {&a.xb,      &a.G,     &a.scale, &a.scale_inv,  &a.codes,
                  &a.codes_t, &a.stats, &a.map,   &a.tile_cells, &a.zero};
  const cudaError_t e =
      cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(Kernel), dim3(grid),
                                  dim3(kKeyThreads), args, kKeyTableBytes, st);
  if (e == cudaSuccess) return true;
  if (e != cudaErrorCooperativeLaunchTooLarge && e != cudaErrorNotSupported) FP8WB_GPU_CHECK(e);
  (void)cudaGetLastError();
  return false;
}
#endif

}  // namespace

bool tile_keys_ok(const DeviceTensor& x, const Geometry& G, const uint8_t* codes,
                  const uint8_t* codes_t, bool histogram) {
  // Without the histogram, the tile kernel's counters off the codes cost less than a
  // shared-memory add an element.
  if (!histogram || !x.bf16 || G.group_cols != 1 || G.block_rows < G.rows ||
      !tile_stats_ok(x, G, codes, codes_t)) {
    return false;
  }
  // The table's counters are 32-bit: a block takes fewer than 2^32 elements.
  const int64_t tiles = tile_count(x), grid = keys_grid(tiles);
  return (tiles + grid - 1) / grid * (256 * 64) < (int64_t{1} << 32);
}

void launch_tile_keys(Format f, const DeviceTensor& x, const Geometry& G, const float* sc,
                      const float* si, uint8_t* codes, uint8_t* codes_t,
                      const DeviceStatsTargets& t, cudaStream_t st) {
  KeysArgs a{x.bf16,
             G,
             sc,
             si,
             codes,
             codes_t,
             t.stats,
             G.map ? t.map : nullptr,
             G.cell_rows % 256 == 0 && G.cell_cols % 64 == 0,
             ZeroFirst{}};
  const unsigned grid = keys_grid(tile_count(x));
  const auto pick = [&](auto format_tag) {
    constexpr Format F = decltype(format_tag)::value;
#if defined(FP8WB_KEYS_ZERO_IN_KERNEL)
    // Fresh statistics zeroed in the kernel, without transposed codes (the statistics of one
    // tensor alone: checkpoints, the benchmarks); the same words as zero_stats_cuda() zeroes.
    const ZeroFirst zero{reinterpret_cast<unsigned long long*>(t.stats),
                         static_cast<int64_t>(sizeof(StatsBuffer) / 8),
                         reinterpret_cast<unsigned long long*>(t.map),
                         t.map ? 2 * t.grid.cell_count() : 0};
    if (t.fresh && !codes_t && zero.words_a + zero.words_b <= kMaxZeroWords) {
      KeysArgs fresh = a;
      fresh.zero = zero;
      if (launch_cooperative<&tile_keys_kernel<F, false, true>>(grid, st, fresh)) return;
    }
#endif
    if (t.fresh) zero_stats_cuda(t, reinterpret_cast<fp8wb_stream_t>(st));
    if (codes_t) {
      launch_plain<&tile_keys_kernel<F, true, false>>(grid, st, a);
    } else {
      launch_plain<&tile_keys_kernel<F, false, false>>(grid, st, a);
    }
  };
  if (f == Format::E4M3FN) {
    pick(std::integral_constant<Format, Format::E4M3FN>{});
  } else if (f == Format::E5M2) {
    pick(std::integral_constant<Format, Format::E5M2>{});
  } else {
    throw std::invalid_argument("statistics by value: E4M3FN or E5M2 with saturation only");
  }
  FP8WB_GPU_CHECK(cudaGetLastError());
}

}  // namespace fp8wb::qgpu
