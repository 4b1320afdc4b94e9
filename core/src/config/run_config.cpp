#include "fp8wb/core/config/run_config.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

#include "config_json.h"
#include "fp8wb/core/config/run_config_fields.h"
#include "fp8wb/core/name_text.h"

namespace fp8wb {
namespace {

using nlohmann::json;

// A tensor's scaling as fp8wb inspect names it ("1x128"), given where a training recipe
// is asked for: the recipe that uses it, or that none does. Empty for other words.
std::string recipe_hint(const std::string& word) {
  const std::optional<ScalingKind> k = parse_scaling_kind(word);
  if (!k) return {};
  for (const Float8RecipeEntry& e : kFloat8Recipes) {
    if (e.activations == *k || e.weight == *k)
      return " (" + word + " is a tensor's scaling, as fp8wb inspect names it; the training " +
             "recipe with it is " + std::string(e.name) + ")";
  }
  return " (" + word + " is a tensor's scaling that fp8wb inspect measures; no training " +
         "recipe uses it)";
}

// " (delayed is a value of scaling: scaling=delayed)": a word given to one field that is a
// value of another (recipe=delayed), where there is one.
std::string other_field_hint(const RunConfigField& f, const std::string& word) {
  for (const RunConfigField& o : run_config_fields()) {
    if (o.key == f.key) continue;
    for (const std::string_view n : o.names)
      if (n == word)
        return " (" + word + " is a value of " + std::string(o.key) + ": " + std::string(o.key) +
               "=" + word + ")";
  }
  return {};
}

[[noreturn]] void fail(const std::string& key, const std::string& why) {
  throw ConfigError(key, why);
}

// A bad value as a message quotes it: at most 40 characters (values nest at most
// kMaxJsonDepth deep, so dumping them is bounded too).
std::string quote(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// A value of the wrong type, said with its type where the quote alone does not say it:
// null, true, the string "12", an array [1, 2], an object {"a": 1}.
std::string described(const json& v) {
  if (v.is_string()) return "the string " + quote(v);
  if (v.is_array()) return "an array " + quote(v);
  if (v.is_object()) return "an object " + quote(v);
  return quote(v);
}

std::string limit_text(double v) {
  return field_limit_text(v);
}

// Whether a field's value is at most its bound; integers compared as integers, as
// 2^53 + 1 is past a bound of 2^53 though it converts to 2^53 as a double.
bool at_most(const json& v, double max) {
  if (max < 9e18 && v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(max);
  if (max < 9e18 && v.is_number_integer()) return v.get<int64_t>() <= static_cast<int64_t>(max);
  return v.get<double>() <= max;
}

// nlohmann's message without its "[json.exception.out_of_range.406] " prefix.
std::string json_error(const json::exception& e) {
  const std::string m = e.what();
  const size_t at = m.find("] ");
  return at == std::string::npos ? m : m.substr(at + 2);
}

std::string quote_text(const std::string& t) {
  return t.size() > 40 ? t.substr(0, 37) + "..." : t;
}

// ": must be an integer in [lo, hi]" for an integer field with both bounds, else "".
std::string int_range_text(const std::string& key);

// A whole number too large for the field: said as out of range, with the range.
[[noreturn]] void out_of_range(const std::string& key, const json& v) {
  fail(key, quote(v) + " is out of range" + int_range_text(key));
}

int64_t as_int(const std::string& key, const json& v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    out_of_range(key, v);
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9e15)
      return static_cast<int64_t>(d);
    // 1e20: a whole number, only too large (every double this large is whole).
    if (std::isfinite(d) && d == std::floor(d)) out_of_range(key, v);
    fail(key, "expected an integer, got " + quote(v));
  }
  fail(key, "expected an integer, got " + described(v));
}

int as_int32(const std::string& key, const json& v) {
  const int64_t i = as_int(key, v);
  if (i < INT32_MIN || i > INT32_MAX) out_of_range(key, v);
  return static_cast<int>(i);
}

double as_double(const std::string& key, const json& v) {
  if (v.is_number()) return v.get<double>();
  // JSON has no NaN or infinities: written as strings they are still refused by name.
  if (v.is_string()) fail(key, "expected a number, got " + quote(v));
  fail(key, "expected a number, got " + described(v));
}

bool as_bool(const std::string& key, const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  fail(key, "expected true or false, got " + quote(v));
}

std::string as_string(const std::string& key, const json& v) {
  if (v.is_string()) return v.get<std::string>();
  fail(key, "expected a string, got " + quote(v));
}

// A field holding an enum: its name table.
constexpr const auto& names_of(ModelKind) {
  return kModelKinds;
}
constexpr const auto& names_of(Float8Recipe) {
  return kFloat8Recipes;
}
constexpr const auto& names_of(FormatPairing) {
  return kFormatPairings;
}
constexpr const auto& names_of(ScalingMode) {
  return kScalingModes;
}
constexpr const auto& names_of(AmaxAlgo) {
  return kAmaxAlgos;
}
constexpr const auto& names_of(OnNonfinite) {
  return kOnNonfinite;
}
constexpr const auto& names_of(ActivationDtype) {
  return kActivationDtypes;
}

json get_value(const RunConfig& c, const RunConfigField& f) {
  return std::visit(
      [&c](auto m) -> json {
        using V = std::decay_t<decltype(c.*m)>;
        if constexpr (std::is_enum_v<V>) {
          return std::string(table_name(names_of(V{}), c.*m));  // written as its name
        } else {
          return json(c.*m);
        }
      },
      f.member);
}

// Parses one field's value, once, where it comes in (its type, and an enum's names).
void set_value(RunConfig& c, const RunConfigField& f, const json& j) {
  const std::string k(f.key);
  std::visit(
      [&](auto m) {
        using V = std::decay_t<decltype(c.*m)>;
        if constexpr (std::is_same_v<V, std::string>) {
          c.*m = as_string(k, j);
        } else if constexpr (std::is_same_v<V, bool>) {
          c.*m = as_bool(k, j);
        } else if constexpr (std::is_same_v<V, int>) {
          c.*m = as_int32(k, j);
        } else if constexpr (std::is_same_v<V, int64_t>) {
          c.*m = as_int(k, j);
        } else if constexpr (std::is_same_v<V, uint64_t>) {
          const int64_t s = as_int(k, j);
          if (s < 0) fail(k, "must be >= 0, not " + std::to_string(s));
          c.*m = static_cast<uint64_t>(s);
        } else if constexpr (std::is_same_v<V, double>) {
          c.*m = as_double(k, j);
        } else {
          const std::string s = as_string(k, j);
          const std::optional<V> e = parse_table_name(names_of(V{}), s);
          if (!e)
            fail(k, "\"" + quote_text(s) + "\" is not one of " + field_names_text(f) +
                        (k == std::string("recipe") ? recipe_hint(s) : std::string()) +
                        other_field_hint(f, s));
          c.*m = *e;
        }
      },
      f.member);
  // A checkpoint is a llama model's: hf sets the model (a model named after it, as a
  // config file's keys are read in order, is checked in validate_run_config).
  if (f.key == "hf" && !c.hf.empty()) c.model = ModelKind::Llama;
}

const RunConfigField* find_field(const std::string& key) {
  return find_run_config_field(key);
}

// The row of a key the table has (a key named in this file).
const RunConfigField& field(const char* key) {
  const RunConfigField* f = find_run_config_field(key);
  if (!f) throw std::logic_error(std::string("no config field ") + key);
  return *f;
}

std::string int_range_text(const std::string& key) {
  const RunConfigField* f = find_field(key);
  if (!f || f->type != FieldType::Integer || !f->has_min() || !f->has_max()) return "";
  return ": must be an integer in [" + limit_text(f->min) + ", " + limit_text(f->max) + "]";
}

std::string key_list() {
  std::string s;
  for (const RunConfigField& f : run_config_fields()) (s += s.empty() ? "" : ", ") += f.key;
  return s;
}

void set_key(RunConfig& c, const std::string& key, const json& v) {
  const RunConfigField* f = find_field(key);
  if (!f) fail(key, "unknown field (known: " + key_list() + ")");
  set_value(c, *f, v);
}

// An integer field at least its row's minimum.
void at_least(const char* key, double v) {
  const double lo = field(key).min;
  if (!(v >= lo)) fail(key, "must be >= " + limit_text(lo) + ", not " + limit_text(v));
}

// An integer field within its row's bounds.
void in_range(const char* key, double v) {
  if (!(v >= field(key).min && v <= field(key).max)) fail(key, int_range_text(key).substr(2));
}

}  // namespace

ConfigError::ConfigError(std::string key, std::string why)
    : std::invalid_argument(key.empty() ? why : "config field '" + key + "': " + why),
      field(std::move(key)),
      reason(std::move(why)) {}

ConfigError::ConfigError(std::string key, std::string why, const std::string& message)
    : std::invalid_argument(message), field(std::move(key)), reason(std::move(why)) {}

std::string_view model_kind_name(ModelKind m) {
  return table_name(kModelKinds, m);
}

const std::vector<std::string>& run_config_keys() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> v;
    for (const RunConfigField& f : run_config_fields()) v.emplace_back(f.key);
    return v;
  }();
  return k;
}

