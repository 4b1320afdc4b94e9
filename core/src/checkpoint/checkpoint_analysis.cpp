#include "fp8wb/core/checkpoint_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "fp8wb/core/median.h"
#include "fp8wb/kernels/codec_cuda.h"
#include "fp8wb/kernels/format.h"
#include "fp8wb/kernels/quantize_cpu.h"
#if defined(FP8WB_WITH_CUDA_KERNELS)
#include "fp8wb/kernels/quantize_cuda.h"
#endif

namespace fp8wb {
namespace {

// Simplest first: what a user should prefer when the figures are close.
int simplicity(ScalingKind k) {
  switch (k) {
    case ScalingKind::Tensorwise: return 0;
    case ScalingKind::Rowwise: return 1;
    case ScalingKind::Block128x128: return 2;
    case ScalingKind::Block1x128: return 3;
    case ScalingKind::MX: return 4;
    case ScalingKind::NVFP4: return 5;
  }
  return 9;
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(digits);
  s << v;
  return s.str();
}

// Four significant digits: 4.179, 3.735e-39 (an amax is no fixed-point figure).
std::string significant(double v) {
  std::ostringstream s;
  s.precision(4);
  s << v;
  return s.str();
}

// Scale formulas take an amax below 1e-12 as 1e-12 (docs/numerics.md).
constexpr double kAmaxFloor = 1e-12;

void recommend(TensorAnalysis& a, Format e4m3) {
  // Among the E4M3 recipes (the format of weights and activations: E4M3FN, or E4M3FNUZ on
  // AMD GPUs), the simplest one within 1 dB of the best SQNR, without saturation.
  // A recipe that turns every finite nonzero value into 0, or whose SQNR is NaN,
  // represents nothing of the tensor: it is never recommended.
  auto zeroes_all = [](const RecipeResult& r) {
    return r.underflow_pct >= 100.0 || std::isnan(r.sqnr_db);
  };
  const RecipeResult* best = nullptr;
  bool any_e4m3 = false;
  for (const auto& r : a.recipes) {
    if (r.recipe.format != e4m3) continue;
    any_e4m3 = true;
    if (zeroes_all(r)) continue;
    if (!best || r.sqnr_db > best->sqnr_db) best = &r;
  }
  if (!best) {
    if (!any_e4m3) return;
    const bool none_at_all = std::all_of(a.recipes.begin(), a.recipes.end(), zeroes_all);
    a.no_recipe = none_at_all ? "no FP8 recipe represents this tensor: every recipe, in every "
                                "format, turns its nonzero values into 0 (or gives NaN)"
                              : "no E4M3 recipe represents this tensor: every one turns its "
                                "nonzero values into 0 (or gives NaN)";
    std::ostringstream why;
    why << " (amax " << significant(a.amax);
    const double fmax = format_info(e4m3).max_finite;
    if (a.amax > 0 && a.amax < kAmaxFloor) {
      why << ": below 1e-12, which the scale formulas take as the least amax, so no scale is "
             "above "
          << significant(fmax / kAmaxFloor)
          << " (MX scales stop at 2^127) and every scaled value stays below FP8's smallest step";
    }
    why << ")";
    a.no_recipe += why.str();
    a.reason = a.no_recipe;
    return;
  }
  // Within 1 dB of the best, the recipes that turn the fewest of the values into 0 (an
  // SQNR carried by a few large values hides the small ones lost; shares within
  // kTiedZeroedPct of the fewest count as the fewest), then the simplest of them.
  auto candidate = [&](const RecipeResult& r) {
    return &r == best || (r.recipe.format == e4m3 && r.saturated_pct <= 0 && !zeroes_all(r) &&
                          r.sqnr_db >= best->sqnr_db - 1.0);
  };
  double least_zeroed = best->underflow_pct;
  for (const auto& r : a.recipes) {
    if (candidate(r)) least_zeroed = std::min(least_zeroed, r.underflow_pct);
  }
  auto few_zeroed = [&](const RecipeResult& r) {
    return r.underflow_pct <= least_zeroed + kTiedZeroedPct;
  };
  const RecipeResult* pick = nullptr;
  for (const auto& r : a.recipes) {
    if (!candidate(r) || !few_zeroed(r)) continue;
    if (!pick || simplicity(r.recipe.kind) < simplicity(pick->recipe.kind) ||
        (simplicity(r.recipe.kind) == simplicity(pick->recipe.kind) && r.sqnr_db > pick->sqnr_db))
      pick = &r;
  }
  a.recommended = pick->name;
  if (pick == best) {
    a.reason = "best SQNR of the " + std::string(format_info(e4m3).name) +
               " recipes: " + fixed(pick->sqnr_db, 1) + " dB, " +
               underflow_pct_text(pick->underflow_pct) + "% underflow";
  } else {
    const bool fewer = !few_zeroed(*best);
    const bool simpler = simplicity(pick->recipe.kind) < simplicity(best->recipe.kind);
    // The best of the recipes the pick is made among (the table's "highest SQNR" is of any
    // format): named as such, so that the two are not read as one figure.
    a.reason =
        "within 1 dB of the best " + std::string(format_info(e4m3).name) + " recipe (" +
        best->name + ", " + fixed(best->sqnr_db, 1) + " dB" +
        (fewer ? ", " + underflow_pct_text(best->underflow_pct) + "% underflow" : std::string()) +
        ")" + (fewer ? " and turns fewer values into 0" : "") +
        (simpler ? std::string(fewer ? "," : "") + " and simpler" : "") + ": " +
        fixed(pick->sqnr_db, 1) + " dB, " + underflow_pct_text(pick->underflow_pct) + "% underflow";
  }
  // Say why finer scaling wins when it does: the spread inside the tensor (unless the best,
  // named above, is tensorwise).
  if (pick->recipe.kind != ScalingKind::Tensorwise &&
      best->recipe.kind != ScalingKind::Tensorwise) {
    for (const auto& r : a.recipes) {
      if (r.recipe.format == e4m3 && r.recipe.kind == ScalingKind::Tensorwise) {
        // An SQNR carried by a few large values hides the small ones lost: said beside it,
        // where they are many (kNamedZeroedPct) or what it lost the pick by.
        const std::string lost = r.underflow_pct >= kNamedZeroedPct || !few_zeroed(r)
                                     ? " but turns " + underflow_pct_text(r.underflow_pct) +
                                           "% of the nonzero values into 0"
                                     : "";
        a.reason += "; one tensorwise scale gives " + fixed(r.sqnr_db, 1) + " dB" + lost +
                    " (amax " + significant(a.amax) + " against a dynamic range of " +
                    fixed(a.dynamic_range_bits, 1) + " bits" +
                    (a.amax < kAmaxFloor ? "; an amax below 1e-12 counts as 1e-12 in its scale, "
                                           "which leaves the values below FP8's smallest step"
                                         : "") +
                    ")";
      }
    }
  }
  // A pick that still turns values into 0 (a dynamic range wider than E4M3's): said, with
  // the recipe of any format that keeps the most of them (nearly all, at the best SQNR,
  // where one does), so that the high SQNR of the large values is not read as "all kept".
  if (pick->underflow_pct >= kNamedZeroedPct) {
    const RecipeResult* keeps = nullptr;
    auto nearly_all = [](const RecipeResult& r) { return r.underflow_pct < kNamedZeroedPct; };
    for (const auto& r : a.recipes) {
      if (r.saturated_pct > 0 || zeroes_all(r) ||
          r.underflow_pct > pick->underflow_pct - kNamedZeroedPct)
        continue;
      const bool better =
          !keeps || (nearly_all(r) && !nearly_all(*keeps)) ||
          (nearly_all(r) && nearly_all(*keeps) ? r.sqnr_db > keeps->sqnr_db
                                               : r.underflow_pct < keeps->underflow_pct);
      if (better) keeps = &r;
    }
    a.reason += "; " + pick->name + " still turns " + fixed(pick->underflow_pct, 3) +
                "% of the nonzero values into 0";
    a.reason += keeps ? "; " + keeps->name + " turns " + fixed(keeps->underflow_pct, 3) +
                            "% into 0, at " + fixed(keeps->sqnr_db, 1) + " dB"
                      : "; no recipe without saturation turns fewer into 0";
  }
}

}  // namespace

std::string underflow_pct_text(double pct) {
  if (pct > 0 && pct < 0.001) {
    std::ostringstream s;
    s.precision(2);
    s << pct;
    return s.str();
  }
  return fixed(pct, 3);
}

double worst_first_key(const TensorAnalysis& a) {
  double best = -INFINITY;
  bool any = false;
  for (const auto& r : a.recipes) {
    if (std::isnan(r.sqnr_db)) continue;
    any = true;
    best = std::max(best, r.sqnr_db);
  }
  if (!any) return INFINITY;
  return best == INFINITY ? std::numeric_limits<double>::max() : best;
}

BlockSqnr median_block_sqnr(const RecipeResult& r) {
  std::vector<double> rel;
  rel.reserve(r.map_rel_error.size());
  for (float e : r.map_rel_error)
    if (!std::isnan(e)) rel.push_back(e);
  BlockSqnr b;
  b.blocks = rel.size();
  if (rel.empty()) return b;
  const double m = median(std::move(rel));
  b.median_db = m > 0 ? -20.0 * std::log10(m) : INFINITY;
  return b;
}

bool analysis_gpu_available() {
#if defined(FP8WB_WITH_CUDA_KERNELS)
  return gpu_device_count() > 0;
#else
  return false;
#endif
}

bool analysis_uses_gpu(AnalysisDevice device) {
  if (device == AnalysisDevice::Cpu) return false;
  if (analysis_gpu_available()) return true;
  if (device == AnalysisDevice::Auto) return false;
#if defined(FP8WB_WITH_CUDA_KERNELS)
  throw std::runtime_error("analysis on the GPU: no usable CUDA GPU found");
#else
  throw std::runtime_error("analysis on the GPU: this build has no CUDA kernels");
#endif
}

namespace {

// The recipe x format pairs to run on a rows x cols tensor, kinds outer (so that the
// formats of one kind share its amax pass).
std::vector<QuantRecipe> recipes_for(const AnalysisOptions& options, int64_t rows, int64_t cols) {
  std::vector<QuantRecipe> out;
  for (ScalingKind k : options.kinds) {
    for (Format f : options.formats) {
      QuantRecipe r;
      r.kind = k;
      r.format = f;
      r.partial_blocks = true;  // tensors whose shapes do not divide into blocks
      try {
        validate_recipe(r);
        make_layout(r, rows, cols);
      } catch (const std::invalid_argument&) {
        continue;  // a pairing the recipe cannot take (NVFP4 with an FP8 element, ...)
      }
      out.push_back(r);
    }
  }
  return out;
}

std::vector<TensorStats> stats_on_cpu(const TensorRef& x, const std::vector<QuantRecipe>& recipes,
                                      const StatsOptions& so, int threads) {
  std::vector<TensorStats> out;
  AmaxResult am;
  GroupLayout last;
  for (size_t i = 0; i < recipes.size(); ++i) {
    const GroupLayout L = make_layout(recipes[i], x.rows, x.cols);
    if (i == 0 || L.block_rows != last.block_rows || L.block_cols != last.block_cols)
      am = compute_amax(x, L, threads);
    last = L;
    const ScaleSet scales = compute_scales(recipes[i], L, am.group_amax, am.tensor_amax);
    out.push_back(quantize(x, recipes[i], scales, {}, so, nullptr, threads).stats);
  }
  return out;
}

TensorAnalysis analyze_ref(const std::string& name, const std::string& dtype,
                           const std::vector<int64_t>& shape, const TensorRef& x,
                           const AnalysisOptions& options, bool gpu) {
  TensorAnalysis a;
  a.name = name;
  a.dtype = dtype;
  a.shape = shape;
  a.numel = x.numel();
  a.floating = dtype.empty() || dtype[0] == 'F' || dtype == "BF16";
  StatsOptions so;
  so.histogram = false;
  so.error_map = options.maps;
  so.map_max_cells = options.map_max_cells;
  const std::vector<QuantRecipe> recipes =
      a.floating && a.numel > 0 ? recipes_for(options, x.rows, x.cols) : std::vector<QuantRecipe>{};
  // On the GPU the recipes run while the CPU describes the values.
  std::future<std::vector<TensorStats>> on_gpu;
#if defined(FP8WB_WITH_CUDA_KERNELS)
  if (gpu && !recipes.empty())
    on_gpu =
        std::async(std::launch::async, [&] { return quantization_stats_cuda(x, recipes, so); });
#else
  (void)gpu;
#endif
  const ValueSummary v = summarize_values(x, options.threads);
  a.log2_hist = v.hist;
  // NaN and Inf stay out of every figure (moments, amax, SQNR are over finite values);
  // they are counted, NaN apart from Inf, so that a reader sees them.
  if (v.hist.size() > kValueHistNonfiniteBin && v.hist[kValueHistNonfiniteBin] > 0) {
    const int64_t n = x.numel();
    int64_t nans = 0;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits = 0;
      if (x.f32) {
        std::memcpy(&bits, &x.f32[i], 4);
      } else {
        bits = static_cast<uint32_t>(x.bf16[i]) << 16;
      }
      nans += (bits & 0x7FFFFFFFu) > 0x7F800000u;
    }
    a.nan_count = nans;
    a.inf_count = static_cast<int64_t>(v.hist[kValueHistNonfiniteBin]) - nans;
  }
  if (v.finite > 0) {
    a.mean = v.sum / static_cast<double>(v.finite);
    a.std = std::sqrt(std::max(0.0, v.sq_sum / static_cast<double>(v.finite) - a.mean * a.mean));
    a.min = v.min;
    a.max = v.max;
  }
  a.amax = v.amax;
  a.min_nonzero = v.min_nonzero;
  a.dynamic_range_bits = a.min_nonzero > 0 ? std::log2(a.amax) - std::log2(a.min_nonzero) : 0;
  // SQNR is signal power over error power: without finite nonzero values there is no
  // signal, and no figure (nor a recommendation) to give.
  if (a.floating) {
    if (a.numel == 0) {
      a.not_quantized = "empty tensor (0 elements)";
    } else if (v.finite == 0) {
      a.not_quantized = "no finite values: " + std::to_string(a.nan_count) + " NaN";
      if (a.inf_count > 0) a.not_quantized += ", " + std::to_string(a.inf_count) + " Inf";
    } else if (a.amax == 0 && a.nan_count + a.inf_count > 0) {
      // Zeros besides NaN or Inf: what it holds, not "all zero".
      a.not_quantized = "no finite nonzero values: " + std::to_string(v.finite) +
                        (v.finite == 1 ? " zero" : " zeros");
      if (a.nan_count > 0) a.not_quantized += ", " + std::to_string(a.nan_count) + " NaN";
      if (a.inf_count > 0) a.not_quantized += ", " + std::to_string(a.inf_count) + " Inf";
    } else if (a.amax == 0) {
      a.not_quantized = "all zero";
    }
  } else {
    a.not_quantized =
        (dtype == "BOOL" ? std::string("a BOOL tensor") : "an integer tensor (" + dtype + ")") +
        ": FP8 holds floating-point values, so its values are described, not "
        "quantized";
  }
  if (!a.not_quantized.empty()) {
    if (on_gpu.valid()) on_gpu.wait();  // it reads x
    return a;
  }
  if (recipes.empty()) return a;
  std::vector<TensorStats> stats;
  if (on_gpu.valid()) {
    try {
      stats = on_gpu.get();
    } catch (const GpuError&) {
      // Out of device memory, a busy or lost device: the CPU gives the same figures.
      stats = stats_on_cpu(x, recipes, so, options.threads);
    }
  } else {
    stats = stats_on_cpu(x, recipes, so, options.threads);
  }
  for (size_t i = 0; i < recipes.size(); ++i) {
    RecipeResult res;
    res.recipe = recipes[i];
    res.name = recipe_name(recipes[i]);
    res.sqnr_db = stats[i].sqnr_db();
    res.underflow_pct = stats[i].underflow_pct();
    res.saturated_pct = stats[i].saturated_pct();
    res.map_grid = stats[i].map_grid;
    if (options.maps) {
      // A block without finite nonzero values (all zero, NaN or Inf) has no relative
      // error: NaN, drawn apart from the blocks that have one, not as an error of 0.
      res.map_rel_error = stats[i].map_rel_error();
      for (size_t c = 0; c < res.map_rel_error.size(); ++c) {
        if (!(stats[i].map_sq_sum[c] > 0))
          res.map_rel_error[c] = std::numeric_limits<float>::quiet_NaN();
      }
    }
    a.recipes.push_back(std::move(res));
  }
  recommend(a, options.recommend_format);
  return a;
}

// An FP8 weight's `<name>_scale_inv` companion (DeepSeek-V3's fp32 scale per 128x128
// block) with scales that make no sense: NaN or Inf (the block's values become NaN or
// Inf), zero (they become 0) or negative (their signs flip). Empty when the scales are
// all finite and positive, or when there is no such companion.
std::string bad_scale_inv(const Checkpoint& ckpt, const TensorEntry& e) {
  if (e.dtype != StDtype::F8_E4M3 && e.dtype != StDtype::F8_E5M2) return {};
  const Checkpoint::Ref* sc = ckpt.find(e.name + "_scale_inv");
  if (!sc || sc->entry->dtype != StDtype::F32) return {};
  const bool per_tensor = sc->entry->numel() == 1;
  if (!per_tensor && (e.shape.size() != 2 || sc->entry->shape.size() != 2)) return {};
  const int64_t bc = per_tensor ? 1 : std::max<int64_t>(1, sc->entry->shape[1]);
  const std::vector<uint8_t> bytes = sc->file->bytes(*sc->entry);
  const size_t n = bytes.size() / 4;
  int64_t nan = 0, inf = 0, zero = 0, negative = 0, bad = 0;
  std::string blocks;
  for (size_t i = 0; i < n; ++i) {
    float v = 0;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    if (std::isfinite(v) && v > 0) continue;
    nan += std::isnan(v);
    inf += std::isinf(v);
    zero += v == 0;
    negative += std::isfinite(v) && v < 0;
    if (bad < 8) {  // the first few blocks by [row, column]
      std::ostringstream b;
      b << (bad ? ", " : "") << "[" << static_cast<int64_t>(i) / bc << ","
        << static_cast<int64_t>(i) % bc << "] = " << v;
      blocks += b.str();
    }
    ++bad;
  }
  if (bad == 0) return {};
  std::string counts;
  auto add = [&](int64_t c, const char* what) {
    if (c > 0) counts += (counts.empty() ? "" : ", ") + std::to_string(c) + " " + what;
  };
  add(nan, "NaN");
  add(inf, "Inf");
  add(zero, "zero");
  add(negative, "negative");
  return "bad scales in '" + sc->entry->name + "': " + std::to_string(bad) + " of " +
         std::to_string(n) + " blocks (" + counts + "): " + blocks + (bad > 8 ? ", ..." : "") +
         "; the weight's values in those blocks come out NaN, Inf, zero or with flipped signs";
}

// Whether a `_scale_inv` tensor's namesake is an FP8 tensor that it scales.
bool is_fp8_weight(const Checkpoint::Ref* r) {
  return r && (r->entry->dtype == StDtype::F8_E4M3 || r->entry->dtype == StDtype::F8_E5M2);
}

// A `<name>_scale_inv` tensor analysed as a tensor of its own, because the file has no FP8
// tensor `<name>` for it to scale: what that means, else empty.
std::string orphan_scale_inv(const Checkpoint& ckpt, const TensorEntry& e) {
  const std::string suffix = "_scale_inv";
  const std::string& n = e.name;
  if (n.size() <= suffix.size() || n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0)
    return {};
  const std::string weight = n.substr(0, n.size() - suffix.size());
  const Checkpoint::Ref* w = ckpt.find(weight);
  return "'" + n + "' scales no FP8 tensor: " +
         (w ? "'" + weight + "' is " + std::string(st_dtype_name(w->entry->dtype)) + ", not FP8"
            : "the checkpoint has no tensor '" + weight + "'") +
         "; shown as a tensor of its own";
}

// An F64 tensor's finite values beyond fp32's range, which the analysis (in fp32) counts
// as Inf: how many and the largest, else empty.
std::string f64_beyond_fp32(const Checkpoint::Ref& r) {
  const std::vector<uint8_t> bytes = r.file->bytes(*r.entry);
  int64_t count = 0;
  double largest = 0;
  for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    double v = 0;
    std::memcpy(&v, bytes.data() + i, 8);
    if (std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max()) {
      ++count;
      largest = std::max(largest, std::fabs(v));
    }
  }
  if (count == 0) return {};
  std::ostringstream s;
  s << count << " finite F64 value" << (count == 1 ? " lies" : "s lie")
    << " beyond fp32's range (the largest magnitude " << largest
    << ") and count as Inf here: FP8 scaling works in fp32";
  return s.str();
}

