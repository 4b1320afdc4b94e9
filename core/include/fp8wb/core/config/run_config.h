// defines: ModelKind, Float8Recipe, FormatPairing, ActivationDtype, OnNonfinite (and
// their name tables; ScalingMode is float8_config.h's), RunConfig, ConfigError,
// parse_run_config(), apply_override(), run_config_json(), validate_run_config(),
// float8_config_of(), RunConfigField and run_config_field_rows() (a row per field, next to
// RunConfig's members): what a training run is, as users write it (a flat JSON object, or
// key=value overrides), checked with messages that name the field and the allowed values.
// Plain structs, no torch.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fp8wb/core/config/float8_config.h"
#include "fp8wb/kernels/name_table.h"

namespace fp8wb {

enum class ModelKind : uint8_t {
  Mlp,  // synthetic regression with outlier channels and heavy-tailed targets
  Gpt,  // character-level decoder-only transformer on the bundled corpus
  // A Llama-family decoder (RMSNorm, rotary positions, SwiGLU, grouped-query attention):
  // from scratch, or a Hugging Face checkpoint's (`hf`)
  Llama,
};
struct ModelKindEntry {
  ModelKind value;
  std::string_view name;  // as configs spell it
};
inline constexpr ModelKindEntry kModelKinds[] = {
    {ModelKind::Mlp, "mlp"}, {ModelKind::Gpt, "gpt"}, {ModelKind::Llama, "llama"}};
static_assert(names_cover_enum(kModelKinds, ModelKind::Llama));

// The activations' dtype (master weights stay fp32).
enum class ActivationDtype : uint8_t { Fp32, Bf16 };
struct ActivationDtypeEntry {
  ActivationDtype value;
  std::string_view name;  // as configs spell it
};
inline constexpr ActivationDtypeEntry kActivationDtypes[] = {{ActivationDtype::Fp32, "fp32"},
                                                             {ActivationDtype::Bf16, "bf16"}};
static_assert(names_cover_enum(kActivationDtypes, ActivationDtype::Bf16));

// What a non-finite loss does.
enum class OnNonfinite : uint8_t {
  Stop,  // the run stops (failed)
  Skip,  // the step's update is skipped
};
struct OnNonfiniteEntry {
  OnNonfinite value;
  std::string_view name;  // as configs spell it
};
inline constexpr OnNonfiniteEntry kOnNonfinite[] = {{OnNonfinite::Stop, "stop"},
                                                    {OnNonfinite::Skip, "skip"}};
static_assert(names_cover_enum(kOnNonfinite, OnNonfinite::Skip));

// The scaling recipes a run chooses from; each sets the scaling of the three roles.
enum class Float8Recipe : uint8_t {
  Tensorwise,  // one scale per tensor (the only recipe delayed scaling takes)
  Rowwise,     // one scale per row of x, dy and w, along K
  Blockwise,   // DeepSeek-V3: x and dy in 1x128 groups, w in 128x128 tiles
  MX,          // OCP MX: 1x32 blocks sharing an E8M0 scale
};
struct Float8RecipeEntry {
  Float8Recipe value;
  std::string_view name;    // as configs spell it
  ScalingKind activations;  // input and grad_output
  ScalingKind weight;
};
inline constexpr Float8RecipeEntry kFloat8Recipes[] = {
    {Float8Recipe::Tensorwise, "tensorwise", ScalingKind::Tensorwise, ScalingKind::Tensorwise},
    {Float8Recipe::Rowwise, "rowwise", ScalingKind::Rowwise, ScalingKind::Rowwise},
    {Float8Recipe::Blockwise, "blockwise", ScalingKind::Block1x128, ScalingKind::Block128x128},
    {Float8Recipe::MX, "mx", ScalingKind::MX, ScalingKind::MX},
};
static_assert(names_cover_enum(kFloat8Recipes, Float8Recipe::MX));

// The formats of the three roles a run chooses from.
enum class FormatPairing : uint8_t {
  Hybrid,      // E4M3 forward, E5M2 gradients (the range gradients need)
  E4M3,        // E4M3 everywhere (DeepSeek-V3, torchao's rowwise recipes)
  HybridFnuz,  // the same in AMD MI300's fnuz formats
  E4M3Fnuz,
};
struct FormatPairingEntry {
  FormatPairing value;
  std::string_view name;  // as configs spell it
  Format input, weight, grad_output;
};
inline constexpr FormatPairingEntry kFormatPairings[] = {
    {FormatPairing::Hybrid, "hybrid", Format::E4M3FN, Format::E4M3FN, Format::E5M2},
    {FormatPairing::E4M3, "e4m3", Format::E4M3FN, Format::E4M3FN, Format::E4M3FN},
    {FormatPairing::HybridFnuz, "hybrid_fnuz", Format::E4M3FNUZ, Format::E4M3FNUZ,
     Format::E5M2FNUZ},
    {FormatPairing::E4M3Fnuz, "e4m3_fnuz", Format::E4M3FNUZ, Format::E4M3FNUZ, Format::E4M3FNUZ},
};
static_assert(names_cover_enum(kFormatPairings, FormatPairing::E4M3Fnuz));

inline std::string_view float8_recipe_name(Float8Recipe r) {
  return table_name(kFloat8Recipes, r);
}
inline std::optional<Float8Recipe> parse_float8_recipe(std::string_view name) {
  return parse_table_name(kFloat8Recipes, name);
}
inline std::string_view format_pairing_name(FormatPairing f) {
  return table_name(kFormatPairings, f);
}
inline std::optional<FormatPairing> parse_format_pairing(std::string_view name) {
  return parse_table_name(kFormatPairings, name);
}

struct RunConfig {
  std::string name = "run";
  ModelKind model = ModelKind::Gpt;
  // GPT and Llama
  int d_model = 64;
  int layers = 2;
  int heads = 4;
  int context = 64;
  // Llama
  int intermediate = 176;       // the SwiGLU's hidden width (gate, up: d_model -> intermediate)
  int kv_heads = 2;             // key/value heads (grouped-query attention): divides heads
  double rope_theta = 1e4;      // the rotary embedding's base
  double norm_eps = 1e-5;       // RMSNorm's epsilon
  bool tie_embeddings = false;  // the output head is the token embedding's matrix
  int vocab = 0;                // token ids below it; 0: the data's vocabulary
  // Smooth-SwiGLU (Fishman et al. 2024): the down projection's input scaled per channel by
  // a power of two to amax 1 before quantization, its weight's columns by the same factors
  // (so the product is unchanged): its outlier channels no longer set the FP8 scale.
  bool smooth_swiglu = false;
  // A Hugging Face checkpoint folder (config.json and model.safetensors or its sharded
  // index): the Llama's shape from config.json (resolve_hf_config()), its weights loaded
  std::string hf;
  // GPT and Llama: a token file (llm.c's format, or nanoGPT's raw uint16 .bin) to train on
  // instead of the bundled corpus; its last tenth held out for the evaluation loss.
  std::string data;
  int eval_interval = 50;  // steps between held-out evaluations (token files; 0: never)
  // MLP
  int width = 256;
  int depth = 3;
  int features = 64;          // input and output width of the MLP
  int outlier_channels = 4;   // input channels scaled by outlier_scale
  double outlier_scale = 50;  // how far outlier channels stand out
  double target_tail = 3;     // Student-t degrees of freedom of the target noise (heavy tails)
  double drift = 0;           // inputs swing by 2^(drift * sin(2 pi step / drift_period))
  int drift_period = 100;
  // Optimisation
  int batch = 16;
  int64_t steps = 300;
  double lr = 3e-3;
  int warmup = 20;  // linear warm-up steps, then cosine decay to lr * min_lr_ratio
  double min_lr_ratio = 0.1;
  double weight_decay = 0.01;
  double grad_clip = 1.0;  // global norm; 0: off
  uint64_t seed = 1;
  std::string device = "cpu";                     // cpu, cuda, cuda:N
  ActivationDtype dtype = ActivationDtype::Fp32;  // activations; master weights stay fp32
  // FP8
  bool fp8 = true;
  Float8Recipe recipe = Float8Recipe::Tensorwise;
  FormatPairing formats = FormatPairing::Hybrid;
  ScalingMode scaling = ScalingMode::Delayed;  // delayed needs tensorwise
  int margin = 0;
  int window = 16;
  AmaxAlgo amax_algo = AmaxAlgo::Max;
  bool fprop_fp8 = true, dgrad_fp8 = true, wgrad_fp8 = true;
  int stats_interval = 10;  // steps between full statistics (0: never)
  int sqnr_interval = 50;   // steps between GEMM-output SQNR samples (0: never)
  bool reference = true;    // a high-precision model trained in lockstep
  OnNonfinite on_nonfinite = OnNonfinite::Stop;
  int log_interval = 1;  // steps between scalar records
  std::string weights;   // write the final weights here (safetensors); empty: no
  // Data-parallel runs (several ranks): each role's amax is the maximum over every rank's
  // before it sets a scale, so that all ranks quantize alike (false: each rank its own).
  bool amax_reduction = true;
  int rank_timeout = 300;  // seconds a rank waits for the others before the run fails
};

// How a field's value is written: text, a whole number, a number, true/false, or one name
// of a fixed list (`names`).
enum class FieldType : uint8_t { Text, Integer, Real, Boolean, Name };

// What a field is about (help texts and the man page list fields by group).
enum class FieldGroup : uint8_t { Run, Model, Optimizer, FP8, Statistics, Ranks };
struct FieldGroupEntry {
  FieldGroup value;
  std::string_view name;  // as help texts title it
};
inline constexpr FieldGroupEntry kFieldGroups[] = {
    {FieldGroup::Run, "The run"},
    {FieldGroup::Model, "The model"},
    {FieldGroup::Optimizer, "The optimizer"},
    {FieldGroup::FP8, "FP8"},
    {FieldGroup::Statistics, "Statistics"},
    {FieldGroup::Ranks, "Ranks"},
};
static_assert(names_cover_enum(kFieldGroups, FieldGroup::Ranks));

// The models a field applies to, a bit per ModelKind.
constexpr uint8_t model_bit(ModelKind m) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(m));
}
inline constexpr uint8_t kMlpOnly = model_bit(ModelKind::Mlp);
inline constexpr uint8_t kLlamaOnly = model_bit(ModelKind::Llama);
inline constexpr uint8_t kDecoders = model_bit(ModelKind::Gpt) | model_bit(ModelKind::Llama);
inline constexpr uint8_t kAllModels = kMlpOnly | kDecoders;