void check_json_nesting(std::string_view text, const std::string& what) {
  if (text.size() > kMaxConfigBytes) {
    throw ConfigError("", what + " is " + std::to_string(text.size()) +
                              " bytes, over the limit of " + std::to_string(kMaxConfigBytes));
  }
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > kMaxJsonDepth) {
        throw ConfigError("",
                          what + " nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      }
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
}

RunConfig parse_run_config(std::string_view json_text) {
  check_json_nesting(json_text, "the config");
  json j;
  std::string key;  // the top-level field being read, for a number out of range
  const json::parser_callback_t track = [&key](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      key = parsed.get<std::string>();
    }
    return true;
  };
  try {
    j = parse_config_json(json_text, track);
  } catch (const json::out_of_range& e) {
    if (!key.empty()) fail(key, "a number out of range (" + json_error(e) + ")");
    throw ConfigError("", "config has a number out of range: " + json_error(e));
  } catch (const json::exception& e) {
    throw ConfigError("", "config is not valid JSON: " + json_error(e));
  } catch (const std::invalid_argument& e) {
    throw ConfigError("", std::string("config ") + e.what());
  }
  if (!j.is_object()) throw ConfigError("", "config must be a JSON object of fields");
  RunConfig c;
  for (const auto& [k, v] : j.items()) set_key(c, k, v);
  validate_run_config(c);
  return c;
}

