// Scaled quantization on the GPU, tile kernels and the flat kernel.
//
// A 16 x 16 block takes a tile of 64 columns x 256 rows, a thread 4 columns x 16 rows
// (sixteen 16-byte loads in flight) under one scale, and stores 16 bytes of each of its
// columns' transposed rows: the passes that write transposed codes (tensorwise, 128x128
// blocks), and every statistic for E4M3FN and E5M2 with saturation. Tensorwise passes
// without statistics or transposed codes take the flat kernel, 16 elements a thread.
#include "quantize_cuda_stats.cuh"

namespace fp8wb::qgpu {
namespace {

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
  uint32_t m = 0;
  for (TileWalk tw(G); tw.more(); tw.next()) {
    const int64_t c0 = tw.c() + tx * 4;
    const int64_t r0 = tw.r() + ty * 16;
    if (c0 >= G.cols || r0 >= G.rows) continue;
    const float sc = scale[group_of(G, r0, c0)];
    float v[16][4];
#pragma unroll
    for (int i = 0; i < 16; ++i) load4(xf, xb, (r0 + i) * G.cols + c0, v[i]);
    uint32_t t[4][4];  // t[q][k]: column k of rows 4q..4q+3
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t w[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = 4 * q + r;
        float y[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          y[k] = v[i][k] * sc;
          if (kAmax) m = finite_abs_max(m, v[i][k]);
        }
        w[r] = encode4<F, kHw, false>(y, 1.0f, ov, nullptr, nullptr);
        if (codes) *reinterpret_cast<uint32_t*>(codes + (r0 + i) * G.cols + c0) = w[r];
      }
      transpose_bytes4(w, t[q]);
    }
    store_transposed16(codes_t, G.rows, r0, c0, t);
  }
  if (kAmax) flush_block_amax(m, amax_out);
}

// Every statistic in the tile layout of tile_quantize_t_kernel (codes, and transposed
// codes where asked), for E4M3FN and E5M2 with saturation: flags off the codes, squares
// summed four at a time. Where a tile lies inside one error-map cell, each warp adds its
// sums to the cell (tile_cells); else a thread's 16-row x 4-column piece lies
// inside one cell, and each half-warp's sums go to the map by a segmented reduction.
// Three blocks an SM (registers capped at 80; the lane histograms allow three on an H200):
// latency, not issue, bounds this kernel, and 24 resident warps beat 16 (0.170 -> 0.157 ms
// at 16384 x 4096, docs/performance.md).
// kTrans: transposed codes into codes_t; kHist: the histogram; kBf16: the input is xb.
template <Format F, bool kHw, bool kTrans, bool kHist, bool kBf16>
__global__ void __launch_bounds__(kThreads, 3)
    tile_stats_kernel(const float* xf, const uint16_t* xb, Geometry G,
                      const float* __restrict__ scale, const float* __restrict__ scale_inv,
                      uint8_t* codes, uint8_t* __restrict__ codes_t, StatsBuffer* stats,
                      double* map, bool tile_cells) {
  constexpr CodecSpec s = codec_spec(F);
  extern __shared__ uint32_t lane_hist[];  // kHist: kLaneHistBytes
  __shared__ float lut[256];
  for (int c = threadIdx.x; c < 256; c += blockDim.x) lut[c] = decode(static_cast<uint8_t>(c), s);
  if (kHist) {
    for (int i = threadIdx.x; i < kHistBins * kThreads; i += blockDim.x) lane_hist[i] = 0;
  }
  __syncthreads();
  uint32_t* my_hist = kHist ? lane_hist + threadIdx.x : nullptr;
  const uint32_t lane_off = threadIdx.x * sizeof(uint32_t);  // in a histogram row
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  LaneStats ls;
  for (TileWalk tw(G); tw.more(); tw.next()) {
    const int64_t tc = tw.c(), tr = tw.r();
    const int64_t c0 = tc + tx * 4, r0 = tr + ty * 16;
    double te = 0, ts = 0;
    const bool in = c0 < G.cols && r0 < G.rows;
    if (in) {
      const int64_t g = group_of(G, r0, c0);
      const float sc = scale[g], si = scale_inv[g];
      uint32_t slow = 0;  // bit i: row i's four elements wait for the loop after the body
      [[maybe_unused]] uint32_t t[4][4];  // kTrans: t[q][k], column k of rows 4q..4q+3
      // Row pointers advanced a row at a time (one 64-bit add a row, not a multiply).
      using Elem = typename Raw4<kBf16>::Elem;
      const Elem* src;
      if constexpr (kBf16) {
        src = xb + r0 * G.cols + c0;
      } else {
        src = xf + r0 * G.cols + c0;
      }
      // Advanced whether or not there are codes to store: the store's test is then the
      // same for every row.
      int64_t dst = r0 * G.cols + c0;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        Raw4<kBf16> raw[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          raw[j].load(src);
          src += G.cols;
        }
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          uint32_t w[4];
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int j = 4 * q + r, i = half * 8 + j;
            float v[4], y[4], dq[4];
            raw[j].get(v);
            w[r] = quantize4<F, kHw, true, false>(v, sc, si, Overflow::Saturate, lut, y, dq);
            // Rows count4_common leaves (a non-finite input or scale, a code of the
            // largest magnitude, squares beyond fp32's range) wait for the loop below.
            if (!count4_common<F, kHist>(v, y, dq, w[r], ls, lane_hist, lane_off, te, ts))
              slow |= 1u << i;
            if (codes) *reinterpret_cast<uint32_t*>(codes + dst) = w[r];
            dst += G.cols;
          }
          if constexpr (kTrans) transpose_bytes4(w, t[half * 2 + q]);
        }
      }
      if constexpr (kTrans) {
        store_transposed16(codes_t, G.rows, r0, c0, t);
      }
      // The rows count4_common left (a non-finite input, a code of the largest magnitude,
      // squares beyond fp32's range; every row under a non-finite scale), a loop kept out
      // of the unrolled body: their codes with the codec's NaN codes, and their counts.
