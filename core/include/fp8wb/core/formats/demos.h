// defines: OutlierDemo*, GradientDemo*, run_outlier_demo(), run_gradient_demo(),
// gradient_clamp_note(), StorageFormat, round_to(), MasterWeights*, run_master_weights_demo(),
// DynamicLossScaler, LossScaling*, run_loss_scaling_demo(): the classroom demos of numerics.md as
// library functions for the CLI and the GUI.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fp8wb/kernels/name_table.h"
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

// What a case's clamped values do to it, in a sentence for the demo's readers: the share
// of values beyond the format's largest value (clamped to it) and, where the SQNR is near
// 0 dB, that the clamping is why. Empty when no value was clamped.
std::string gradient_clamp_note(const GradientDemoCase& c);

// The formats a value is stored in by the mixed-precision demos: fp32, the 16-bit floats
// and the two FP8 formats.
enum class StorageFormat : uint8_t { FP32, BF16, FP16, E4M3, E5M2 };

struct StorageFormatEntry {
  StorageFormat value;
  std::string_view name;  // as users read it: "fp32", "bf16", "fp16", "E4M3", "E5M2"
  int mantissa_bits;
  int min_normal_exp;  // the smallest normal value is 2^min_normal_exp
};
inline constexpr StorageFormatEntry kStorageFormats[] = {
    {StorageFormat::FP32, "fp32", 23, -126}, {StorageFormat::BF16, "bf16", 7, -126},
    {StorageFormat::FP16, "fp16", 10, -14},  {StorageFormat::E4M3, "E4M3", 3, -6},
    {StorageFormat::E5M2, "E5M2", 2, -14},
};
static_assert(names_cover_enum(kStorageFormats, StorageFormat::E5M2));

inline std::string_view storage_format_name(StorageFormat f) {
  return table_name(kStorageFormats, f);
}

// An fp32 value stored in `f`: bf16 and fp16 round as a cast does (to nearest even,
// overflow to +-Inf), the FP8 formats through the workbench's codec (E4M3FN saturates,
// having no Inf; E5M2 overflows to +-Inf). Stochastic rounding draws on `rnd`.
float round_to(StorageFormat f, float x, Rounding rounding = Rounding::NearestEven,
               uint32_t rnd = 0);

// The distance from |x| (a value of the format) to the next larger value of the format.
double spacing_above(StorageFormat f, double x);

// Master weights: a weight updated `steps` times by `update`, each add computed in fp32
// and its result stored in the weight's format (as a bf16 or fp16 tensor's add does).
// An update below half the format's spacing near the weight is lost.
struct MasterWeightsConfig {
  double initial = 1.0;
  double update = 1e-3;
  int steps = 1000;
  int seeds = 32;  // stochastic rounding: runs with seeds seed .. seed + seeds - 1
  uint32_t seed = 0;
};

struct MasterWeightsTrack {
  StorageFormat format = StorageFormat::FP32;
  Rounding rounding = Rounding::NearestEven;
  // The weight after 0 .. steps updates (stochastic rounding: the mean over seeds, with
  // the lowest and highest run beside it).
  std::vector<double> mean, low, high;
  double final_mean = 0;
  double final_std = 0;         // over seeds (0 for nearest-even rounding)
  double spacing_at_start = 0;  // the format's spacing just above the initial weight
};

struct MasterWeightsResult {
  MasterWeightsConfig config;
  // fp32 (master weights), bf16, fp16, E4M3, E5M2 to nearest even, then bf16 with
  // stochastic rounding.
  std::vector<MasterWeightsTrack> tracks;
};

MasterWeightsResult run_master_weights_demo(const MasterWeightsConfig& config);

// Dynamic loss scaling as PyTorch's GradScaler does it: the loss is multiplied by the
// scale before the backward pass; a step whose gradients hold an Inf or NaN is skipped
// and the scale multiplied by `backoff`; after `growth_interval` good steps in a row the
// scale is multiplied by `growth`.
class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(double init_scale = 65536.0, int growth_interval = 2000,
                             double growth = 2.0, double backoff = 0.5);
  double scale() const { return scale_; }
  int goodSteps() const { return good_steps_; }
  // The step's gradients were checked: returns whether the optimizer step is taken, and
  // moves the scale for the next step.
  bool update(bool found_nonfinite);

 private:
  double scale_;
  int growth_interval_;
  double growth_, backoff_;
  int good_steps_ = 0;
};

// A tiny regression MLP (inputs -> tanh hidden -> 1) trained in fp32 by full-batch
// gradient descent to fit a teacher of the same shape; every step the gradients pass
// through a cast to `format` (times the loss scale, then divided by it in fp32) before
// the update, as they would arrive from a low-precision backward pass.
struct LossScalingConfig {
  std::vector<StorageFormat> formats = {StorageFormat::FP16, StorageFormat::E5M2};
  double init_scale = 65536.0;  // 2^16, GradScaler's default
  int growth_interval = 50;     // GradScaler's default is 2000; 50 shows the rhythm
  int steps = 1000;
  int inputs = 8;
  int hidden = 16;
  int examples = 64;
  double learning_rate = 0.5;
  double target_scale = 1e-2;  // the teacher's output weights' scale: small targets
  uint32_t seed = 0;
};

struct LossScalingStep {
  double scale = 1;  // the loss scale this step used (1 without scaling)
  bool skipped = false;
  double underflow_pct = 0;  // nonzero fp32 gradient values that became zero, in %
  double loss = 0;           // before the step
};

struct LossScalingRun {
  StorageFormat format = StorageFormat::FP16;
  bool scaled = false;
  std::vector<LossScalingStep> steps;
  double mean_underflow_pct = 0;  // over all steps
  int skipped_steps = 0;
  double final_loss = 0;
};

struct LossScalingResult {
  LossScalingConfig config;
  std::vector<LossScalingRun> runs;  // per format: without scaling, then with
};

LossScalingResult run_loss_scaling_demo(const LossScalingConfig& config);

}  // namespace fp8wb