RunConfig read_run_config_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw ConfigError("", "cannot read config file " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISFIFO(st.st_mode)  ? "a FIFO"
                       : S_ISDIR(st.st_mode) ? "a folder"
                       : S_ISCHR(st.st_mode) ? "a character device"
                                             : "not a plain file";
    throw ConfigError("", "config file " + path + " is " + kind + ", not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("", "cannot read config file " + path);
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) {
    throw ConfigError("", "config file " + path + " is over the limit of " +
                              std::to_string(kMaxConfigBytes) + " bytes");
  }
  try {
    return parse_run_config(text);
  } catch (const ConfigError& e) {
    throw ConfigError(e.field, e.reason, path + ": " + e.what());
  }
}

std::string override_key(std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) return {};
  std::string_view k = assignment.substr(0, eq);
  while (!k.empty() && (k.front() == ' ' || k.front() == '\t')) k.remove_prefix(1);
  while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.remove_suffix(1);
  return std::string(k);
}

void apply_overrides(RunConfig& c, const std::vector<std::string>& assignments) {
  for (size_t i = 0; i < assignments.size(); ++i) {
    const std::string key = override_key(assignments[i]);
    if (key.empty()) continue;  // apply_override() says what is wrong with it
    for (size_t j = i + 1; j < assignments.size(); ++j) {
      if (override_key(assignments[j]) == key)
        fail(quote_text(key), "given twice (" + quote_text(assignments[i]) + ", then " +
                                  quote_text(assignments[j]) + "): give it once");
    }
  }
  for (const std::string& a : assignments) apply_override(c, a);
}