#pragma unroll 1
      for (; slow != 0; slow &= slow - 1) {
        const int i = __ffs(slow) - 1;
        float v[4], y[4], dq[4], e[4], vf[4];
        load4(xf, xb, (r0 + i) * G.cols + c0, v);
        const uint32_t w = quantize4<F, kHw, true>(v, sc, si, Overflow::Saturate, lut, y, dq);
        count4<F>(v, y, dq, w, ls, my_hist, e, vf);
        double re, rs;
        square_sums4(e, vf, re, rs);
        te += re;
        ts += rs;
        store_codes_row<kTrans>(codes, codes_t, G.rows, G.cols, r0 + i, c0, w);
      }
    }
    ls.sq_err += te;
    ls.sq_sum += ts;
    if (map) add_piece_to_map(G, map, tile_cells, tr, tc, r0, c0, in, te, ts);
  }
  __syncthreads();
  flush_block_stats(ls, stats, kHist ? lane_hist : nullptr, true);
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

}  // namespace

// The statistics in tiles: rows a multiple of 16, groups and error-map cells of whole
// 16-row x 4-column pieces, aligned pointers.
bool tile_stats_ok(const DeviceTensor& x, const Geometry& G, const uint8_t* codes,
                   const uint8_t* codes_t) {
  const uintptr_t in =
      reinterpret_cast<uintptr_t>(x.f32 ? static_cast<const void*>(x.f32) : x.bf16);
  return kTileKernels && tile_walk_fits(x.rows, x.cols) && x.rows % 16 == 0 && x.cols % 4 == 0 &&
         G.block_rows % 16 == 0 && G.block_cols % 4 == 0 &&
         (!G.map || (G.cell_rows % 16 == 0 && G.cell_cols % 4 == 0)) &&
         in % (x.f32 ? 16 : 8) == 0 && reinterpret_cast<uintptr_t>(codes) % 4 == 0 &&
         reinterpret_cast<uintptr_t>(codes_t) % 16 == 0;
}

