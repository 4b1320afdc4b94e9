// Host in, host out: current scaling on the GPU end to end for tests, tools and
// benchmarks (quantize_current_cuda), and many recipes' statistics over one upload for
// the checkpoint analysis (quantization_stats_cuda), built on quantize_cuda.cu's API.
#include <algorithm>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8wb/kernels/quantize_cuda.h"
#include "gpu_runtime.h"

namespace fp8wb {
namespace {

// The host tensor: one data pointer (fp32 or bf16) when it has elements, a shape whose
// size fits. Checked before anything touches the GPU.
void validate_host_tensor(const TensorRef& hx) {
  if (hx.rows < 0 || hx.cols < 0) {
    throw std::invalid_argument("tensor shape " + std::to_string(hx.rows) + "x" +
                                std::to_string(hx.cols) + " is negative");
  }
  if (hx.cols > 0 && hx.rows > std::numeric_limits<int64_t>::max() / hx.cols) {
    throw std::invalid_argument("tensor shape " + std::to_string(hx.rows) + "x" +
                                std::to_string(hx.cols) + " has too many elements");
  }
  if (hx.f32 && hx.bf16) {
    throw std::invalid_argument("the tensor has both fp32 and bf16 data: give one");
  }
  if (hx.numel() > 0 && !hx.f32 && !hx.bf16) {
    throw std::invalid_argument("the " + std::to_string(hx.rows) + "x" + std::to_string(hx.cols) +
                                " tensor has no data");
  }
}

}  // namespace

GpuQuantization quantize_current_cuda(const TensorRef& hx, const QuantRecipe& recipe,
                                      bool transposed, const StatsOptions& so) {
  validate_host_tensor(hx);
  const GroupLayout L = make_layout(recipe, hx.rows, hx.cols);
  require_gpu();
  const auto n = static_cast<size_t>(hx.rows * hx.cols);
  const auto groups = static_cast<size_t>(L.group_count());
  DeviceArray<float> xf(hx.f32 ? n : 0);
  DeviceArray<uint16_t> xb(hx.bf16 ? n : 0);
  if (hx.f32 && n) FP8WB_GPU_CHECK(cudaMemcpy(xf.p, hx.f32, n * 4, cudaMemcpyHostToDevice));
  if (hx.bf16 && n) FP8WB_GPU_CHECK(cudaMemcpy(xb.p, hx.bf16, n * 2, cudaMemcpyHostToDevice));
  const DeviceTensor x{xf.p, xb.p, hx.rows, hx.cols};
  DeviceArray<float> amax(groups + 1), scale(groups + 1), scale_inv(groups + 1), global(1);
  DeviceArray<uint8_t> scale_codes(groups + 1), codes(n + 16), codes_t(transposed ? n + 16 : 0);
  DeviceArray<StatsBuffer> stats(1);
  GpuQuantization out;
  const MapGrid grid = make_map_grid(L, so.map_max_cells);
  DeviceArray<double> map(so.error_map ? static_cast<size_t>(2 * grid.cell_count()) + 1 : 0);
  group_amax_cuda(x, L, amax.p, amax.p + groups, nullptr);
  compute_scales_cuda(recipe, L, amax.p, amax.p + groups, scale.p, scale_inv.p, scale_codes.p,
                      global.p, nullptr);
  DeviceStatsTargets targets{so.enabled ? stats.p : nullptr, so.error_map ? map.p : nullptr, grid,
                             so.histogram};
  targets.fresh = true;
  quantize_cuda(x, recipe, L, scale.p, scale_inv.p, codes.p, transposed ? codes_t.p : nullptr,
                targets, nullptr);
  DeviceArray<float> back(n);
  dequantize_cuda(codes.p, recipe, L, scale_inv.p, back.p, nullptr);
  FP8WB_GPU_CHECK(cudaDeviceSynchronize());
  out.dequantized.resize(n);
  if (n) FP8WB_GPU_CHECK(cudaMemcpy(out.dequantized.data(), back.p, n * 4, cudaMemcpyDeviceToHost));
  out.scales.layout = L;
  out.scales.scale.resize(groups);
  out.scales.scale_inv.resize(groups);
  FP8WB_GPU_CHECK(cudaMemcpy(out.scales.scale.data(), scale.p, groups * 4, cudaMemcpyDeviceToHost));
  FP8WB_GPU_CHECK(
      cudaMemcpy(out.scales.scale_inv.data(), scale_inv.p, groups * 4, cudaMemcpyDeviceToHost));
  if (recipe.kind == ScalingKind::MX || recipe.kind == ScalingKind::NVFP4) {
    out.scales.scale_codes.resize(groups);
    FP8WB_GPU_CHECK(
        cudaMemcpy(out.scales.scale_codes.data(), scale_codes.p, groups, cudaMemcpyDeviceToHost));
  }
  if (recipe.kind == ScalingKind::NVFP4) {
    FP8WB_GPU_CHECK(cudaMemcpy(&out.scales.global_scale, global.p, 4, cudaMemcpyDeviceToHost));
  }
  out.codes.resize(n);
  if (n) FP8WB_GPU_CHECK(cudaMemcpy(out.codes.data(), codes.p, n, cudaMemcpyDeviceToHost));
  if (transposed) {
    out.codes_t.resize(n);
    if (n) FP8WB_GPU_CHECK(cudaMemcpy(out.codes_t.data(), codes_t.p, n, cudaMemcpyDeviceToHost));
  }
  if (so.enabled)
    FP8WB_GPU_CHECK(
        cudaMemcpy(&out.stats.raw, stats.p, sizeof(StatsBuffer), cudaMemcpyDeviceToHost));
  out.stats.map_grid = grid;
  if (so.error_map && grid.cell_count() > 0) {
    std::vector<double> m(static_cast<size_t>(2 * grid.cell_count()));
    FP8WB_GPU_CHECK(cudaMemcpy(m.data(), map.p, m.size() * sizeof(double), cudaMemcpyDeviceToHost));
    out.stats.map_sq_err.assign(m.begin(), m.begin() + grid.cell_count());
    out.stats.map_sq_sum.assign(m.begin() + grid.cell_count(), m.end());
  }
  return out;
}

std::vector<TensorStats> quantization_stats_cuda(const TensorRef& hx,
                                                 const std::vector<QuantRecipe>& recipes,
                                                 const StatsOptions& so) {
  validate_host_tensor(hx);
  const auto n = static_cast<size_t>(hx.rows * hx.cols);
  std::vector<GroupLayout> layouts;
  std::vector<MapGrid> grids;
  std::vector<size_t> map_at;  // each recipe's offset in the map buffer (2 * cells doubles)
  size_t map_doubles = 0, max_groups = 0;
  for (const QuantRecipe& r : recipes) {
    validate_recipe(r);
    layouts.push_back(make_layout(r, hx.rows, hx.cols));
    grids.push_back(so.error_map ? make_map_grid(layouts.back(), so.map_max_cells) : MapGrid{});
    map_at.push_back(map_doubles);
    map_doubles += static_cast<size_t>(2 * grids.back().cell_count());
    max_groups = std::max(max_groups, static_cast<size_t>(layouts.back().group_count()));
  }
  std::vector<TensorStats> out(recipes.size());
  if (recipes.empty()) return out;
  require_gpu();
  DeviceArray<float> xf(hx.f32 ? n : 0);
  DeviceArray<uint16_t> xb(hx.bf16 ? n : 0);
  if (hx.f32 && n) FP8WB_GPU_CHECK(cudaMemcpy(xf.p, hx.f32, n * 4, cudaMemcpyHostToDevice));
  if (hx.bf16 && n) FP8WB_GPU_CHECK(cudaMemcpy(xb.p, hx.bf16, n * 2, cudaMemcpyHostToDevice));
  const DeviceTensor x{xf.p, xb.p, hx.rows, hx.cols};
  DeviceArray<float> amax(max_groups + 1), scale(max_groups + 1), scale_inv(max_groups + 1);
  DeviceArray<float> tensor_amax(1), global(1);
  DeviceArray<uint8_t> scale_codes(max_groups + 1);
  DeviceArray<StatsBuffer> stats(recipes.size());
  DeviceArray<double> maps(map_doubles + 1);
  for (size_t i = 0; i < recipes.size(); ++i) {
    const GroupLayout& L = layouts[i];
    const bool same_groups = i > 0 && L.block_rows == layouts[i - 1].block_rows &&
                             L.block_cols == layouts[i - 1].block_cols;
    if (!same_groups) group_amax_cuda(x, L, amax.p, tensor_amax.p, nullptr);
    compute_scales_cuda(recipes[i], L, amax.p, tensor_amax.p, scale.p, scale_inv.p, scale_codes.p,
                        global.p, nullptr);
    DeviceStatsTargets targets{so.enabled ? stats.p + i : nullptr,
                               so.error_map ? maps.p + map_at[i] : nullptr, grids[i], so.histogram};
    targets.fresh = true;
    quantize_cuda(x, recipes[i], L, scale.p, scale_inv.p, nullptr, nullptr, targets, nullptr);
  }
  FP8WB_GPU_CHECK(cudaDeviceSynchronize());
  std::vector<StatsBuffer> raw(recipes.size());
  FP8WB_GPU_CHECK(
      cudaMemcpy(raw.data(), stats.p, raw.size() * sizeof(StatsBuffer), cudaMemcpyDeviceToHost));
  std::vector<double> m(map_doubles);
  if (map_doubles)
    FP8WB_GPU_CHECK(
        cudaMemcpy(m.data(), maps.p, map_doubles * sizeof(double), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < recipes.size(); ++i) {
    if (so.enabled) out[i].raw = raw[i];
    out[i].map_grid = grids[i];
    const auto cells = static_cast<size_t>(grids[i].cell_count());
    if (so.error_map && cells) {
      const auto at = m.begin() + static_cast<std::ptrdiff_t>(map_at[i]);
      out[i].map_sq_err.assign(at, at + static_cast<std::ptrdiff_t>(cells));
      out[i].map_sq_sum.assign(at + static_cast<std::ptrdiff_t>(cells),
                               at + static_cast<std::ptrdiff_t>(2 * cells));
    }
  }
  return out;
}

}  // namespace fp8wb
