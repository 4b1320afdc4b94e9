// Scaled quantization on the GPU, row-walk kernels: any recipe, every statistic.
//
// Work is cut into items of one window of 4 x warp-width columns x 32 rows; a warp takes
// an item, each lane four consecutive columns (16-byte fp32 loads, coalesced across the
// warp), and walks down the rows. Counters and sums stay in registers, the exponent
// histogram in a lane-private column of shared memory (no atomics, no bank conflicts);
// the error map is flushed with one atomic per cell touched (a segmented warp reduction)
// when the walk leaves a row of cells. Shapes or pointers this kernel cannot take go to a
// plain element-per-thread kernel.
#include "quantize_cuda_stats.cuh"

namespace fp8wb::qgpu {
namespace {

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
                  count4<F>(v[j], y, dq, word, ls, my_hist, e, vf);
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
    flush_block_stats(ls, stats, with_hist ? lane_hist : nullptr, kCodeStats);
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

}  // namespace

void launch_row_walk(Format f, bool hw, const DeviceTensor& x, const Geometry& G, const float* sc,
                     const float* si, Overflow ov, uint8_t* codes, uint8_t* codes_t,
                     const DeviceStatsTargets& t, cudaStream_t st) {
  double* map = G.map ? t.map : nullptr;
  const size_t smem = t.stats && t.histogram ? kLaneHistBytes : 0;
  const int64_t items = ((x.cols + kWindow - 1) / kWindow) * ((x.rows + kRowChunk - 1) / kRowChunk);
  const int64_t want = (items + kWarps - 1) / kWarps;
  dispatch_codec(f, hw, [&](auto tag, auto hw_tag) {
    constexpr Format F = decltype(tag)::value;
    constexpr bool kHw = decltype(hw_tag)::value;
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
  });
  FP8WB_GPU_CHECK(cudaGetLastError());
}

void launch_generic(Format f, const DeviceTensor& x, const Geometry& G, const float* sc,
                    const float* si, Overflow ov, uint8_t* codes, uint8_t* codes_t,
                    const DeviceStatsTargets& t, cudaStream_t st) {
  double* map = G.map ? t.map : nullptr;
  const size_t smem = t.stats && t.histogram ? kLaneHistBytes : 0;
  dispatch_element_format(f, [&](auto tag) {
    constexpr Format F = decltype(tag)::value;
    constexpr auto k = &quantize_generic_kernel<F>;
    if (smem) allow_lane_hist<k>();
    k<<<blocks_for(x.rows * x.cols, kThreads), kThreads, smem, st>>>(
        x.f32, x.bf16, G, sc, si, ov, codes, codes_t, t.stats, map, t.histogram, t.amax_bits);
  });
  FP8WB_GPU_CHECK(cudaGetLastError());
}

}  // namespace fp8wb::qgpu
