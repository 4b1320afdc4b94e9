#include "commands/eval_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "command_registry.h"
#include "fp8wb/core/checkpoint/eval_checkpoint.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/config/run_config_fields.h"
#include "run_command_common.h"

namespace fp8wb::cli {

CLI::App* add_eval_command(CLI::App& app, EvalCommandOptions& opt) {
  auto* c = app.add_subcommand(
      "eval",
      "What FP8 does to a Hugging Face checkpoint's loss: its mean cross-entropy over a token "
      "file's non-overlapping windows in high precision and with FP8 linears, per recipe");
  c->add_option("--hf", opt.hf, "The checkpoint's folder (config.json, model.safetensors)")
      ->required();
  c->add_option("--data", opt.data,
                "A token file: llm.c's format (header and uint16 tokens) or raw uint16 (nanoGPT)")
      ->required();
  c->add_option("--set", opt.overrides,
                "FP8 settings as config fields: recipe=tensorwise,rowwise (a list: one "
                "evaluation each), formats=..., margin=..., fprop_fp8=... (repeatable)");
  c->add_option("--context", opt.context,
                "Window length T (default: the config's max_position_embeddings, at most 1024)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  c->add_option("--windows", opt.windows, "Only the first N windows (default: all)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  c->add_option("--dtype", opt.dtype,
                "High precision as fp32 or bf16 (default: the checkpoint's torch_dtype)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  c->add_option("--device", opt.device, "cpu, cuda or cuda:N");
  c->add_option("--batch", opt.batch, "Windows per forward pass")->check(CLI::Range(1, 4096));
  c->add_flag("--json", opt.json, "Print the result as JSON");
  return c;
}

namespace {

// "4 of 14 layers in FP8; 10 kept in high precision: K=48 is not a multiple of 32 (and 1
// other reason; each layer's below)", "14 of 14 layers in FP8", "no layer in FP8: ...".
std::string eval_layers_text(const EvalFp8& e) {
  const size_t total = e.layers.size() + e.kept.size();
  std::string s = e.layers.empty() ? std::string("no layer in FP8")
                                   : fmt::format("{} of {} layers in FP8", e.layers.size(), total);
  if (e.kept.empty()) return s;
  // The reasons ("layer: why"), the first named, how many others counted.
  std::vector<std::string> reasons;
  for (const std::string& k : e.kept) {
    const size_t colon = k.find(": ");
    const std::string why = colon == std::string::npos ? k : k.substr(colon + 2);
    if (std::find(reasons.begin(), reasons.end(), why) == reasons.end()) reasons.push_back(why);
  }
  s += e.layers.empty() ? fmt::format(": all {} kept in high precision: ", total)
                        : fmt::format("; {} kept in high precision: ", e.kept.size());
  s += reasons.front();
  if (reasons.size() > 1)
    s +=
        fmt::format(" (and {} other reason{})", reasons.size() - 1, reasons.size() == 2 ? "" : "s");
  return s + "; each layer's below";
}

}  // namespace

int run_eval(const EvalCommandOptions& opt, std::ostream& out, std::ostream& err) {
  (void)err;
  EvalOptions o;
  o.hf = opt.hf;
  o.data = opt.data;
  o.context = opt.context;
  o.windows = opt.windows;
  o.dtype = opt.dtype;
  o.device = opt.device;
  o.batch = opt.batch;
  // The FP8 settings: every --set applied to one config, recipe=a,b giving one each.
  RunConfig base;
  std::vector<std::string> recipes;
  // Only the fields the evaluation uses (FP8 in the forward pass, current scaling): any
  // other (window=16) would be taken and change nothing, so it is refused, named.
  static const std::vector<std::string> kEvalFields = {"recipe", "formats", "margin", "fprop_fp8"};
  for (const std::string& s : opt.overrides) {
    const std::string key = override_key(s);
    if (key.empty() || std::find(kEvalFields.begin(), kEvalFields.end(), key) != kEvalFields.end())
      continue;
    // A field of no config at all is named as unknown with eval's four, not with the
    // fifty-odd fields a training run takes.
    throw ConfigError(
        key, std::string(find_run_config_field(key) ? "not used by eval" : "unknown field") +
                 ", which takes only recipe, formats, margin and fprop_fp8 (the "
                 "forward pass in FP8, with current scaling)");
  }
  {
    RunConfig probe;  // a field given twice refused, before anything is evaluated
    std::vector<std::string> others;
    for (const std::string& s : opt.overrides)
      if (override_key(s) != "recipe") others.push_back(s);
    apply_overrides(probe, others);
    int recipe_sets = 0;
    for (const std::string& s : opt.overrides) recipe_sets += override_key(s) == "recipe";
    if (recipe_sets > 1)
      throw ConfigError("recipe", "given twice: give one list (recipe=tensorwise,rowwise)");
  }
  for (const std::string& s : opt.overrides) {
    if (override_key(s) == "recipe") {
      std::string list = s.substr(s.find('=') + 1);
      size_t at = 0;
      while (at <= list.size()) {
        const size_t comma = list.find(',', at);
        const std::string r =
            list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        RunConfig probe;
        apply_override(probe, "recipe=" + r);  // an unknown recipe refused by name
        recipes.push_back(r);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      continue;
    }
    apply_override(base, s);
  }
  if (recipes.empty()) recipes.push_back(std::string(float8_recipe_name(base.recipe)));
  for (const std::string& r : recipes) {
    RunConfig c = base;
    apply_override(c, "recipe=" + r);
    c.scaling = ScalingMode::Current;
    validate_run_config(c);
    o.fp8.push_back(c);
  }
  const EvalResult r = evaluate_checkpoint(o);
  if (opt.json) {
    nlohmann::json j;
    j["hf"] = opt.hf;
    j["data"] = opt.data;
    j["architecture"] = r.architecture;
    j["dtype"] = r.dtype;
    j["context"] = r.context;
    j["windows"] = r.windows;
    j["tokens"] = r.tokens;
    j["loss_high_precision"] = num(r.loss_high_precision);
    j["loss_fp8"] = nlohmann::json::object();
    j["recipes"] = nlohmann::json::array();
    for (const EvalFp8& e : r.fp8) {
      // A recipe no layer could take has no FP8 loss: null, not the high-precision one.
      const nlohmann::json loss = e.layers.empty() ? nlohmann::json(nullptr) : num(e.loss);
      j["loss_fp8"][e.recipe] = loss;
      nlohmann::json layers = nlohmann::json::array();
      for (const EvalLayer& l : e.layers)
        layers.push_back({{"layer", l.layer}, {"sqnr_db", num(l.sqnr_db)}});
      j["recipes"].push_back(
          {{"recipe", e.recipe},
           {"formats", e.formats},
           {"loss_fp8", loss},
           {"loss_delta",
            e.layers.empty() ? nlohmann::json(nullptr) : num(e.loss - r.loss_high_precision)},
           {"layers", layers},
           {"layers_fp8", e.layers.size()},
           {"layers_total", e.layers.size() + e.kept.size()},
           {"kept_high_precision", e.kept}});
    }
    out << dump(j, 2) << "\n";
    return 0;
  }
  out << fmt::format("{} ({}), {} window{} of {} tokens ({} tokens predicted)\n", opt.hf,
                     r.architecture, r.windows, r.windows == 1 ? "" : "s", r.context, r.tokens);
  out << fmt::format("{:<28} {:>10} {:>10}\n", "", "loss", "delta");
  out << fmt::format("{:<28} {:>10.5f} {:>10}\n", "high precision (" + r.dtype + ")",
                     r.loss_high_precision, "");
  // Each row says how many layers the recipe put in FP8, and why the others stayed in
  // high precision: a loss with 4 of 14 layers in FP8 is no figure of the whole model.
  for (const EvalFp8& e : r.fp8) {
    const std::string layers = eval_layers_text(e);
    if (e.layers.empty()) {  // every linear kept in high precision: no figure of FP8
      out << fmt::format("{:<28} {:>10} {:>10}  {}\n", "fp8 " + e.recipe + " " + e.formats, "-",
                         "-", layers);
      continue;
    }
    out << fmt::format("{:<28} {:>10.5f} {:>+10.5f}  {}\n", "fp8 " + e.recipe + " " + e.formats,
                       e.loss, e.loss - r.loss_high_precision, layers);
  }
  for (const EvalFp8& e : r.fp8) {
    out << "\noutput SQNR per layer, " << e.recipe << " " << e.formats << " (dB):\n";
    for (const EvalLayer& l : e.layers)
      out << fmt::format("  {:<48} {:>7.2f}\n", l.layer, l.sqnr_db);
    for (const std::string& k : e.kept) out << "  kept in high precision: " << k << "\n";
  }
  return 0;
}

namespace {
const CommandRegistrar kCommand{"eval", 100,
                                command_with<EvalCommandOptions>(add_eval_command, run_eval)};
}  // namespace

}  // namespace fp8wb::cli