// The reason of a tensor that its file's end cuts off: how much of it is there. The file
// is named only where it is a shard of the checkpoint: those who list the tensors say once
// that the file is truncated (`fp8wb inspect`, the Checkpoint tab), not in every row.
std::string cut_off_reason(const Checkpoint& ckpt, const Checkpoint::Ref& r) {
  const uint64_t have = r.file->bytes_present(*r.entry), all = r.entry->end - r.entry->begin;
  std::string s = "values unknown: cut off by the end of ";
  s += r.file->path() == ckpt.path()
           ? std::string("the file")
           : "shard " + std::filesystem::path(r.file->path()).filename().string();
  s += " (" + (have == 0 ? std::string("none") : std::to_string(have)) + " of its " +
       std::to_string(all) + " bytes there)";
  return s;
}

// A 2-D view: the last dimension is K.
TensorRef ref_2d(const float* f32, const uint16_t* bf16, const std::vector<int64_t>& shape,
                 int64_t numel) {
  const int64_t cols = shape.empty() ? numel : std::max<int64_t>(1, shape.back());
  return {f32, bf16, numel / cols, cols};
}

}  // namespace

TensorAnalysis analyze_values(const std::string& name, const std::string& dtype,
                              const std::vector<int64_t>& shape, const std::vector<float>& values,
                              const AnalysisOptions& options) {
  const auto n = static_cast<int64_t>(values.size());
  return analyze_ref(name, dtype, shape, ref_2d(values.data(), nullptr, shape, n), options,
                     analysis_uses_gpu(options.device));
}

