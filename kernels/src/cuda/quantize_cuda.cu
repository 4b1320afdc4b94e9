// Scaled quantization on the GPU: the entry points. amax, scales, dequantize and the
// delayed-scaling update are here; quantize_cuda() picks the kernel family that takes the
// pass (quantize_cuda_internal.cuh lists them):
//   - statistics of E4M3FN/E5M2 with saturation in whole 16 x 4 pieces: tile kernel, or
//     with the histogram of bf16 under one scale, the kernel that counts by value
//     (quantize_keys_cuda.cu);
//   - transposed codes without statistics: tile kernel;
//   - tensorwise codes only (an amax at most): flat kernel;
//   - anything else with 16-byte-aligned rows: row-walk kernel;
//   - the rest: one element per thread.
//
// E4M3FN and E5M2 with saturation (the FP8 training formats) convert with the hardware's
// cvt.rn.satfinite instructions where the GPU has them (sm_89+), two elements an
// instruction, and decode with cvt.rn.f16x2; bit for bit the software codec's result
// (tests/gpu: every fp32 bit pattern). Every other format, overflow mode and GPU takes
// the software codec.
#include <cfloat>

#include "fp8wb/kernels/scale_math.h"
#include "quantize_cuda_internal.cuh"

namespace fp8wb {
namespace {

using namespace qgpu;

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
                                      float* scale, float* scale_inv, float* amax_h_out,
                                      DelayedUpdateExtras after) {
  __shared__ float part[1024];
  const float amax = __uint_as_float(*amax_bits);
  if (threadIdx.x == 0) {
    history[head] = amax;
    const float used = *scale_inv;  // before thread 0 writes the next step's below
    if (after.used_scale_inv) *after.used_scale_inv = used;
    if (after.used_scale_inv_2) *after.used_scale_inv_2 = used;
  }
  __syncthreads();  // every thread has read the amax: its word may be reset
  if (threadIdx.x == 0 && after.amax_reset) *after.amax_reset = 0;
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

// Zeroes a words of a and b words of b (8-byte words).
__global__ void zero_words_kernel(unsigned long long* a, int64_t na, unsigned long long* b,
                                  int64_t nb) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < na + nb;
       i += int64_t{gridDim.x} * blockDim.x) {
    if (i < na) {
      a[i] = 0;
    } else {
      b[i - na] = 0;
    }
  }
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

// No statistics (an amax at most), transposed codes, groups of whole 16-row x 4-column
// pieces (tensorwise, 128x128), rows a multiple of 16, aligned pointers.
bool tile_path_ok(const DeviceTensor& x, const GroupLayout& L, const DeviceStatsTargets& t,
                  const uint8_t* codes, const uint8_t* codes_t) {
  const uintptr_t in =
      reinterpret_cast<uintptr_t>(x.f32 ? static_cast<const void*>(x.f32) : x.bf16);
  return kTileKernels && !t.stats && codes_t && tile_walk_fits(x.rows, x.cols) &&
         x.rows % 16 == 0 && x.cols % 4 == 0 && L.block_rows % 16 == 0 && L.block_cols % 4 == 0 &&
         in % (x.f32 ? 16 : 8) == 0 && reinterpret_cast<uintptr_t>(codes) % 4 == 0 &&
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

}  // namespace

namespace qgpu {

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

void launch_scales(ScalingKind kind, int64_t groups, const float* amax, const float* tensor_amax,
                   const FormatInfo& info, int margin, bool pow2, bool rceil, float* scale,
                   float* scale_inv, uint8_t* codes, float* global_scale, cudaStream_t st) {
  scales_kernel<<<static_cast<unsigned>((groups + 255) / 256), 256, 0, st>>>(
      kind, groups, amax, tensor_amax, info.max_finite, info.emax, margin, pow2, rceil, scale,
      scale_inv, codes, global_scale);
  FP8WB_GPU_CHECK(cudaGetLastError());
}

}  // namespace qgpu

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
  launch_scales(r.kind, groups, d_group_amax, d_tensor_amax, format_info(r.format), r.margin,
                r.pow2_scales, r.mx_rounding == MxRounding::RCeil, d_scale, d_scale_inv,
                d_scale_codes, d_global_scale, reinterpret_cast<cudaStream_t>(stream));
}

void zero_stats_cuda(const DeviceStatsTargets& t, fp8wb_stream_t stream) {
  const int64_t map_words = t.map ? 2 * t.grid.cell_count() : 0;
  const int64_t stats_words = t.stats ? static_cast<int64_t>(sizeof(StatsBuffer) / 8) : 0;
  if (stats_words + map_words == 0) return;
  static_assert(sizeof(StatsBuffer) % 8 == 0, "the buffer is zeroed in 8-byte words");
  // One launch for both buffers (two memsets cost two).
  zero_words_kernel<<<blocks_for(stats_words + map_words, 256), 256, 0,
                      reinterpret_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<unsigned long long*>(t.stats), stats_words,
      reinterpret_cast<unsigned long long*>(t.map), map_words);
  FP8WB_GPU_CHECK(cudaGetLastError());
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
  if (x.rows * x.cols == 0) {
    if (t.stats && t.fresh) zero_stats_cuda(t, stream);
    return;
  }
  if (!x.f32 && !x.bf16) throw std::invalid_argument("quantize_cuda: null input");
  const Geometry G = geometry(L, t);
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  const bool hw = (recipe.format == Format::E4M3FN || recipe.format == Format::E5M2) &&
                  recipe.overflow == Overflow::Saturate;
  const float *sc = d_scale, *si = d_scale_inv;
  const Overflow ov = recipe.overflow;
  const bool by_value = hw && t.stats && tile_keys_ok(x, G, codes, codes_t, t.histogram);
  // launch_tile_keys() starts fresh statistics itself.
  if (t.stats && t.fresh && !by_value) zero_stats_cuda(t, stream);
  if (by_value) {
    launch_tile_keys(recipe.format, x, G, sc, si, codes, codes_t, t, st);
  } else if (hw && t.stats && tile_stats_ok(x, G, codes, codes_t)) {
    launch_tile_stats(recipe.format, x, G, sc, si, codes, codes_t, t, st);
  } else if (tile_path_ok(x, L, t, codes, codes_t)) {
    launch_tile_transposed(recipe.format, hw, x, G, sc, ov, codes, codes_t, t.amax_bits, st);
  } else if (flat_path_ok(x, L, t, codes, codes_t)) {
    launch_flat(recipe.format, hw, x, sc, ov, codes, t.amax_bits, st);
  } else if (fast_path_ok(x, L, t, codes, codes_t)) {
    launch_row_walk(recipe.format, hw, x, G, sc, si, ov, codes, codes_t, t, st);
  } else {
    launch_generic(recipe.format, x, G, sc, si, ov, codes, codes_t, t, st);
  }
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
                         float* d_scale_inv, float* d_amax_h, fp8wb_stream_t stream,
                         const DelayedUpdateExtras& after) {
  validate_delayed_config(config);
  if (head < 0 || head >= window || window != config.window)
    throw std::invalid_argument("delayed_update_cuda: head outside the window");
  delayed_update_kernel<<<1, 1024, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
      d_amax_bits, d_history, window, head, static_cast<float>(format_info(format).max_finite),
      config.margin, config.algo == AmaxAlgo::MostRecent, d_scale, d_scale_inv, d_amax_h, after);
  FP8WB_GPU_CHECK(cudaGetLastError());
}

}  // namespace fp8wb