void apply_override(RunConfig& c, std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw ConfigError("", "override '" + quote_text(std::string(assignment)) +
                              "' is not key=value (e.g. window=1024)");
  }
  // Spaces around the key and the value are no part of them ("margin = 2", as a shell
  // quote keeps them).
  const auto trimmed = [](std::string_view v) {
    const size_t b = v.find_first_not_of(" \t");
    if (b == std::string_view::npos) return std::string();
    return std::string(v.substr(b, v.find_last_not_of(" \t") - b + 1));
  };
  const std::string key = trimmed(assignment.substr(0, eq));
  if (key.empty()) {
    throw ConfigError("", "override '" + quote_text(std::string(assignment)) +
                              "' is not key=value (e.g. window=1024)");
  }
  if (key.size() > 64 || !find_field(key)) {
    fail(quote_text(key), "unknown field (known: " + key_list() + ")");
  }
  std::string text = trimmed(assignment.substr(eq + 1));
  // Blanks alone stay as given: the field's own check names them ("is blank").
  if (text.empty()) text = std::string(assignment.substr(eq + 1));
  try {
    check_json_nesting(text, "the value");
  } catch (const std::invalid_argument& e) {
    fail(key, e.what());
  }
  json v;
  try {
    v = parse_config_json(text);  // a key given twice is refused, as in a config file
  } catch (const json::out_of_range&) {
    fail(key, quote_text(text) + " is out of range" + int_range_text(key));
  } catch (const std::invalid_argument& e) {
    if (json::accept(text)) fail(key, e.what());  // JSON, but a key in it given twice
    v = text;                                     // a bare word: a string
  } catch (const json::exception&) {
    v = text;
  }
  if (text == "nan" || text == "NaN" || text == "inf" || text == "-inf") {
    fail(key, "expected a finite number, got " + text);
  }
  set_key(c, key, v);
}

void validate_run_config(const RunConfig& c) {
  at_least("d_model", c.d_model);
  at_least("layers", c.layers);
  at_least("heads", c.heads);
  if (c.d_model % c.heads != 0) {
    fail("heads",
         std::to_string(c.heads) + " does not divide d_model " + std::to_string(c.d_model));
  }
  at_least("context", c.context);
  at_least("intermediate", c.intermediate);
  at_least("kv_heads", c.kv_heads);
  at_least("vocab", c.vocab);
  if (!std::isfinite(c.rope_theta) || c.rope_theta <= 1)
    fail("rope_theta", "must be a finite number > 1, not " + json(c.rope_theta).dump());
  if (!std::isfinite(c.norm_eps) || c.norm_eps <= 0 || c.norm_eps > 1)
    fail("norm_eps", "must be a number in (0, 1], not " + json(c.norm_eps).dump());
  if (c.model == ModelKind::Llama) {
    if (c.heads % c.kv_heads != 0) {
      fail("kv_heads", std::to_string(c.kv_heads) + " does not divide heads " +
                           std::to_string(c.heads) +
                           " (each key/value head serves an equal group of query heads)");
    }
    if (c.d_model % c.heads == 0 && (c.d_model / c.heads) % 2 != 0) {
      fail("heads", "d_model " + std::to_string(c.d_model) + " / heads " + std::to_string(c.heads) +
                        " = " + std::to_string(c.d_model / c.heads) +
                        ": the rotary embedding needs an even head size");
    }
  } else if (c.smooth_swiglu) {
    fail("smooth_swiglu", "is the llama's (its SwiGLU's down projection): set model=llama");
  } else if (!c.hf.empty()) {
    fail("hf",
         "a Hugging Face checkpoint is a llama model's: set model=llama (or leave "
         "model out: hf sets it)");
  }
  at_least("eval_interval", c.eval_interval);
  if (c.model == ModelKind::Mlp && !c.data.empty())
    fail("data", "token files are for the gpt and llama models; the mlp's data is synthetic");
  at_least("width", c.width);
  at_least("depth", c.depth);
  at_least("features", c.features);
  at_least("outlier_channels", c.outlier_channels);
  if (c.outlier_channels > c.features) {
    fail("outlier_channels",
         std::to_string(c.outlier_channels) + " exceeds features " + std::to_string(c.features));
  }
  if (!std::isfinite(c.outlier_scale) || c.outlier_scale <= 0)
    fail("outlier_scale", "must be a positive finite number");
  if (!std::isfinite(c.target_tail) || c.target_tail <= 0)
    fail("target_tail", "must be a positive finite number (Student-t degrees of freedom)");
  if (!std::isfinite(c.drift) || c.drift < 0 || c.drift > 30)
    fail("drift", "must be in [0, 30] (powers of two)");
  at_least("drift_period", c.drift_period);
  at_least("batch", c.batch);
  if (c.steps < 1) fail("steps", "must be >= 1, not " + std::to_string(c.steps));
  if (!std::isfinite(c.lr) || c.lr <= 0 || c.lr > 10)
    fail("lr", "must be a finite number in (0, 10], not " + json(c.lr).dump());
  at_least("warmup", c.warmup);
  if (!(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1)) fail("min_lr_ratio", "must be in [0, 1]");
  if (!std::isfinite(c.weight_decay) || c.weight_decay < 0) fail("weight_decay", "must be >= 0");
  if (!std::isfinite(c.grad_clip) || c.grad_clip < 0) fail("grad_clip", "must be >= 0 (0: off)");
  if (c.device != "cpu" && c.device != "cuda" && c.device.rfind("cuda:", 0) != 0) {
    fail("device", "\"" + quote_text(c.device) + "\" is not one of cpu, cuda, cuda:N");
  }
  if (c.device.rfind("cuda:", 0) == 0) {
    const std::string n = c.device.substr(5);
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 3)
      fail("device", "\"" + quote_text(c.device) + "\": N in cuda:N must be a device number");
  }
  if (c.scaling == ScalingMode::Delayed && c.recipe != Float8Recipe::Tensorwise && c.fp8) {
    fail("scaling", "delayed scaling is tensorwise; recipe \"" +
                        std::string(float8_recipe_name(c.recipe)) + "\" needs scaling=current");
  }
  in_range("margin", c.margin);
  in_range("window", c.window);
  at_least("stats_interval", c.stats_interval);
  at_least("sqnr_interval", c.sqnr_interval);
  at_least("log_interval", c.log_interval);
  at_least("rank_timeout", c.rank_timeout);
  if (c.name.empty()) fail("name", "must not be empty");
  // A blank name shows as nothing in lists; bytes that are not UTF-8 cannot be shown; a NUL
  // would cut the name short; a tab or line break would break the lists' columns.
  if (const std::string why = name_problem(c.name); !why.empty()) fail("name", why);
  for (const RunConfigField& f : run_config_fields()) {
    if (!f.has_max()) continue;
    const std::string key(f.key);
    const json v = get_value(c, f);
    if (v.is_string()) {
      const size_t n = v.get_ref<const std::string&>().size();
      if (static_cast<double>(n) > f.max) {
        fail(key, "is " + std::to_string(n) + " characters long, over the limit of " +
                      limit_text(f.max));
      }
    } else if (v.is_number() && !at_most(v, f.max)) {
      fail(key, "must be at most " + limit_text(f.max) + ", not " + quote(v));
    }
  }
  check_run_memory(c);
}