void launch_tile_stats(Format f, const DeviceTensor& x, const Geometry& G, const float* sc,
                       const float* si, uint8_t* codes, uint8_t* codes_t,
                       const DeviceStatsTargets& t, cudaStream_t st) {
  double* map = G.map ? t.map : nullptr;
  const bool tile_cells = G.cell_rows % 256 == 0 && G.cell_cols % 64 == 0;
  const size_t smem = t.histogram ? kLaneHistBytes : 0;
  const int64_t tiles = ((x.cols + 63) / 64) * ((x.rows + 255) / 256);
  dispatch_codec(f, true, [&](auto tag, auto hw_tag) {
    constexpr Format F = decltype(tag)::value;
    if constexpr (decltype(hw_tag)::value) {
      const auto launch = [&](auto trans_tag, auto hist_tag) {
        const auto run = [&](auto bf16_tag) {
          constexpr auto k =
              &tile_stats_kernel<F, true, decltype(trans_tag)::value, decltype(hist_tag)::value,
                                 decltype(bf16_tag)::value>;
          const unsigned grid = smem ? resident_hist_blocks<k>(tiles) : blocks_for(tiles, 1);
          k<<<grid, kThreads, smem, st>>>(x.f32, x.bf16, G, sc, si, codes, codes_t, t.stats, map,
                                          tile_cells);
        };
        x.bf16 ? run(std::true_type{}) : run(std::false_type{});
      };
      using Yes = std::true_type;
      using No = std::false_type;
      if (codes_t) {
        t.histogram ? launch(Yes{}, Yes{}) : launch(Yes{}, No{});
      } else {
        t.histogram ? launch(No{}, Yes{}) : launch(No{}, No{});
      }
    } else {
      throw std::invalid_argument("tile statistics: E4M3FN or E5M2 with saturation only");
    }
  });
  FP8WB_GPU_CHECK(cudaGetLastError());
}

void launch_tile_transposed(Format f, bool hw, const DeviceTensor& x, const Geometry& G,
                            const float* sc, Overflow ov, uint8_t* codes, uint8_t* codes_t,
                            uint32_t* amax_bits, cudaStream_t st) {
  const unsigned grid = blocks_for(((x.cols + 63) / 64) * ((x.rows + 255) / 256), 1);
  dispatch_codec(f, hw, [&](auto tag, auto hw_tag) {
    constexpr Format F = decltype(tag)::value;
    constexpr bool kHw = decltype(hw_tag)::value;
    if (amax_bits) {
      tile_quantize_t_kernel<F, kHw, true>
          <<<grid, kThreads, 0, st>>>(x.f32, x.bf16, G, sc, ov, codes, codes_t, amax_bits);
    } else {
      tile_quantize_t_kernel<F, kHw, false>
          <<<grid, kThreads, 0, st>>>(x.f32, x.bf16, G, sc, ov, codes, codes_t, nullptr);
    }
  });
  FP8WB_GPU_CHECK(cudaGetLastError());
}

void launch_flat(Format f, bool hw, const DeviceTensor& x, const float* sc, Overflow ov,
                 uint8_t* codes, uint32_t* amax_bits, cudaStream_t st) {
  const int64_t n16 = x.rows * x.cols / 16;
  const unsigned grid = blocks_for(n16, kThreads);
  dispatch_codec(f, hw, [&](auto tag, auto hw_tag) {
    constexpr Format F = decltype(tag)::value;
    constexpr bool kHw = decltype(hw_tag)::value;
    if (amax_bits) {
      quantize_flat_kernel<F, true, kHw>
          <<<grid, kThreads, 0, st>>>(x.f32, x.bf16, n16, sc, ov, codes, amax_bits);
    } else {
      quantize_flat_kernel<F, false, kHw>
          <<<grid, kThreads, 0, st>>>(x.f32, x.bf16, n16, sc, ov, codes, nullptr);
    }
  });
  FP8WB_GPU_CHECK(cudaGetLastError());
}

}  // namespace fp8wb::qgpu
