// defines: DeviceTensor, DeviceStatsTargets, group_amax_cuda(), compute_scales_cuda(),
// zero_stats_cuda(), quantize_cuda(),
// delayed_update_cuda(), quantize_current_cuda(), quantization_stats_cuda(): the GPU side of scaled
// quantization. Statistics land in one small device buffer per call (a StatsBuffer and
// the error map), so a caller copies them to the host once.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8wb/kernels/codec_cuda.h"
#include "fp8wb/kernels/delayed_scaling.h"
#include "fp8wb/kernels/quantize_cpu.h"

namespace fp8wb {

// Device pointers to a row-major rows x cols tensor (fp32 or bf16 bit patterns).
struct DeviceTensor {
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

struct DeviceStatsTargets {
  // device; zeroed by zero_stats_cuda() before the first call, unless `fresh`
  StatsBuffer* stats = nullptr;
  double* map = nullptr;  // device, 2 * grid.cell_count() doubles: sq_err then sq_sum
  MapGrid grid;           // make_map_grid(layout, max cells)
  bool histogram = true;
  // Device word for max |x| over finite x as fp32 bits (atomicMax: zero it first), filled
  // by a quantize pass that gathers no statistics (with statistics, stats->amax_bits holds
  // it): what delayed scaling records without a separate amax pass.
  uint32_t* amax_bits = nullptr;
  // The pass starts stats and map from zero itself, whatever they held: the caller does not
  // call zero_stats_cuda(). A pass that gathers one tensor's statistics alone saves a
  // launch this way (on CUDA the statistics-by-value kernel zeroes them in its first
  // microseconds); passes that add into one buffer leave it false.
  bool fresh = false;
};

// Per-group amax over finite values (d_group_amax: layout.group_count() floats) and the
// tensor amax (one float). Both are overwritten.
void group_amax_cuda(const DeviceTensor& x, const GroupLayout& layout, float* d_group_amax,
                     float* d_tensor_amax, fp8wb_stream_t stream = nullptr);

// The recipe's scales from device amaxes, on the device (no host round trip).
// d_scale_codes (group_count bytes) is written for MX and NVFP4 and may be null otherwise;
// d_global_scale (one float) is written for NVFP4 and may be null otherwise.
void compute_scales_cuda(const QuantRecipe& recipe, const GroupLayout& layout,
                         const float* d_group_amax, const float* d_tensor_amax, float* d_scale,
                         float* d_scale_inv, uint8_t* d_scale_codes, float* d_global_scale,
                         fp8wb_stream_t stream = nullptr);

void zero_stats_cuda(const DeviceStatsTargets& targets, fp8wb_stream_t stream = nullptr);

// codes (rows x cols) and codes_t (cols x rows, tensorwise and 128x128 only) may be null;
// statistics are skipped when targets.stats is null.
void quantize_cuda(const DeviceTensor& x, const QuantRecipe& recipe, const GroupLayout& layout,
                   const float* d_scale, const float* d_scale_inv, uint8_t* codes, uint8_t* codes_t,
                   const DeviceStatsTargets& targets, fp8wb_stream_t stream = nullptr);

// DelayedScaler::update on the device, bit for bit: the amax at d_amax_bits (fp32 bits)
// goes into the ring d_history[window] at `head` (the caller steps head back by one, mod
// window, before each update, as the host scaler does), and d_scale / d_scale_inv become
// the next step's ((fmax / amax_h) / 2^margin; unchanged when amax_h <= 0 or non-finite).
// d_amax_h (may be null) receives amax_h.
// `after` (each pointer may be null) spares a step the small copies around an update:
// the scale_inv the step's codes were made with (d_scale_inv as it was) is written to
// used_scale_inv and used_scale_inv_2 before it moves on, and amax_reset (the word the
// next step's amax gathers in) is zeroed once d_amax_bits has been read.
struct DelayedUpdateExtras {
  float* used_scale_inv = nullptr;
  float* used_scale_inv_2 = nullptr;
  uint32_t* amax_reset = nullptr;
};
void delayed_update_cuda(const uint32_t* d_amax_bits, float* d_history, int window, int head,
                         Format format, const DelayedScalingConfig& config, float* d_scale,
                         float* d_scale_inv, float* d_amax_h, fp8wb_stream_t stream = nullptr,
                         const DelayedUpdateExtras& after = {});

// out = decode(code) * scale_inv of the code's group, on the device.
void dequantize_cuda(const uint8_t* codes, const QuantRecipe& recipe, const GroupLayout& layout,
                     const float* d_scale_inv, float* out, fp8wb_stream_t stream = nullptr);

// Host in, host out: current scaling on the GPU end to end (amax, scales, quantize with
// statistics), for tests, tools and benchmarks.
struct GpuQuantization {
  ScaleSet scales;
  std::vector<uint8_t> codes;
  std::vector<uint8_t> codes_t;  // when asked for
  TensorStats stats;
  std::vector<float> dequantized;  // decode(code) * scale_inv, computed on the device
};
GpuQuantization quantize_current_cuda(const TensorRef& host_x, const QuantRecipe& recipe,
                                      bool transposed, const StatsOptions& stats = {});

// The statistics of current scaling with each recipe in turn, for analysis: the host
// tensor goes up once, recipes with the same groups share one amax pass, no codes are
// written, and every recipe's statistics (and error maps, when asked for) come back in
// one copy. One TensorStats per recipe, in order; the same figures as quantize_current()
// on the CPU (sums may differ in the last bits: the order of addition differs).
std::vector<TensorStats> quantization_stats_cuda(const TensorRef& host_x,
                                                 const std::vector<QuantRecipe>& recipes,
                                                 const StatsOptions& stats = {});

// Row-major codes on the device with one scale_inv a row (rowwise scaling), standing for
// their dequantized values decode(code) * scale_inv.
struct DeviceCodes {
  const uint8_t* codes = nullptr;
  const float* row_scale_inv = nullptr;
  Format format = Format::E4M3FN;
  int64_t rows = 0;
  int64_t cols = 0;
};

// Rowwise current scaling of x's transpose without forming it, which a GEMM needs of an
// operand it reduces along the other axis: per-column amax of finite values
// (d_col_amax, cols floats), the recipe's rowwise scales per column (d_scale,
// d_scale_inv), and the codes of x^T (codes_t: cols x rows, row-major). Bit for bit what
// quantize_current on the transposed tensor gives. The codes form quantizes dequantized
// codes again. Returns false, doing nothing, where it cannot: a recipe other than
// rowwise, rows not a multiple of 16, cols not of 4, misaligned pointers.
bool rowwise_transposed_cuda(const DeviceTensor& x, const QuantRecipe& recipe, float* d_col_amax,
                             float* d_scale, float* d_scale_inv, uint8_t* codes_t,
                             fp8wb_stream_t stream = nullptr);
bool rowwise_transposed_cuda(const DeviceCodes& x, const QuantRecipe& recipe, float* d_col_amax,
                             float* d_scale, float* d_scale_inv, uint8_t* codes_t,
                             fp8wb_stream_t stream = nullptr);

// Every fp32 bit pattern quantized (scale 1) by the GPU kernels' element step, which uses
// the hardware conversion on sm_89+ for E4M3FN and E5M2 with saturation, and by the
// software codec: the count of patterns where code, saturation, underflow or subnormal
// flag, or dequantized value (decode * scale_inv) differ, and the first such pattern.
struct ConversionCheck {
  uint64_t mismatches = 0;
  uint32_t first_bits = 0xFFFFFFFFu;  // the lowest mismatching pattern, if any
  bool hardware = false;              // the GPU converts with its FP8 instructions
};
ConversionCheck check_conversion_cuda(Format format, float scale_inv = 1.0f);

}  // namespace fp8wb