// The RunConfig member a field reads and writes.
using FieldMember =
    std::variant<std::string RunConfig::*, int RunConfig::*, int64_t RunConfig::*,
                 uint64_t RunConfig::*, double RunConfig::*, bool RunConfig::*,
                 ModelKind RunConfig::*, Float8Recipe RunConfig::*, FormatPairing RunConfig::*,
                 ScalingMode RunConfig::*, AmaxAlgo RunConfig::*, OnNonfinite RunConfig::*,
                 ActivationDtype RunConfig::*>;

struct RunConfigField {
  std::string_view key;  // as config files and --set spell it
  FieldMember member;
  FieldType type = FieldType::Text;
  std::string_view label;  // as the GUI's form labels it
  std::string_view help;   // what it means, for tooltips and help texts
  // Numbers: the least value (`min_excluded`: above it, not at it) and the largest, both
  // refused past (core/src/README.md, "Limits"); text: `max` is its length. NaN: no
  // bound beyond the checks of validate_run_config().
  double min = std::numeric_limits<double>::quiet_NaN();
  bool min_excluded = false;
  double max = std::numeric_limits<double>::quiet_NaN();
  // The values it takes, for a Name (from the enum's name table) or text of fixed words.
  std::vector<std::string_view> names;
  uint8_t models = kAllModels;  // model_bit()s
  FieldGroup group = FieldGroup::Run;

