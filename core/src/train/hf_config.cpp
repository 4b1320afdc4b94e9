// A Hugging Face checkpoint's config.json as the engine's Llama reads it (run_config.h:
// read_hf_config(), resolve_hf_config()). Plain C++, no torch.
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "fp8wb/core/checkpoint/file_io.h"
#include "fp8wb/core/checkpoint/open_checkpoint.h"
#include "fp8wb/core/config/run_config.h"

namespace fp8wb {
namespace {

using nlohmann::json;

constexpr const char* kArchitectures[] = {"LlamaForCausalLM", "MistralForCausalLM",
                                          "Qwen2ForCausalLM"};

[[noreturn]] void fail(const std::string& why) {
  throw ConfigError("hf", why);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A positive integer field of config.json; `fallback` where it is absent (0: required).
int int_field(const json& j, const std::string& file, const char* key, int fallback = 0) {
  if (!j.contains(key) || j[key].is_null()) {
    if (fallback > 0) return fallback;
    fail(file + " has no '" + key + "'");
  }
  const json& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 30))
    fail(file + ": '" + key + "' must be a positive integer, not " + v.dump());
  return static_cast<int>(v.get<int64_t>());
}

double number_field(const json& j, const std::string& file, const char* key, double fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const json& v = j[key];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
    fail(file + ": '" + key + "' must be a positive number, not " + v.dump());
  return v.get<double>();
}

bool bool_field(const json& j, const std::string& file, const char* key, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) fail(file + ": '" + key + "' must be true or false");
  return j[key].get<bool>();
}

}  // namespace

HfModelConfig read_hf_config(const std::string& dir) {
  struct stat st {};
  if (dir.empty()) fail("no folder given");
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(dir + " is not a folder (a Hugging Face checkpoint's: config.json, model.safetensors)");
  const std::string file = dir + "/config.json";
  std::string text;
  // A folder of model folders (llama_reference.py's): the subfolders that hold a model
  // named, as `fp8wb inspect DIR` names them, rather than a missing config.json.
  if (struct stat cs{}; stat(file.c_str(), &cs) != 0) {
    if (const std::string models = models_in_subfolders(dir); !models.empty()) fail(models);
  }
  try {
    text = read_regular_file(file, size_t{1} << 20);
  } catch (const FileError& e) {
    fail(std::string("cannot read its config.json: ") + e.what());
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception&) {
    fail(file + " is not valid JSON");
  }
  if (!j.is_object()) fail(file + " is not a JSON object");
  HfModelConfig h;
  if (!j.contains("architectures") || !j["architectures"].is_array() ||
      j["architectures"].empty() || !j["architectures"][0].is_string()) {
    fail(file + " names no architecture ('architectures'): the engine takes " +
         "LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM");
  }
  h.architecture = j["architectures"][0].get<std::string>();
  bool known = false;
  for (const char* a : kArchitectures) known = known || h.architecture == a;
  if (!known) {
    fail(file + ": architecture '" + h.architecture.substr(0, 60) +
         "' is not one the engine's llama model takes (LlamaForCausalLM, MistralForCausalLM, "
         "Qwen2ForCausalLM)");
  }
  h.hidden_size = int_field(j, file, "hidden_size");
  h.intermediate_size = int_field(j, file, "intermediate_size");
  h.layers = int_field(j, file, "num_hidden_layers");
  h.heads = int_field(j, file, "num_attention_heads");
  h.kv_heads = int_field(j, file, "num_key_value_heads", h.heads);
  h.vocab_size = int_field(j, file, "vocab_size");
  h.max_position_embeddings = int_field(j, file, "max_position_embeddings", 2048);
  h.rope_theta = number_field(j, file, "rope_theta", 1e4);
  h.rms_norm_eps = number_field(j, file, "rms_norm_eps", 1e-6);
  h.tie_word_embeddings = bool_field(j, file, "tie_word_embeddings", false);
  if (j.contains("torch_dtype") && j["torch_dtype"].is_string())
    h.torch_dtype = j["torch_dtype"].get<std::string>();
  if (j.contains("hidden_act") && j["hidden_act"] != "silu") {
    fail(file + ": hidden_act " + j["hidden_act"].dump() +
         " is not the SwiGLU's silu, the only one the engine computes");
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    fail(file + ": rope_scaling " + j["rope_scaling"].dump().substr(0, 80) +
         " is not taken (the engine's rotary embedding is the unscaled one)");
  }
  if (h.hidden_size % h.heads != 0)
    fail(file + ": num_attention_heads does not divide hidden_size");
  if (j.contains("head_dim") && !j["head_dim"].is_null() &&
      j["head_dim"] != json(h.hidden_size / h.heads)) {
    fail(file + ": head_dim " + j["head_dim"].dump() + " is not hidden_size / " +
         "num_attention_heads = " + std::to_string(h.hidden_size / h.heads) +
         ", the only head size the engine takes");
  }
  if (h.heads % h.kv_heads != 0)
    fail(file + ": num_key_value_heads does not divide num_attention_heads");
  if (h.architecture == "Qwen2ForCausalLM") {
    h.qkv_bias = true;
    if (bool_field(j, file, "use_sliding_window", false))
      h.sliding_window = int_field(j, file, "sliding_window", 1 << 30);
  } else {
    for (const char* k : {"attention_bias", "mlp_bias"}) {
      if (bool_field(j, file, k, false))
        fail(file + ": " + k + " is true: the engine's llama has no such biases");
    }
    if (h.architecture == "MistralForCausalLM" && j.contains("sliding_window") &&
        !j["sliding_window"].is_null())
      h.sliding_window = int_field(j, file, "sliding_window");
  }
  if (is_file(dir + "/model.safetensors")) {
    h.weights = dir + "/model.safetensors";
  } else if (is_file(dir + "/model.safetensors.index.json")) {
    h.weights = dir + "/model.safetensors.index.json";
  } else {
    fail(dir + " has neither model.safetensors nor model.safetensors.index.json");
  }
  return h;
}