std::vector<TensorAnalysis> analyze_checkpoint(const Checkpoint& ckpt,
                                               const AnalysisOptions& options) {
  std::vector<TensorAnalysis> out;
  analyze_checkpoint(ckpt, options, [&out](TensorAnalysis&& a) { out.push_back(std::move(a)); });
  return out;
}

void analyze_checkpoint(const Checkpoint& ckpt, const AnalysisOptions& options,
                        const std::function<void(TensorAnalysis&&)>& each) {
  const bool gpu = analysis_uses_gpu(options.device);
  std::vector<const Checkpoint::Ref*> pending;
  for (const auto& r : ckpt.tensors()) {
    const std::string& n = r.entry->name;
    const std::string suffix = "_scale_inv";
    if (n.size() > suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        is_fp8_weight(ckpt.find(n.substr(0, n.size() - suffix.size()))))
      continue;  // folded into its FP8 weight (to_float applies it)
    pending.push_back(&r);
  }
  // fp32 and bf16 bytes are read (pread, never a memory map: a file truncated under the
  // analysis gives an error, not SIGBUS) into one buffer that every tensor reuses, and
  // analysed there; the other dtypes are converted to fp32 first.
  std::unique_ptr<uint32_t[]> buffer;
  size_t buffer_words = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    const TensorEntry& e = *pending[i]->entry;
    const std::string dtype(st_dtype_name(e.dtype));
    TensorAnalysis a;
    try {
      pending[i]->file->require_present(e);  // before a buffer of its claimed size
      if (e.dtype == StDtype::F32 || e.dtype == StDtype::BF16) {
        const size_t words = static_cast<size_t>((e.end - e.begin + 3) / 4);
        if (words > buffer_words) {
          buffer.reset(new uint32_t[words]);  // not zeroed: read() fills it
          buffer_words = words;
        }
        pending[i]->file->read(e, buffer.get());
        const TensorRef x =
            e.dtype == StDtype::F32
                ? ref_2d(reinterpret_cast<const float*>(buffer.get()), nullptr, e.shape, e.numel())
                : ref_2d(nullptr, reinterpret_cast<const uint16_t*>(buffer.get()), e.shape,
                         e.numel());
        a = analyze_ref(e.name, dtype, e.shape, x, options, gpu);
      } else {
        const std::vector<float> v = ckpt.to_float(*pending[i]);
        a = analyze_ref(e.name, dtype, e.shape, ref_2d(v.data(), nullptr, e.shape, e.numel()),
                        options, gpu);
        const std::string bad = bad_scale_inv(ckpt, e);
        if (!bad.empty()) a.warnings.push_back(bad);
        if (e.dtype == StDtype::F64 && a.inf_count > 0) {
          if (const std::string w = f64_beyond_fp32(*pending[i]); !w.empty())
            a.warnings.push_back(w);
        }
      }
      if (const std::string orphan = orphan_scale_inv(ckpt, e); !orphan.empty())
        a.warnings.push_back(orphan);
    } catch (const TensorValueError& err) {
      // Values the file does not define (an FP8 weight whose `_scale_inv` fits it no way:
      // its raw codes would pass as the weight's; a BOOL byte other than 0 or 1; bytes cut
      // off by a truncated file): the tensor is listed with the reason, and the rest of the
      // file is analysed.
      a = analyze_ref(e.name, dtype, e.shape, TensorRef{}, options, gpu);
      a.numel = e.numel();
      a.not_quantized = e.cut_off ? cut_off_reason(ckpt, *pending[i])
                                  : std::string("values unknown: ") + err.what();
      a.values_known = false;
    }
    each(std::move(a));
    if (options.progress && !options.progress(i + 1, pending.size())) break;
  }
}

