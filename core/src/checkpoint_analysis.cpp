#include "fp8wb/core/checkpoint_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "fp8wb/kernels/quantize_cpu.h"

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

void recommend(TensorAnalysis& a) {
  // Among the E4M3 recipes (the format of weights and activations), the simplest one
  // within 1 dB of the best SQNR, without saturation.
  const RecipeResult* best = nullptr;
  for (const auto& r : a.recipes) {
    if (r.recipe.format != Format::E4M3FN) continue;
    if (!best || r.sqnr_db > best->sqnr_db) best = &r;
  }
  if (!best) return;
  const RecipeResult* pick = best;
  for (const auto& r : a.recipes) {
    if (r.recipe.format != Format::E4M3FN || r.saturated_pct > 0) continue;
    if (r.sqnr_db >= best->sqnr_db - 1.0 && simplicity(r.recipe.kind) < simplicity(pick->recipe.kind))
      pick = &r;
  }
  a.recommended = pick->name;
  if (pick == best) {
    a.reason = "best SQNR of the E4M3 recipes: " + fixed(pick->sqnr_db, 1) + " dB, " +
               fixed(pick->underflow_pct, 3) + "% underflow";
  } else {
    a.reason = "within 1 dB of the best (" + best->name + ", " + fixed(best->sqnr_db, 1) +
               " dB) and simpler: " + fixed(pick->sqnr_db, 1) + " dB, " +
               fixed(pick->underflow_pct, 3) + "% underflow";
  }
  // Say why finer scaling wins when it does: the spread inside the tensor.
  if (pick->recipe.kind != ScalingKind::Tensorwise) {
    for (const auto& r : a.recipes) {
      if (r.recipe.format == Format::E4M3FN && r.recipe.kind == ScalingKind::Tensorwise) {
        a.reason += "; one tensorwise scale gives " + fixed(r.sqnr_db, 1) + " dB (amax " +
                    fixed(a.amax, 3) + " against a dynamic range of " +
                    fixed(a.dynamic_range_bits, 1) + " bits)";
      }
    }
  }
}

}  // namespace

TensorAnalysis analyze_values(const std::string& name, const std::string& dtype,
                              const std::vector<int64_t>& shape, const std::vector<float>& values,
                              const AnalysisOptions& options) {
  TensorAnalysis a;
  a.name = name;
  a.dtype = dtype;
  a.shape = shape;
  a.numel = static_cast<int64_t>(values.size());
  a.floating = dtype.empty() || dtype[0] == 'F' || dtype == "BF16";
  a.log2_hist.assign(kHistBins, 0);
  double sum = 0, sq = 0;
  double mn = INFINITY, mx = -INFINITY, amax = 0, min_nz = INFINITY;
  int64_t finite = 0;
  for (float v : values) {
    if (!std::isfinite(v)) {
      a.log2_hist[kHistNonfiniteBin]++;
      continue;
    }
    ++finite;
    sum += v;
    sq += static_cast<double>(v) * v;
    mn = std::min<double>(mn, v);
    mx = std::max<double>(mx, v);
    const double m = std::fabs(static_cast<double>(v));
    amax = std::max(amax, m);
    if (m > 0) {
      min_nz = std::min(min_nz, m);
      const int e = static_cast<int>(std::floor(std::log2(m)));
      a.log2_hist[static_cast<size_t>(std::clamp(e - kHistMinExp, 0, kHistExpBins - 1))]++;
    } else {
      a.log2_hist[kHistZeroBin]++;
    }
  }
  if (finite > 0) {
    a.mean = sum / static_cast<double>(finite);
    a.std = std::sqrt(std::max(0.0, sq / static_cast<double>(finite) - a.mean * a.mean));
    a.min = mn;
    a.max = mx;
  }
  a.amax = amax;
  a.min_nonzero = std::isfinite(min_nz) ? min_nz : 0;
  a.dynamic_range_bits = a.min_nonzero > 0 ? std::log2(amax) - std::log2(a.min_nonzero) : 0;
  if (!a.floating || values.empty()) return a;

  const int64_t cols = shape.empty() ? a.numel : std::max<int64_t>(1, shape.back());
  const int64_t rows = a.numel / cols;
  const TensorRef ref = TensorRef::of(values.data(), rows, cols);
  StatsOptions so;
  so.histogram = false;
  so.error_map = options.maps;
  so.map_max_cells = options.map_max_cells;
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
      const CurrentQuantization q = quantize_current(ref, r, {}, so);
      RecipeResult res;
      res.recipe = r;
      res.name = recipe_name(r);
      res.sqnr_db = q.result.stats.sqnr_db();
      res.underflow_pct = q.result.stats.underflow_pct();
      res.saturated_pct = q.result.stats.saturated_pct();
      res.map_grid = q.result.stats.map_grid;
      if (options.maps) res.map_rel_error = q.result.stats.map_rel_error();
      a.recipes.push_back(std::move(res));
    }
  }
  recommend(a);
  return a;
}

std::vector<TensorAnalysis> analyze_checkpoint(const Checkpoint& ckpt,
                                               const AnalysisOptions& options) {
  std::vector<const Checkpoint::Ref*> pending;
  for (const auto& r : ckpt.tensors()) {
    const std::string& n = r.entry->name;
    const std::string suffix = "_scale_inv";
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        ckpt.find(n.substr(0, n.size() - suffix.size())))
      continue;  // folded into its FP8 weight
    pending.push_back(&r);
  }
  std::vector<TensorAnalysis> out;
  for (size_t i = 0; i < pending.size(); ++i) {
    const auto& r = *pending[i];
    out.push_back(analyze_values(r.entry->name, std::string(st_dtype_name(r.entry->dtype)),
                                 r.entry->shape, ckpt.to_float(r), options));
    if (options.progress && !options.progress(i + 1, pending.size())) break;
  }
  return out;
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
      TensorToWrite codes{e.name, StDtype::F8_E4M3, e.shape,
                          std::vector<uint8_t>(static_cast<size_t>(rows * cols))};
      QuantizeTargets t;
      t.codes = codes.bytes.data();
      StatsOptions so;
      so.enabled = so.histogram = so.error_map = false;
      const CurrentQuantization q = quantize_current(TensorRef::of(v.data(), rows, cols), r, t, so);
      const GroupLayout& L = q.scales.layout;
      TensorToWrite scales{e.name + "_scale_inv", StDtype::F32, {L.group_rows, L.group_cols},
                           std::vector<uint8_t>(q.scales.scale_inv.size() * 4)};
      std::memcpy(scales.bytes.data(), q.scales.scale_inv.data(), scales.bytes.size());
      out.push_back(std::move(codes));
      out.push_back(std::move(scales));
      report.quantized.push_back(e.name);
    } else {
      const uint8_t* p = ref.file->data(e);
      out.push_back({e.name, e.dtype, e.shape, std::vector<uint8_t>(p, p + (e.end - e.begin))});
      report.kept.push_back(e.name);
    }
  }
  write_safetensors(path, out,
                    {{"quantization", "fp8 E4M3FN, 128x128 blocks, <name>_scale_inv = fp32 per block"},
                     {"weight_block_size", "128,128"},
                     {"written_by", "fp8wb"}});
  return report;
}

}  // namespace fp8wb