void resolve_hf_config(RunConfig& c) {
  if (c.hf.empty()) return;
  const HfModelConfig h = read_hf_config(c.hf);
  c.model = ModelKind::Llama;
  c.d_model = h.hidden_size;
  c.intermediate = h.intermediate_size;
  c.layers = h.layers;
  c.heads = h.heads;
  c.kv_heads = h.kv_heads;
  c.rope_theta = h.rope_theta;
  c.norm_eps = h.rms_norm_eps;
  c.tie_embeddings = h.tie_word_embeddings;
  c.vocab = h.vocab_size;
  if (h.sliding_window > 0 && c.context > h.sliding_window) {
    fail(c.hf + ": context " + std::to_string(c.context) + " is longer than the model's " +
         "sliding window " + std::to_string(h.sliding_window) +
         ", which the engine's attention does not apply: use context <= " +
         std::to_string(h.sliding_window));
  }
}

std::string hf_config_json(const RunConfig& c) {
  if (!c.hf.empty()) {
    try {
      return read_regular_file(c.hf + "/config.json", size_t{1} << 20);
    } catch (const FileError& e) {
      fail(std::string("cannot read its config.json again: ") + e.what());
    }
  }
  json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = c.d_model;
  j["intermediate_size"] = c.intermediate;
  j["num_hidden_layers"] = c.layers;
  j["num_attention_heads"] = c.heads;
  j["num_key_value_heads"] = c.kv_heads;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.context;
  j["rope_theta"] = c.rope_theta;
  j["rms_norm_eps"] = c.norm_eps;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["vocab_size"] = c.vocab;
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["torch_dtype"] = "float32";
  return j.dump(2) + "\n";
}

}  // namespace fp8wb
