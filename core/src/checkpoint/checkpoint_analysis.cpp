#include "fp8wb/core/checkpoint/checkpoint_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "checkpoint_analysis_internal.h"
#include "fp8wb/kernels/codec_cuda.h"
#include "fp8wb/kernels/format.h"
#include "fp8wb/kernels/quantize_cpu.h"
#if defined(FP8WB_WITH_CUDA_KERNELS)
#include "fp8wb/kernels/quantize_cuda.h"
#endif

namespace fp8wb {

using analysis_detail::recommend;

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
    res.raw = stats[i].raw;
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

}  // namespace fp8wb