std::string without_backtrace(std::string_view message) {
  std::string m(message);
  for (const char* marker : {"Exception raised from ", "\nframe #"}) {
    const size_t at = m.find(marker);
    if (at != std::string::npos) m.erase(at);
  }
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

std::string run_config_json(const RunConfig& c) {
  json j = json::object();
  for (const RunConfigField& f : run_config_fields()) j[std::string(f.key)] = get_value(c, f);
  return j.dump(2, ' ', false, json::error_handler_t::replace);  // a name not UTF-8
}

Float8LinearConfig float8_config_of(const RunConfig& c) {
  Float8LinearConfig f;
  const FormatPairingEntry& formats = table_entry(kFormatPairings, c.formats);
  f.input.format = formats.input;
  f.weight.format = formats.weight;
  f.grad_output.format = formats.grad_output;
  const Float8RecipeEntry& recipe = table_entry(kFloat8Recipes, c.recipe);
  f.input.kind = recipe.activations;
  f.weight.kind = recipe.weight;
  f.grad_output.kind = recipe.activations;
  for (QuantRecipe* r : {&f.input, &f.weight, &f.grad_output}) r->margin = c.margin;
  f.fprop_fp8 = c.fprop_fp8;
  f.dgrad_fp8 = c.dgrad_fp8;
  f.wgrad_fp8 = c.wgrad_fp8;
  f.stats_interval = c.stats_interval;
  f.sqnr_interval = c.sqnr_interval;
  f.final_step = c.steps - 1;
  f.delayed = c.scaling == ScalingMode::Delayed;
  f.delayed_scaling.window = c.window;
  f.delayed_scaling.margin = c.margin;
  f.delayed_scaling.algo = c.amax_algo;
  return f;
}

}  // namespace fp8wb