ExportReport export_fp8_checkpoint(const Checkpoint& ckpt, const std::string& path) {
  ExportReport report;
  std::vector<TensorToWrite> out;
  QuantRecipe r;
  r.kind = ScalingKind::Block128x128;
  r.format = Format::E4M3FN;
  r.partial_blocks = true;
  for (const auto& ref : ckpt.tensors()) {
    const TensorEntry& e = *ref.entry;
    const bool floating = e.dtype == StDtype::F32 || e.dtype == StDtype::F64 ||
                          e.dtype == StDtype::F16 || e.dtype == StDtype::BF16;
    const bool weight = e.name.size() >= 6 && e.name.compare(e.name.size() - 6, 6, "weight") == 0;
    if (floating && weight && e.shape.size() == 2 && e.shape[0] >= 16 && e.shape[1] >= 16) {
      const std::vector<float> v = ckpt.to_float(ref);
      const int64_t rows = e.shape[0], cols = e.shape[1];
      const auto infs = std::count_if(v.begin(), v.end(), [](float x) { return std::isinf(x); });
      if (infs > 0) {
        report.with_inf.push_back(e.name);
        report.inf_values += infs;
      }
      TensorToWrite codes{e.name, StDtype::F8_E4M3, e.shape,
                          std::vector<uint8_t>(static_cast<size_t>(rows * cols))};
      QuantizeTargets t;
      t.codes = codes.bytes.data();
      StatsOptions so;  // the counters (values turned into 0), not the histogram or map
      so.histogram = so.error_map = false;
      const CurrentQuantization q = quantize_current(TensorRef::of(v.data(), rows, cols), r, t, so);
      if (const double pct = q.result.stats.underflow_pct(); pct >= kNamedZeroedPct)
        report.zeroed.emplace_back(e.name, pct);
      const GroupLayout& L = q.scales.layout;
      TensorToWrite scales{e.name + "_scale_inv",
                           StDtype::F32,
                           {L.group_rows, L.group_cols},
                           std::vector<uint8_t>(q.scales.scale_inv.size() * 4)};
      std::memcpy(scales.bytes.data(), q.scales.scale_inv.data(), scales.bytes.size());
      out.push_back(std::move(codes));
      out.push_back(std::move(scales));
      report.quantized.push_back(e.name);
    } else {
      out.push_back({e.name, e.dtype, e.shape, ref.file->bytes(e)});
      report.kept.push_back(e.name);
    }
  }
  // The source's metadata (every file's, for a sharded set), then the layout's.
  std::map<std::string, std::string> metadata;
  for (const auto& ref : ckpt.tensors()) {
    if (ref.file) metadata.insert(ref.file->metadata().begin(), ref.file->metadata().end());
  }
  metadata.emplace("format", "pt");
  metadata["quantization"] = "fp8 E4M3FN, 128x128 blocks, <name>_scale_inv = fp32 per block";
  metadata["weight_block_size"] = "128,128";
  metadata["written_by"] = "fp8wb";
  write_safetensors(path, out, metadata);
  return report;
}

}  // namespace fp8wb
