// defines (for the quantize_*_cuda.cu files that gather statistics): the counters of a
// lane (LaneStats) and their block reduction, the element and four-element counting steps
// (count_element, count4_finite, count4), the fp32-then-fp64 square sums, the lane-private
// histograms (hist_row, hist_inc, their shared-memory set-up), on top of
// quantize_cuda_internal.cuh.
#pragma once

#include "quantize_cuda_internal.cuh"

namespace fp8wb::qgpu {

struct LaneStats {
  uint32_t numel = 0, zeros = 0, nonfinite = 0, underflow = 0, subnormal = 0, saturated = 0,
           amax = 0;
  double sq_err = 0, sq_sum = 0;
};

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

// The smallest |y| bits that saturate (finite x whose x * scale rounds past the largest
// finite value): above 464 for E4M3FN (448 + half its spacing, which rounds to even 448),
// from 61440 for E5M2 (the tie rounds to the even 65536).
template <Format F>
constexpr uint32_t saturating_bits() {
  return F == Format::E4M3FN ? 0x43E80001u : 0x47700000u;
}

// How a counting step takes its rarely needed branches: a callable from the branch's
// condition in this lane to whether the lane takes it. LaneDecides: each lane for itself.
struct LaneDecides {
  __device__ __forceinline__ bool operator()(bool p) const { return p; }
};

// Squares of four differences and four inputs (finite inputs only; the caller zeroes the
// rest) summed in fp32, then taken to fp64. Partials outside [2^-100, 2^126] (zeros,
// values whose squares would leave fp32's normal range) are summed in fp64 instead.
template <class Decide = LaneDecides>
__device__ __forceinline__ void square_sums4(const float e[4], const float v[4], double& re,
                                             double& rs, Decide any = {}) {
  const float pe = fmaf(e[3], e[3], fmaf(e[2], e[2], fmaf(e[1], e[1], e[0] * e[0])));
  const float ps = fmaf(v[3], v[3], fmaf(v[2], v[2], fmaf(v[1], v[1], v[0] * v[0])));
  const bool fp32 = pe >= 0x1p-100f && pe <= 0x1p126f && ps >= 0x1p-100f && ps <= 0x1p126f;
  if (!any(!fp32)) {  // no lane needs fp64 (a branch of its own: it may be the warp's)
    re = pe;
    rs = ps;
    return;
  }
  if (fp32) {
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

// A tile kernel's thread adds its piece's square sums (te, ts; the piece's first row r0
// and column c0, `in` where the piece lies in the tensor) to the error map: where the
// tile (first row tr, column tc) lies in one cell (tile_cells), each warp adds its sums
// (no barrier, which would hold the warps in step, their loads and arithmetic no longer
// overlapping); else each half-warp's sums go to their cells by a segmented reduction
// (keys rise along a half-warp, whose 16 threads are consecutive columns of one row of
// pieces; the second half's are offset by the cell count, so that a run of equal keys is
// one half's threads in one cell).
__device__ __forceinline__ void add_piece_to_map(const Geometry& G, double* map, bool tile_cells,
                                                 int64_t tr, int64_t tc, int64_t r0, int64_t c0,
                                                 bool in, double te, double ts) {
  if (tile_cells) {
    te = warp_sum(te);
    ts = warp_sum(ts);
    if (gpu::lane_id() == 0) {
      // The cell from tile counts in 32 bits (tile_walk_fits: fewer than 2^31 tiles), with
      // no division where a cell is one tile: two 64-bit divisions at the end of every
      // tile were 3% of the all-statistics pass's instructions.
      const uint32_t tile_r = static_cast<uint32_t>(tr / 256),
                     tile_c = static_cast<uint32_t>(tc / 64);
      const uint32_t per_r = static_cast<uint32_t>(G.cell_rows / 256),
                     per_c = static_cast<uint32_t>(G.cell_cols / 64);
      const int64_t cell = int64_t{per_r == 1 ? tile_r : tile_r / per_r} * G.map_cols +
                           (per_c == 1 ? tile_c : tile_c / per_c);
      if (te != 0) atomicAdd(&map[cell], te);
      if (ts != 0) atomicAdd(&map[G.cells + cell], ts);
    }
    return;
  }
  const int64_t key = in ? (r0 / G.cell_rows) * G.map_cols + c0 / G.cell_cols +
                               ((gpu::lane_id() >> 4) & 1) * G.cells
                         : LLONG_MAX;
  const auto add = [](double a, double b) { return a + b; };
  const double e = segmented_reduce(key, te, add), q = segmented_reduce(key, ts, add);
  if (last_of_run(key) && in) {
    const int64_t cell = key >= G.cells ? key - G.cells : key;
    if (e != 0) atomicAdd(&map[cell], e);
    if (q != 0) atomicAdd(&map[G.cells + cell], q);
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
// kInRange: the caller knows y's exponent lies within the bins (a finite y whose code is
// neither zero nor the largest magnitude: 2^-40 <= |y| < 2^24), and no clamp is needed.
template <bool kInRange = false>
__device__ __forceinline__ void hist_inc(uint32_t* hist, float y) {
  constexpr uint32_t kRowBytes = kThreads * sizeof(uint32_t);
  static_assert(kRowBytes == 1024 || kRowBytes == 512, "a histogram row is 2^shift bytes");
  constexpr int kShift = kRowBytes == 1024 ? 10 : 9;
  constexpr uint32_t kFirst = 127 + kHistMinExp, kLast = kFirst + kHistExpBins - 1;
  const uint32_t field = (__float_as_uint(y) >> (23 - kShift)) & (0xFFu << kShift);
  const uint32_t off =
      (kInRange ? field : min(max(field, kFirst << kShift), kLast << kShift)) - (kFirst << kShift);
  atomicAdd(reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(hist) + off), 1u);
}

// The smallest nonzero magnitude of a format's codes is above 2^-40 and its largest below
// 2^24: a y whose code is neither zero nor the largest lies within the histogram's bins.
static_assert(kHistMinExp <= -17 && kHistMaxExp >= 16, "E4M3FN and E5M2 codes fit the bins");

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
template <Format F, bool kHistGiven = false, class Decide = LaneDecides>
__device__ __forceinline__ bool count4_finite(const float x[4], const float y[4], const float dq[4],
                                              uint32_t word, LaneStats& ls, uint32_t* hist,
                                              float e[4], float vf[4], bool finite_scale,
                                              Decide any = {}) {
  constexpr CodecSpec s = codec_spec(F);
  uint32_t a[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) a[k] = float_bits(x[k]) & 0x7FFFFFFFu;
  const uint32_t a4 = max(max(a[0], a[1]), max(a[2], a[3]));
  if (any(a4 >= 0x7F800000u || !finite_scale)) return false;
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
  if (any(nonzero_codes != 4 || largest)) {  // one branch for both rare cases
    if (nonzero_codes != 4) {                // a zero input or an underflow
      const uint32_t zeros = (a[0] == 0) + (a[1] == 0) + (a[2] == 0) + (a[3] == 0);
      ls.zeros += zeros;
      ls.underflow += 4 - nonzero_codes - zeros;  // zero codes of nonzero inputs
    }
    if (largest) {
#pragma unroll
      for (int k = 0; k < 4; ++k)
        ls.saturated += (float_bits(y[k]) & 0x7FFFFFFFu) >= saturating_bits<F>();
    }
    if (kHistGiven || hist) {
#pragma unroll
      for (int k = 0; k < 4; ++k) hist_inc(hist, y[k]);  // clamped: y may lie beyond the bins
    }
  } else if (kHistGiven || hist) {
    // Every code nonzero and below the largest, in every lane deciding: no clamp.
#pragma unroll
    for (int k = 0; k < 4; ++k) hist_inc<true>(hist, y[k]);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    e[k] = x[k] - dq[k];
    vf[k] = x[k];
  }
  return true;
}

// Four elements of one lane in the tile kernels, in the common case: every x finite, no
// code of the largest magnitude, and both fp32 partials of the squares (as square_sums4
// sums them) within [2^-100, 2^126], or every x zero and its error partial zero. (Under a
// non-finite scale no row is: a nonzero x gets the largest code or a NaN code, whose
// partial is NaN, and a zero x a NaN code.) Then it counts the four as count4_finite and
// square_sums4 would (the same counters, bins and sums), adds the partials to te and ts
// and returns true; else it changes nothing and returns false, and the caller counts the
// four later with count4 (a row of the tile kernels' slow loop). No vote among lanes and
// no branch a warp must agree on: the three votes the steps above take for four elements
// were a tenth of the kernel's instructions.
// hist: the lane-private histograms (kHistBins rows of kThreads counters; unused without
// kHist);
// lane_off: the lane's byte offset in a row, below a row's size, so that a count's offset
// is the row's OR'd with it.
template <Format F, bool kHist>
__device__ __forceinline__ bool count4_common(const float x[4], const float y[4], const float dq[4],
                                              uint32_t word, LaneStats& ls, uint32_t* hist,
                                              uint32_t lane_off, double& te, double& ts) {
  constexpr CodecSpec s = codec_spec(F);
  uint32_t a[4];
  float e[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    a[k] = float_bits(x[k]) & 0x7FFFFFFFu;
    e[k] = x[k] - dq[k];
  }
  const uint32_t a4 = max(max(a[0], a[1]), max(a[2], a[3]));
  const float pe = fmaf(e[3], e[3], fmaf(e[2], e[2], fmaf(e[1], e[1], e[0] * e[0])));
  const float ps = fmaf(x[3], x[3], fmaf(x[2], x[2], fmaf(x[1], x[1], x[0] * x[0])));
  const uint32_t mags = word & 0x7F7F7F7Fu;
  const uint32_t top = mags ^ (uint32_t{s.max_mag} * 0x01010101u);  // a zero byte: largest
  const uint32_t largest = (top - 0x01010101u) & ~top & 0x80808080u;
  // Every x zero (under a finite scale): every code and difference is zero, and both
  // partials are exactly 0.
  const bool sums = (pe >= 0x1p-100f && pe <= 0x1p126f && ps >= 0x1p-100f && ps <= 0x1p126f) ||
                    (a4 == 0 && pe == 0.0f);
  if (a4 >= 0x7F800000u || largest != 0 || !sums) return false;
  ls.numel += 4;
  ls.amax = max(ls.amax, a4);
  // Bit 7 of each byte: the magnitude is not zero; it is at least the smallest normal.
  const uint32_t nonzero = (mags + 0x7F7F7F7Fu) & 0x80808080u;
  const uint32_t normal = (mags + (0x80u - (1u << s.mbits)) * 0x01010101u) & 0x80808080u;
  ls.subnormal += __popc(nonzero & ~normal);
  constexpr uint32_t kRowBytes = kThreads * sizeof(uint32_t);
  static_assert(kRowBytes == 1024 || kRowBytes == 512, "a histogram row is 2^shift bytes");
  constexpr int kShift = kRowBytes == 1024 ? 10 : 9;
  constexpr uint32_t kFirstRow = uint32_t{127 + kHistMinExp} << kShift;
  if (nonzero != 0x80808080u) {  // a zero input or an underflow
    const uint32_t zeros = (a[0] == 0) + (a[1] == 0) + (a[2] == 0) + (a[3] == 0);
    ls.zeros += zeros;
    ls.underflow += 4 - __popc(nonzero) - zeros;  // zero codes of nonzero inputs
    if constexpr (kHist) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        // y below the first bin (a zero, counted in bin 0 until the flush moves it, or an
        // underflow) goes to the first; no code is the largest, so none lies past the last.
        const uint32_t row = (float_bits(y[k]) >> (23 - kShift)) & (0xFFu << kShift);
        atomicAdd(reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(hist) +
                                              ((max(row, kFirstRow) | lane_off) - kFirstRow)),
                  1u);
      }
    }
  } else if constexpr (kHist) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // Every code nonzero and below the largest: y lies within the bins.
      const uint32_t row = (float_bits(y[k]) >> (23 - kShift)) & (0xFFu << kShift);
      atomicAdd(reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(hist) +
                                            ((row | lane_off) - kFirstRow)),
                1u);
    }
  }
  te += pe;
  ts += ps;
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

}  // namespace fp8wb::qgpu
