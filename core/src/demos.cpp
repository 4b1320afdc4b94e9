#include "fp8wb/core/demos.h"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace fp8wb {
namespace {

double error_pct_outside_first_block(const std::vector<float>& x, const std::vector<float>& back,
                                     int64_t rows, int64_t cols) {
  double err = 0, sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 128; c < cols; ++c) {
      const auto i = static_cast<size_t>(r * cols + c);
      const double d = static_cast<double>(x[i]) - back[i];
      err += d * d;
      sum += static_cast<double>(x[i]) * x[i];
    }
  }
  return sum == 0 ? 0.0 : 100.0 * std::sqrt(err / sum);
}

}  // namespace

OutlierDemoResult run_outlier_demo(const OutlierDemoConfig& cfg) {
  if (cfg.rows < 1 || cfg.cols < 256 || cfg.cols % 128 != 0) {
    throw std::invalid_argument(
        "the outlier demo needs at least 1 row and a multiple of 128 columns (>= 256), not " +
        std::to_string(cfg.rows) + "x" + std::to_string(cfg.cols));
  }
  if (cfg.outlier_channels < 0 || cfg.outlier_channels > 128) {
    throw std::invalid_argument("outlier channels must lie in the first 128-block (0..128), not " +
                                std::to_string(cfg.outlier_channels));
  }
  OutlierDemoResult res;
  res.config = cfg;
  std::mt19937 rng(cfg.seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> base(static_cast<size_t>(cfg.rows * cfg.cols));
  for (float& v : base) v = nd(rng);
  std::vector<uint8_t> codes(base.size());
  std::vector<float> back(base.size());
  for (double k : cfg.factors) {
    if (!(k > 0) || !std::isfinite(k))
      throw std::invalid_argument("outlier factors must be positive and finite");
    std::vector<float> x = base;
    for (int64_t r = 0; r < cfg.rows; ++r) {
      for (int c = 0; c < cfg.outlier_channels; ++c)
        x[static_cast<size_t>(r * cfg.cols + c)] *= static_cast<float>(k);
    }
    OutlierDemoRow row;
    row.factor = k;
    for (ScalingKind kind : {ScalingKind::Tensorwise, ScalingKind::Block1x128}) {
      QuantRecipe recipe;
      recipe.kind = kind;
      recipe.format = cfg.format;
      const auto q =
          quantize_current(TensorRef::of(x.data(), cfg.rows, cfg.cols), recipe, {codes.data()});
      dequantize(codes.data(), recipe, q.scales, back.data());
      const double err = error_pct_outside_first_block(x, back, cfg.rows, cfg.cols);
      if (kind == ScalingKind::Tensorwise) {
        row.tensorwise_error_pct = err;
        row.tensorwise_underflow_pct = q.result.stats.underflow_pct();
        row.tensorwise = q.result.stats;
      } else {
        row.block_error_pct = err;
        row.block_underflow_pct = q.result.stats.underflow_pct();
        row.block = q.result.stats;
      }
    }
    res.rows.push_back(std::move(row));
  }
  return res;
}

GradientDemoResult run_gradient_demo(const GradientDemoConfig& cfg) {
  if (cfg.n < 1 || cfg.n > (int64_t{1} << 28)) {
    throw std::invalid_argument("the gradient demo takes 1 to 268435456 values, not " +
                                std::to_string(cfg.n));
  }
  if (!(cfg.lo > 0) || !(cfg.hi > cfg.lo) || !std::isfinite(cfg.hi)) {
    throw std::invalid_argument("gradient magnitudes need 0 < lo < hi");
  }
  if (!(cfg.gradient_scale > 0) || !std::isfinite(cfg.gradient_scale)) {
    throw std::invalid_argument("the gradient scale must be positive and finite");
  }
  GradientDemoResult res;
  res.config = cfg;
  std::mt19937 rng(cfg.seed);
  std::uniform_real_distribution<double> u(std::log(cfg.lo), std::log(cfg.hi));
  std::bernoulli_distribution sign(0.5);
  std::vector<float> g(static_cast<size_t>(cfg.n));
  for (float& v : g)
    v = static_cast<float>((sign(rng) ? -1.0 : 1.0) * std::exp(u(rng)) * cfg.gradient_scale);
  for (Format f : cfg.formats) {
    QuantRecipe recipe;
    recipe.format = f;
    const GroupLayout layout = make_layout(recipe, 1, cfg.n);
    // Unscaled: a plain cast, as if gradients went to FP8 without any scaling.
    ScaleSet unit;
    unit.layout = layout;
    unit.scale = {1.0f};
    unit.scale_inv = {1.0f};
    GradientDemoCase plain{f, false, 1.0f,
                           quantize(TensorRef::of(g.data(), 1, cfg.n), recipe, unit, {}).stats};
    res.cases.push_back(std::move(plain));
    const auto cq = quantize_current(TensorRef::of(g.data(), 1, cfg.n), recipe);
    res.cases.push_back({f, true, cq.scales.scale[0], cq.result.stats});
  }
  return res;
}

}  // namespace fp8wb