  bool applies_to(ModelKind m) const { return (models & model_bit(m)) != 0; }
  bool has_min() const { return !std::isnan(min); }
  bool has_max() const { return !std::isnan(max); }
};

// The longest `name` a config may have, in bytes (its field's bound).
inline constexpr size_t kMaxRunNameLength = 200;

// RunConfig's fields, a row each, in the order config JSON writes them. A field is its
// member above and its row here: parsing, the bounds checks, JSON in and out, help texts,
// the man page's check and the run panel's form follow (run_config_fields.h).
namespace run_config_rows {

template <class T, size_t N>
inline std::vector<std::string_view> names_of(const T (&table)[N]) {
  std::vector<std::string_view> v;
  for (const T& e : table) v.push_back(e.name);
  return v;
}

inline constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kSteps = 1e9;  // intervals and step counts: far past any run's length

// One row: key, member, type, label, help, min, max, then what differs from the defaults.
inline RunConfigField row(std::string_view key, FieldMember member, FieldType type,
                          std::string_view label, std::string_view help, double min, double max,
                          FieldGroup group, uint8_t models = kAllModels,
                          std::vector<std::string_view> names = {}, bool min_excluded = false) {
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

}  // namespace run_config_rows

// Upper bounds: far above what the workbench's models are for, low enough that no single
// field takes the machine down (the memory estimate catches combinations). Text: its length.
inline std::vector<RunConfigField> run_config_field_rows() {
  using namespace run_config_rows;
  using T = FieldType;
  using G = FieldGroup;
  using C = RunConfig;
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

// The keys users may set, in order (for help texts and error messages).
const std::vector<std::string>& run_config_keys();

// What a config may be: its JSON text at most 1 MB, nested at most 32 levels.
constexpr size_t kMaxConfigBytes = size_t{1} << 20;
constexpr int kMaxJsonDepth = 32;

// A config refused: the field (its key; empty where the config as a whole is refused: not
// JSON, too large) and the reason. what() reads "config field 'KEY': REASON" (a field's) or
// the reason alone. An invalid_argument, as config errors were.
struct ConfigError : std::invalid_argument {
  ConfigError(std::string field, std::string reason);
  // With a message of its own: "runs.json: config field 'lr': ..." (a file's).
  ConfigError(std::string field, std::string reason, const std::string& message);
  std::string field;
  std::string reason;
};

// Throws ConfigError naming the field: unknown keys, wrong types, values out of
// range or not among the allowed ones (every number has an upper bound: core/src/README.md,
// "Limits"), a run that would not fit in memory.
RunConfig parse_run_config(std::string_view json_text);
// A config file: a regular file of at most kMaxConfigBytes, parsed as above.
RunConfig read_run_config_file(const std::string& path);
// Throws ConfigError (naming `what`, no field) for text over kMaxConfigBytes or nested
// deeper than kMaxJsonDepth: checked before any JSON is parsed, so nothing recurses deep.
void check_json_nesting(std::string_view text, const std::string& what);
// key=value (the value as JSON, or a bare word for strings): "window=1024", "fp8=false".
void apply_override(RunConfig& c, std::string_view assignment);
// The field an assignment names, spaces around it trimmed ("" where it has no '=').
std::string override_key(std::string_view assignment);
// Several, in order; a field given twice (steps=1, steps=2) is refused (ConfigError naming
// it and both values) before any is applied: which one was meant is not guessed.
void apply_overrides(RunConfig& c, const std::vector<std::string>& assignments);
void validate_run_config(const RunConfig& c);
std::string run_config_json(const RunConfig& c);  // every key, pretty-printed

// What a run holds in memory, estimated from its config (bytes, upper estimates).
struct MemoryEstimate {
  double parameters = 0;   // weights, gradients, optimizer state, FP8 copies (both models)
  double activations = 0;  // kept for the backward pass, with the quantization's temporaries
  double histories = 0;    // delayed scaling's amax windows
  double metrics = 0;      // the scalars a viewer keeps of every logged step
  double total = 0;
};
MemoryEstimate estimate_run_memory(const RunConfig& c);
uint64_t run_memory_limit();  // this machine's physical memory
// Throws ConfigError naming the field that weighs most (and those it is weighed with) when
// the estimate is over `limit` (0: run_memory_limit()). validate_run_config() calls it.
void check_run_memory(const RunConfig& c, uint64_t limit = 0);

// A message without LibTorch's "Exception raised from ..." backtrace (frames and all).
std::string without_backtrace(std::string_view message);

// The Float8Linear configuration a run's FP8 layers use.
Float8LinearConfig float8_config_of(const RunConfig& c);

std::string_view model_kind_name(ModelKind m);  // "mlp", "gpt", "llama"

// A Hugging Face checkpoint's config.json, as far as the engine's Llama reads it.
struct HfModelConfig {
  std::string architecture;  // LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM
  int hidden_size = 0, intermediate_size = 0, layers = 0, heads = 0, kv_heads = 0;
  int vocab_size = 0, max_position_embeddings = 0;
  double rope_theta = 1e4, rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;    // Qwen2: q, k and v projections with biases
  int sliding_window = 0;   // Mistral, Qwen2 with use_sliding_window: 0 none
  std::string torch_dtype;  // as config.json says ("bfloat16"), or empty
  std::string weights;      // model.safetensors, or model.safetensors.index.json
};
// Reads DIR/config.json and finds the weights file. Throws ConfigError naming
// config field 'hf' and what is wrong: no folder, no config.json, an architecture other
// than the three (named), a field missing or out of range, rope scaling, a head size
// other than hidden_size / heads, no model.safetensors nor its index.
HfModelConfig read_hf_config(const std::string& dir);
// Where c.hf is set: model llama and its shape (d_model, intermediate, layers, heads,
// kv_heads, rope_theta, norm_eps, tie_embeddings, vocab) from its config.json; a context
// longer than a sliding window refused. Nothing where hf is empty.
void resolve_hf_config(RunConfig& c);
// The config.json that goes beside a llama run's weights written as model.safetensors,
// so that the folder is a Hugging Face checkpoint: the hf checkpoint's own where the run
// started from one, else a LlamaForCausalLM config of the run's shape (fp32 weights).
std::string hf_config_json(const RunConfig& c);

}  // namespace fp8wb
