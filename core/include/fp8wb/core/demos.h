// defines: OutlierDemo*, GradientDemo*, run_outlier_demo(), run_gradient_demo(): the
// classroom demos of numerics.md as library functions for the CLI and the GUI.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8wb/kernels/quantize_cpu.h"

namespace fp8wb {

// Per-tensor vs 1x128 block scaling on activations with outlier channels.
struct OutlierDemoConfig {
  int64_t rows = 256;
  int64_t cols = 1024;
  int outlier_channels = 4;                       // columns 0..n-1, inside the first 128-block
  std::vector<double> factors = {1e2, 1e4, 3e4};  // outlier channels are scaled by these
  Format format = Format::E4M3FN;
  uint32_t seed = 0;
};

struct OutlierDemoRow {
  double factor = 0;
  // Relative error sqrt(sum err^2 / sum x^2) on the channels outside the first block, in %.
  double tensorwise_error_pct = 0;
  double block_error_pct = 0;
  double tensorwise_underflow_pct = 0;  // of the whole tensor's nonzero elements
  double block_underflow_pct = 0;
  TensorStats tensorwise;  // full statistics (histogram, error map) of each recipe
  TensorStats block;
};

struct OutlierDemoResult {
  OutlierDemoConfig config;
  std::vector<OutlierDemoRow> rows;
};

OutlierDemoResult run_outlier_demo(const OutlierDemoConfig& config);

// Gradient-like values (log-uniform magnitudes between lo and hi, random signs) times a
// gradient scale, cast to E4M3 and E5M2 with and without per-tensor scaling.
struct GradientDemoConfig {
  int64_t n = 1 << 20;
  double lo = 1e-8;
  double hi = 1e-1;
  double gradient_scale = 1.0;  // a loss scale: multiplies every value
  uint32_t seed = 0;
  std::vector<Format> formats = {Format::E4M3FN, Format::E5M2};
};

struct GradientDemoCase {
  Format format = Format::E4M3FN;
  bool scaled = false;  // per-tensor current scaling; else a plain cast (scale 1)
  float scale = 1;
  TensorStats stats;
};

struct GradientDemoResult {
  GradientDemoConfig config;
  std::vector<GradientDemoCase> cases;  // per format: unscaled, then scaled
};

GradientDemoResult run_gradient_demo(const GradientDemoConfig& config);

}  // namespace fp8wb
