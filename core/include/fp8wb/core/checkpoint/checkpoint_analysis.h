// defines: RecipeResult, TensorAnalysis, AnalysisOptions, analyze_values(),
// analyze_checkpoint(): what FP8 quantization does to each tensor of a checkpoint, for
// every recipe x format, with a recommended recipe and the reason. Plain C++, no torch;
// the quantization runs on the GPU through the CUDA kernels when there is one, else on
// all CPU cores.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/kernels/quantize_cpu.h"  // kValueHist*
#include "fp8wb/kernels/recipe.h"
#include "fp8wb/kernels/tensor_stats.h"

namespace fp8wb {

struct RecipeResult {
  QuantRecipe recipe;
  std::string name;                                          // recipe_name()
  double sqnr_db = 0, underflow_pct = 0, saturated_pct = 0;  // of raw, for the recommendation
  // The quantization's counters: every figure of kTensorStatFigures (metrics.h) is of(raw),
  // as `fp8wb inspect --json` writes them.
  StatsBuffer raw{};
  MapGrid map_grid;
  // Per block (cell), when maps were asked for: sqrt(sq_err / sq_sum); NaN for a block
  // without finite nonzero values (all zero, NaN or Inf), which has no relative error.
  std::vector<float> map_rel_error;
};

struct TensorAnalysis {
  std::string name, dtype;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  bool floating = true;  // integer and bool tensors are described, not quantized
  // Over finite values: NaN and Inf are left out of every figure and counted apart.
  double min = 0, max = 0, mean = 0, std = 0, amax = 0;
  int64_t nan_count = 0, inf_count = 0;
  double min_nonzero = 0;         // smallest |x| > 0
  double dynamic_range_bits = 0;  // log2(amax) - log2(min_nonzero)
  // kValueHistBins (quantize_cpu.h): a bin for each floor(log2 |x|) from kValueHistMinExp
  // (-149) to kValueHistMaxExp (127), every finite fp32 value in its own bin; then zeros,
  // non-finite values.
  std::vector<uint64_t> log2_hist;
  std::vector<RecipeResult> recipes;
  std::string recommended;  // a recipe name; empty for non-float tensors, or see no_recipe
  std::string reason;
  // Why no recipe is recommended although the recipes ran: every recommendable recipe
  // zeroes every nonzero value ("no FP8 recipe represents this tensor: ..."); empty
  // otherwise. reason says the same.
  std::string no_recipe;
  // What a reader must know about where the values come from: a `<name>_scale_inv`
  // companion with NaN, Inf, zero or negative scales (which blocks, how many of each).
  std::vector<std::string> warnings;
  // Why a floating-point tensor has no recipe results (SQNR needs finite signal):
  // "empty tensor (0 elements)", "no finite values: N NaN, M Inf", "no finite nonzero
  // values: Z zeros, N NaN, M Inf" (zeros among NaN or Inf), "all zero"; or why a tensor's
  // values are unknown, "values unknown: ..." (a TensorValueError's message); or why an
  // integer or BOOL tensor has none ("an integer tensor (I32): FP8 holds floating-point
  // values, ..."); empty when the recipes ran.
  std::string not_quantized;
  // False where the values could not be read as the file defines them (not_quantized says
  // why): no figure above describes them, and none is shown.
  bool values_known = true;
  // Whether min, max, mean, std, amax and the dynamic range describe any value: the values
  // are known and some are finite (not so for an empty tensor, or one of NaN and Inf only).
  bool has_figures() const { return values_known && numel > nan_count + inf_count; }
  // The recommended recipe's figures; nullptr where none is recommended.
  const RecipeResult* recommended_result() const {
    for (const auto& r : recipes)
      if (!recommended.empty() && r.name == recommended) return &r;
    return nullptr;
  }
};

// The order of "worst SQNR first" (`fp8wb inspect`, the Checkpoint tab): a tensor's best
// SQNR over its recipes, ascending; the exact ones (+inf) after every finite one, and
// those without an SQNR (not quantized: integers, no finite signal, values unknown) last.
double worst_first_key(const TensorAnalysis& a);

// A recipe's typical block: the SQNR of the median of its error map's relative errors
// (-20 log10 of it; +inf where that cell is exact) over the cells with signal (not NaN).
// The cells are the recipe's blocks where they fit in 64 x 64 cells, else an even tiling.
// A tensor's SQNR is carried by its largest values: with outliers it can be far above or
// below what most blocks get. NaN with no block (no map, or none with signal).
struct BlockSqnr {
  double median_db = std::numeric_limits<double>::quiet_NaN();
  size_t blocks = 0;  // cells with signal
};
BlockSqnr median_block_sqnr(const RecipeResult& r);

enum class AnalysisDevice {
  Auto,  // the GPU when this build has CUDA kernels and a GPU is there, else the CPU
  Cpu,
  Gpu,  // an error (std::runtime_error) where there is no GPU
};

// Whether Auto would run on the GPU.
bool analysis_gpu_available();
// Whether this device choice runs on the GPU; throws std::runtime_error for Gpu without one.
bool analysis_uses_gpu(AnalysisDevice device);

struct AnalysisOptions {
  std::vector<Format> formats{Format::E4M3FN, Format::E5M2, Format::E4M3FNUZ, Format::E5M2FNUZ,
                              Format::E2M1FN};
  std::vector<ScalingKind> kinds{std::begin(kAllScalingKinds), std::end(kAllScalingKinds)};
  // The E4M3 format the recommendation is made in: E4M3FN, or E4M3FNUZ where AMD's fnuz
  // formats are the default (default_element_format() in default_formats.h).
  Format recommend_format = Format::E4M3FN;
  bool maps = true;
  int map_max_cells = 64;
  AnalysisDevice device = AnalysisDevice::Auto;
  int threads = 0;  // CPU threads (0: all cores)
  // Called after each tensor with (done, total); returning false cancels.
  std::function<bool(size_t done, size_t total)> progress;
};

// One tensor, from its values as fp32 (2-D view: the last dimension is K).
TensorAnalysis analyze_values(const std::string& name, const std::string& dtype,
                              const std::vector<int64_t>& shape, const std::vector<float>& values,
                              const AnalysisOptions& options = {});

struct ExportReport {
  std::vector<std::string> quantized;  // written as E4M3 codes + `<name>_scale_inv`
  std::vector<std::string> kept;       // written as they were
  // Quantized weights that held +-Inf: E4M3FN has no Inf, so each was written as the
  // largest finite code of its sign (448 x its block's scale_inv). NaN stays NaN.
  std::vector<std::string> with_inf;
  int64_t inf_values = 0;
  // Quantized weights whose 128x128 blocks turned kNamedZeroedPct % or more of their finite
  // nonzero values into 0 (an outlier among small values, values below FP8's range), with
  // that share, in the checkpoint's order.
  std::vector<std::pair<std::string, double>> zeroed;
};

// The share of a tensor's nonzero values turned into 0 from which it is named: by an export,
// and beside one tensorwise scale's SQNR in a recommendation's reason.
inline constexpr double kNamedZeroedPct = 1.0;

// The recommendation's rule: among the E4M3 recipes within 1 dB of the best SQNR and
// without saturation, those that turn the fewest values into 0, then the simplest. Shares
// within this many points of the fewest count as the fewest (1 value in 10,000): a
// Gaussian weight's smallest values, of which finer scales keep a handful more in a
// million, do not outweigh the simpler recipe; an outlier row's scale that zeroes 0.5% of
// the other rows does.
inline constexpr double kTiedZeroedPct = 0.01;

// A share of values turned into 0, in percent, as the reasons, `fp8wb inspect` and the
// Checkpoint tab write it: three decimals ("0.549"), or two significant digits below 0.001
// ("0.00048"), so that a few values turned into 0 never read "0.000"; exactly 0 is "0.000".
std::string underflow_pct_text(double pct);

// Which tensors export_fp8_checkpoint() writes in FP8, in words (help and messages).
inline constexpr const char* kFp8ExportRule =
    "2-D floating-point tensors (F32, F64, F16, BF16) whose names end in \"weight\", both "
    "dimensions 16 or more";

// Writes the checkpoint as safetensors with its 2-D floating-point weights (names ending
// in "weight", both dimensions >= 16) quantized to E4M3 in 128x128 blocks, DeepSeek-V3's
// layout: `<name>` F8_E4M3 and `<name>_scale_inv` F32 [ceil(rows/128), ceil(cols/128)];
// the layout is in the metadata, beside the source's own metadata ("format": "pt" where
// the source gives none: loaders such as transformers' refuse metadata without a format).
// Other tensors are copied unchanged. Reading the file
// back gives exactly the FP8 values (decode(code) * scale_inv). Throws CheckpointError.
ExportReport export_fp8_checkpoint(const Checkpoint& ckpt, const std::string& path);

// Every tensor of a checkpoint (companion *_scale_inv tensors of FP8 weights are folded
// into their weight, not listed). fp32 and bf16 tensors are read in place, the others
// converted to fp32 first. On the GPU the recipes of a tensor run while the CPU computes
// its summary; a GPU error (out of memory...) moves that tensor to the CPU. Throws
// CheckpointError; a cancel returns what is done.
std::vector<TensorAnalysis> analyze_checkpoint(const Checkpoint& ckpt,
                                               const AnalysisOptions& options = {});
// The same, each tensor's analysis handed to `each` as it is done and not kept: what a
// checkpoint of a million tiny tensors takes in memory is then up to the caller.
void analyze_checkpoint(const Checkpoint& ckpt, const AnalysisOptions& options,
                        const std::function<void(TensorAnalysis&&)>& each);

}  // namespace fp8wb
