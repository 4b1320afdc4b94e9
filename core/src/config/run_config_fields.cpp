// The run config's field table (run_config_fields.h): one row per RunConfig member.
// Plain C++, no torch.
#include "fp8wb/core/run_config_fields.h"

#include <cmath>
#include <cstdio>

namespace fp8wb {
namespace {

template <class T, size_t N>
std::vector<std::string_view> names_of(const T (&table)[N]) {
  std::vector<std::string_view> v;
  for (const T& e : table) v.push_back(e.name);
  return v;
}

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
constexpr double kSteps = 1e9;  // intervals and step counts: far past any run's length

// One row: key, member, type, label, help, min, max, then what differs from the defaults.
RunConfigField row(std::string_view key, FieldMember member, FieldType type, std::string_view label,
                   std::string_view help, double min, double max, FieldGroup group,
                   uint8_t models = kAllModels, std::vector<std::string_view> names = {},
                   bool min_excluded = false) {
  RunConfigField f;
  f.key = key;
  f.member = member;
  f.type = type;
  f.label = label;
  f.help = help;
  f.min = min;
  f.min_excluded = min_excluded;
  f.max = max;
  f.names = std::move(names);
  f.models = models;
  f.group = group;
  return f;
}

using T = FieldType;
using G = FieldGroup;
using C = RunConfig;

// Upper bounds: far above what the workbench's models are for, low enough that no single
// field takes the machine down (the memory estimate catches combinations). Text: its length.
std::vector<RunConfigField> make_fields() {
  return {
      row("name", &C::name, T::Text, "Name", "the run's name in lists, plots and exports", kNone,
          static_cast<double>(kMaxRunNameLength), G::Run),
      row("model", &C::model, T::Name, "Model",
          "gpt: a character-level transformer; mlp: a synthetic regression with outlier "
          "channels; llama: a Llama-family decoder",
          kNone, kNone, G::Model, kAllModels, {"gpt", "mlp", "llama"}),  // kModelKinds' names
      row("d_model", &C::d_model, T::Integer, "Model width (GPT, Llama)", "the transformer's width",
          8, 8192, G::Model, kDecoders),
      row("layers", &C::layers, T::Integer, "Layers (GPT, Llama)", "transformer blocks", 1, 256,
          G::Model, kDecoders),
      row("heads", &C::heads, T::Integer, "Attention heads (GPT, Llama)",
          "must divide the model width", 1, 256, G::Model, kDecoders),
      row("context", &C::context, T::Integer, "Context length (GPT, Llama)", "tokens per sequence",
          2, 8192, G::Model, kDecoders),
      row("intermediate", &C::intermediate, T::Integer, "SwiGLU width (Llama)",
          "the SwiGLU's hidden width (gate and up project d_model to it)", 1, 131072, G::Model,
          kLlamaOnly),
      row("kv_heads", &C::kv_heads, T::Integer, "Key/value heads (Llama)",
          "key/value heads (grouped-query attention); must divide heads", 1, 256, G::Model,
          kLlamaOnly),
      row("rope_theta", &C::rope_theta, T::Real, "Rotary base (Llama)",
          "the rotary embedding's base", 1, 1e12, G::Model, kLlamaOnly, {}, true),
      row("norm_eps", &C::norm_eps, T::Real, "RMSNorm epsilon (Llama)", "RMSNorm's epsilon", 0, 1,
          G::Model, kLlamaOnly, {}, true),
      row("tie_embeddings", &C::tie_embeddings, T::Boolean, "Tied embeddings (Llama)",
          "the output head is the token embedding's matrix", kNone, kNone, G::Model, kLlamaOnly),
      row("vocab", &C::vocab, T::Integer, "Vocabulary (Llama; 0: the data's)",
          "token ids below it; 0: the data's vocabulary", 0, 1048576, G::Model, kLlamaOnly),
      row("smooth_swiglu", &C::smooth_swiglu, T::Boolean, "Smooth-SwiGLU (Llama)",
          "scale the down projection's input per channel before FP8 (Smooth-SwiGLU), its "
          "weight inversely",
          kNone, kNone, G::Model, kLlamaOnly),
      row("hf", &C::hf, T::Text, "Hugging Face checkpoint (Llama)",
          "a Hugging Face checkpoint's folder (config.json, model.safetensors or its index): "
          "the llama's shape and weights; empty: from scratch",
          kNone, 4096, G::Model, kLlamaOnly),
      row("data", &C::data, T::Text, "Token file (GPT, Llama)",
          "a token file (llm.c's format or raw uint16) to train on, its last tenth held out; "
          "empty: the bundled corpus",
          kNone, 4096, G::Model, kDecoders),
      row("eval_interval", &C::eval_interval, T::Integer, "Held-out loss interval",
          "steps between held-out losses on a token file; 0: never", 0, kSteps, G::Model,
          kDecoders),
      row("width", &C::width, T::Integer, "Hidden width (MLP)", "the MLP's hidden width", 1, 65536,
          G::Model, kMlpOnly),
      row("depth", &C::depth, T::Integer, "Depth (MLP)", "the MLP's linear layers", 1, 256,
          G::Model, kMlpOnly),
      row("features", &C::features, T::Integer, "Features (MLP)",
          "the MLP's input and output width", 1, 65536, G::Model, kMlpOnly),
      row("outlier_channels", &C::outlier_channels, T::Integer, "Outlier channels (MLP)",
          "input channels scaled by outlier_scale", 0, 65536, G::Model, kMlpOnly),
      row("outlier_scale", &C::outlier_scale, T::Real, "Outlier scale (MLP)",
          "how far outlier channels stand out", 0, 1e30, G::Model, kMlpOnly, {}, true),
      row("target_tail", &C::target_tail, T::Real, "Target noise tail (MLP)",
          "Student-t degrees of freedom of the target noise (smaller: heavier tails)", 0, 1e6,
          G::Model, kMlpOnly, {}, true),
      row("drift", &C::drift, T::Real, "Input drift (MLP)",
          "inputs swing by 2^(drift * sin(2 pi step / drift_period)); 0: none", 0, 30, G::Model,
          kMlpOnly),
      row("drift_period", &C::drift_period, T::Integer, "Drift period (MLP)",
          "steps of one swing of the input drift", 2, kSteps, G::Model, kMlpOnly),
      row("batch", &C::batch, T::Integer, "Batch size",
          "samples (sequences) per step, over all ranks", 1, 65536, G::Optimizer),
      row("steps", &C::steps, T::Integer, "Steps", "optimizer steps", 1, kSteps, G::Optimizer),
      row("lr", &C::lr, T::Real, "Learning rate", "the peak learning rate", 0, 10, G::Optimizer,
          kAllModels, {}, true),
      row("warmup", &C::warmup, T::Integer, "Warm-up steps",
          "linear warm-up steps, then cosine decay to lr times min_lr_ratio", 0, kSteps,
          G::Optimizer),
      row("min_lr_ratio", &C::min_lr_ratio, T::Real, "Final learning rate ratio",
          "the learning rate decays to lr times this", 0, 1, G::Optimizer),
      row("weight_decay", &C::weight_decay, T::Real, "Weight decay", "AdamW's weight decay", 0, 1e3,
          G::Optimizer),
      row("grad_clip", &C::grad_clip, T::Real, "Gradient clipping norm (0: off)",
          "the gradients' global norm is clipped to it; 0: off", 0, 1e12, G::Optimizer),
      // 2^53: every seed a double holds exactly (JSON readers in other languages).
      row("seed", &C::seed, T::Integer, "Seed", "the initial weights' and the data's seed", 0,
          9007199254740992.0, G::Run),
      row("device", &C::device, T::Text, "Device", "cpu, cuda or cuda:N", kNone, 16, G::Run),
      row("dtype", &C::dtype, T::Name, "Activation dtype",
          "the activations' dtype (master weights stay fp32)", kNone, 16, G::Run, kAllModels,
          names_of(kActivationDtypes)),
      row("fp8", &C::fp8, T::Boolean, "FP8 linear layers",
          "the linear layers quantize to FP8 (false: the high-precision model alone)", kNone, kNone,
          G::FP8),
      row("recipe", &C::recipe, T::Name, "Recipe",
          "the scaling of the three roles: one scale per tensor, per row, per block or MX", kNone,
          16, G::FP8, kAllModels, names_of(kFloat8Recipes)),
      row("formats", &C::formats, T::Name, "Formats",
          "the formats of input, weight and output gradient", kNone, 16, G::FP8, kAllModels,
          names_of(kFormatPairings)),
      row("scaling", &C::scaling, T::Name, "Scaling",
          "delayed: scales from an amax history (tensorwise only); current: from the tensor "
          "itself",
          kNone, 16, G::FP8, kAllModels, names_of(kScalingModes)),
      row("margin", &C::margin, T::Integer, "Margin",
          "the scale leaves 2^margin of headroom below the format's largest value", -64, 64,
          G::FP8),
      row("window", &C::window, T::Integer, "Window",
          "steps of amax history that delayed scaling keeps", 1, 65536, G::FP8),
      row("amax_algo", &C::amax_algo, T::Name, "Amax algorithm",
          "delayed scaling's amax: the history's largest, or its most recent", kNone, 16, G::FP8,
          kAllModels, names_of(kAmaxAlgos)),
      row("fprop_fp8", &C::fprop_fp8, T::Boolean, "FP8 GEMMs",
          "fprop (y = x w^T) with FP8 operands", kNone, kNone, G::FP8),
      row("dgrad_fp8", &C::dgrad_fp8, T::Boolean, "FP8 GEMMs",
          "dgrad (dx = dy w) with FP8 operands", kNone, kNone, G::FP8),
      row("wgrad_fp8", &C::wgrad_fp8, T::Boolean, "FP8 GEMMs",
          "wgrad (dw = dy^T x) with FP8 operands", kNone, kNone, G::FP8),
      row("stats_interval", &C::stats_interval, T::Integer, "Statistics interval",
          "steps between full per-layer statistics (amax, scale, underflow, saturation, "
          "histograms), and the last step too; 0 or \"never\": never, and the Scaling and "
          "Quantization tabs stay empty",
          0, kSteps, G::Statistics),
      row("sqnr_interval", &C::sqnr_interval, T::Integer, "SQNR interval",
          "steps between GEMM-output SQNR samples; 0: never", 0, kSteps, G::Statistics),
      row("reference", &C::reference, T::Boolean, "High-precision reference",
          "a high-precision model trained in lockstep", kNone, kNone, G::Run),
      row("on_nonfinite", &C::on_nonfinite, T::Name, "On a non-finite loss",
          "stop the run, or skip the step's update", kNone, 16, G::Run, kAllModels,
          names_of(kOnNonfinite)),
      row("log_interval", &C::log_interval, T::Integer, "Logging interval",
          "steps between scalar records", 1, kSteps, G::Run),
      row("weights", &C::weights, T::Text, "Weights file",
          "write the final weights here (safetensors); empty: none", kNone, 4096, G::Run),
      row("amax_reduction", &C::amax_reduction, T::Boolean, "Amax reduction across ranks",
          "data-parallel runs: true: every rank scales with the largest amax of all ranks, so "
          "all quantize alike; false: each rank with its own",
          kNone, kNone, G::Ranks),
      row("rank_timeout", &C::rank_timeout, T::Integer, "Rank timeout (seconds)",
          "data-parallel runs: seconds a rank waits for the others before the run fails", 1, 86400,
          G::Ranks),
  };
}

}  // namespace

const std::vector<RunConfigField>& run_config_fields() {
  static const std::vector<RunConfigField> fields = make_fields();
  return fields;
}

const RunConfigField* find_run_config_field(std::string_view key) {
  for (const RunConfigField& f : run_config_fields()) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

std::string field_names_text(const RunConfigField& f) {
  std::string s;
  for (std::string_view n : f.names) (s += s.empty() ? "" : ", ") += n;
  return s;
}

std::string field_limit_text(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e16) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string field_bounds_text(const RunConfigField& f) {
  if (f.type == FieldType::Text || f.type == FieldType::Name) {
    return f.has_max() && f.names.empty() ? "<= " + field_limit_text(f.max) + " characters"
                                          : std::string();
  }
  if (f.has_min() && f.has_max()) {
    return (f.min_excluded ? "(" : "[") + field_limit_text(f.min) + ", " + field_limit_text(f.max) +
           "]";
  }
  if (f.has_min()) return (f.min_excluded ? "> " : ">= ") + field_limit_text(f.min);
  if (f.has_max()) return "<= " + field_limit_text(f.max);
  return {};
}

}  // namespace fp8wb
