#include "fp8wb/core/run_config.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <stdexcept>

#include "config_json.h"
#include "fp8wb/core/name_text.h"

namespace fp8wb {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& key, const std::string& why) {
  throw std::invalid_argument("config field '" + key + "': " + why);
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

// 65536, 1e+30: a bound as people write it.
std::string limit_text(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e16) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
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

struct Field {
  std::function<void(RunConfig&, const json&)> set;
  std::function<json(const RunConfig&)> get;
  // The documented upper bound of a number (docs/architecture.md, "Limits"); strings:
  // their length. NaN: none beyond the checks in validate_run_config.
  double max = std::nan("");
  // An integer field's least value (validate_run_config checks it), for messages.
  double min = std::nan("");
};

// A field holding an enum, written as a name of its table: parsed here, once.
template <class T, size_t N, class E>
std::pair<std::string, Field> named_field(const char* k, E RunConfig::*m, const T (&table)[N]) {
  const T(*t)[N] = &table;
  return {k,
          {[m, k, t](RunConfig& c, const json& j) {
             const std::string s = as_string(k, j);
             const auto e = parse_table_name(*t, s);
             if (!e) fail(k, "\"" + quote_text(s) + "\" is not one of " + table_names(*t));
             c.*m = *e;
           },
           [m, t](const RunConfig& c) { return json(std::string(table_name(*t, c.*m))); }}};
}

const std::vector<std::pair<std::string, Field>>& fields() {
  static const std::vector<std::pair<std::string, Field>> f = [] {
    std::vector<std::pair<std::string, Field>> v;
    auto str = [&](const char* k, std::string RunConfig::*m) {
      v.push_back({k,
                   {[m, k](RunConfig& c, const json& j) { c.*m = as_string(k, j); },
                    [m](const RunConfig& c) { return json(c.*m); }}});
    };
    auto i32 = [&](const char* k, int RunConfig::*m) {
      v.push_back({k,
                   {[m, k](RunConfig& c, const json& j) { c.*m = as_int32(k, j); },
                    [m](const RunConfig& c) { return json(c.*m); }}});
    };
    auto dbl = [&](const char* k, double RunConfig::*m) {
      v.push_back({k,
                   {[m, k](RunConfig& c, const json& j) { c.*m = as_double(k, j); },
                    [m](const RunConfig& c) { return json(c.*m); }}});
    };
    auto bln = [&](const char* k, bool RunConfig::*m) {
      v.push_back({k,
                   {[m, k](RunConfig& c, const json& j) { c.*m = as_bool(k, j); },
                    [m](const RunConfig& c) { return json(c.*m); }}});
    };
    str("name", &RunConfig::name);
    v.push_back({"model",
                 {[](RunConfig& c, const json& j) {
                    const std::string s = as_string("model", j);
                    if (s == "gpt") {
                      c.model = ModelKind::Gpt;
                    } else if (s == "mlp") {
                      c.model = ModelKind::Mlp;
                    } else if (s == "llama") {
                      c.model = ModelKind::Llama;
                    } else {
                      fail("model", "\"" + quote_text(s) + "\" is not one of gpt, mlp, llama");
                    }
                  },
                  [](const RunConfig& c) { return json(std::string(model_kind_name(c.model))); }}});
    i32("d_model", &RunConfig::d_model);
    i32("layers", &RunConfig::layers);
    i32("heads", &RunConfig::heads);
    i32("context", &RunConfig::context);
    i32("intermediate", &RunConfig::intermediate);
    i32("kv_heads", &RunConfig::kv_heads);
    dbl("rope_theta", &RunConfig::rope_theta);
    dbl("norm_eps", &RunConfig::norm_eps);
    bln("tie_embeddings", &RunConfig::tie_embeddings);
    i32("vocab", &RunConfig::vocab);
    bln("smooth_swiglu", &RunConfig::smooth_swiglu);
    // A checkpoint is a llama model's: hf sets the model (a model named after it, as a
    // config file's keys are read in order, is checked in validate_run_config).
    v.push_back({"hf",
                 {[](RunConfig& c, const json& j) {
                    c.hf = as_string("hf", j);
                    if (!c.hf.empty()) c.model = ModelKind::Llama;
                  },
                  [](const RunConfig& c) { return json(c.hf); }}});
    str("data", &RunConfig::data);
    i32("eval_interval", &RunConfig::eval_interval);
    i32("width", &RunConfig::width);
    i32("depth", &RunConfig::depth);
    i32("features", &RunConfig::features);
    i32("outlier_channels", &RunConfig::outlier_channels);
    dbl("outlier_scale", &RunConfig::outlier_scale);
    dbl("target_tail", &RunConfig::target_tail);
    dbl("drift", &RunConfig::drift);
    i32("drift_period", &RunConfig::drift_period);
    i32("batch", &RunConfig::batch);
    v.push_back({"steps",
                 {[](RunConfig& c, const json& j) { c.steps = as_int("steps", j); },
                  [](const RunConfig& c) { return json(c.steps); }}});
    dbl("lr", &RunConfig::lr);
    i32("warmup", &RunConfig::warmup);
    dbl("min_lr_ratio", &RunConfig::min_lr_ratio);
    dbl("weight_decay", &RunConfig::weight_decay);
    dbl("grad_clip", &RunConfig::grad_clip);
    v.push_back({"seed",
                 {[](RunConfig& c, const json& j) {
                    const int64_t s = as_int("seed", j);
                    if (s < 0) fail("seed", "must be >= 0, not " + std::to_string(s));
                    c.seed = static_cast<uint64_t>(s);
                  },
                  [](const RunConfig& c) { return json(c.seed); }}});
    str("device", &RunConfig::device);
    str("dtype", &RunConfig::dtype);
    bln("fp8", &RunConfig::fp8);
    v.push_back(named_field("recipe", &RunConfig::recipe, kFloat8Recipes));
    v.push_back(named_field("formats", &RunConfig::formats, kFormatPairings));
    str("scaling", &RunConfig::scaling);
    i32("margin", &RunConfig::margin);
    i32("window", &RunConfig::window);
    str("amax_algo", &RunConfig::amax_algo);
    bln("fprop_fp8", &RunConfig::fprop_fp8);
    bln("dgrad_fp8", &RunConfig::dgrad_fp8);
    bln("wgrad_fp8", &RunConfig::wgrad_fp8);
    i32("stats_interval", &RunConfig::stats_interval);
    i32("sqnr_interval", &RunConfig::sqnr_interval);
    bln("reference", &RunConfig::reference);
    str("on_nonfinite", &RunConfig::on_nonfinite);
    i32("log_interval", &RunConfig::log_interval);
    str("weights", &RunConfig::weights);
    bln("amax_reduction", &RunConfig::amax_reduction);
    i32("rank_timeout", &RunConfig::rank_timeout);
    // Upper bounds: far above what the workbench's models are for, low enough that no
    // single field takes the machine down (the memory estimate catches combinations).
    const std::pair<const char*, double> bounds[] = {{"name", 200},
                                                     {"d_model", 8192},
                                                     {"layers", 256},
                                                     {"heads", 256},
                                                     {"context", 8192},
                                                     {"intermediate", 131072},
                                                     {"kv_heads", 256},
                                                     {"rope_theta", 1e12},
                                                     {"norm_eps", 1},
                                                     {"vocab", 1048576},
                                                     {"hf", 4096},
                                                     {"data", 4096},
                                                     {"eval_interval", 1e9},
                                                     {"width", 65536},
                                                     {"depth", 256},
                                                     {"features", 65536},
                                                     {"outlier_channels", 65536},
                                                     {"outlier_scale", 1e30},
                                                     {"target_tail", 1e6},
                                                     {"drift", 30},
                                                     {"drift_period", 1e9},
                                                     {"batch", 65536},
                                                     {"steps", 1e9},
                                                     {"lr", 10},
                                                     {"warmup", 1e9},
                                                     {"min_lr_ratio", 1},
                                                     {"weight_decay", 1e3},
                                                     {"grad_clip", 1e12},
                                                     {"seed", 9007199254740992.0},
                                                     {"margin", 64},
                                                     {"window", 65536},
                                                     {"stats_interval", 1e9},
                                                     {"sqnr_interval", 1e9},
                                                     {"log_interval", 1e9},
                                                     {"weights", 4096},
                                                     {"rank_timeout", 86400},
                                                     {"device", 16},
                                                     {"dtype", 16},
                                                     {"recipe", 16},
                                                     {"formats", 16},
                                                     {"scaling", 16},
                                                     {"amax_algo", 16},
                                                     {"on_nonfinite", 16}};
    for (const auto& [k, max] : bounds) {
      for (auto& [key, f] : v) {
        if (key == k) f.max = max;
      }
    }
    // The integer fields' least values, as validate_run_config refuses below them.
    const std::pair<const char*, double> minima[] = {
        {"d_model", 8},       {"layers", 1},       {"heads", 1},       {"context", 2},
        {"intermediate", 1},  {"kv_heads", 1},     {"vocab", 0},       {"eval_interval", 0},
        {"width", 1},         {"depth", 1},        {"features", 1},    {"outlier_channels", 0},
        {"drift_period", 2},  {"batch", 1},        {"steps", 1},       {"warmup", 0},
        {"seed", 0},          {"margin", -64},     {"window", 1},      {"stats_interval", 0},
        {"sqnr_interval", 0}, {"log_interval", 1}, {"rank_timeout", 1}};
    for (const auto& [k, min] : minima) {
      for (auto& [name, field] : v) {
        if (name == k) field.min = min;
      }
    }
    return v;
  }();
  return f;
}

const Field* find_field(const std::string& key) {
  for (const auto& [k, f] : fields()) {
    if (k == key) return &f;
  }
  return nullptr;
}

std::string int_range_text(const std::string& key) {
  const Field* f = find_field(key);
  if (!f || std::isnan(f->min) || std::isnan(f->max)) return "";
  return ": must be an integer in [" + limit_text(f->min) + ", " + limit_text(f->max) + "]";
}

std::string key_list() {
  std::string s;
  for (const auto& [k, f] : fields()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

void set_key(RunConfig& c, const std::string& key, const json& v) {
  const Field* f = find_field(key);
  if (!f) fail(key, "unknown field (known: " + key_list() + ")");
  f->set(c, v);
}

void one_of(const std::string& key, const std::string& v, std::initializer_list<const char*> ok) {
  std::string list;
  for (const char* o : ok) {
    if (v == o) return;
    list += (list.empty() ? "" : ", ") + std::string(o);
  }
  fail(key, "\"" + quote_text(v) + "\" is not one of " + list);
}

void at_least(const std::string& key, double v, double lo) {
  if (!(v >= lo)) fail(key, "must be >= " + limit_text(lo) + ", not " + limit_text(v));
}

}  // namespace

std::string_view model_kind_name(ModelKind m) {
  switch (m) {
    case ModelKind::Gpt: return "gpt";
    case ModelKind::Llama: return "llama";
    case ModelKind::Mlp: break;
  }
  return "mlp";
}

const std::vector<std::string>& run_config_keys() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> v;
    for (const auto& [key, f] : fields()) v.push_back(key);
    return v;
  }();
  return k;
}

void check_json_nesting(std::string_view text, const std::string& what) {
  if (text.size() > kMaxConfigBytes) {
    throw std::invalid_argument(what + " is " + std::to_string(text.size()) +
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
        throw std::invalid_argument(what + " nests deeper than " + std::to_string(kMaxJsonDepth) +
                                    " levels");
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
    throw std::invalid_argument("config has a number out of range: " + json_error(e));
  } catch (const json::exception& e) {
    throw std::invalid_argument("config is not valid JSON: " + json_error(e));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("config ") + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument("config must be a JSON object of fields");
  RunConfig c;
  for (const auto& [key, v] : j.items()) set_key(c, key, v);
  validate_run_config(c);
  return c;
}

RunConfig read_run_config_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw std::invalid_argument("cannot read config file " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISFIFO(st.st_mode)  ? "a FIFO"
                       : S_ISDIR(st.st_mode) ? "a folder"
                       : S_ISCHR(st.st_mode) ? "a character device"
                                             : "not a plain file";
    throw std::invalid_argument("config file " + path + " is " + kind + ", not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read config file " + path);
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) {
    throw std::invalid_argument("config file " + path + " is over the limit of " +
                                std::to_string(kMaxConfigBytes) + " bytes");
  }
  try {
    return parse_run_config(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

void apply_override(RunConfig& c, std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw std::invalid_argument("override '" + quote_text(std::string(assignment)) +
                                "' is not key=value (e.g. window=1024)");
  }
  const std::string key(assignment.substr(0, eq));
  if (key.size() > 64 || !find_field(key)) {
    fail(quote_text(key), "unknown field (known: " + key_list() + ")");
  }
  const std::string text(assignment.substr(eq + 1));
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
  at_least("d_model", c.d_model, 8);
  at_least("layers", c.layers, 1);
  at_least("heads", c.heads, 1);
  if (c.d_model % c.heads != 0) {
    fail("heads",
         std::to_string(c.heads) + " does not divide d_model " + std::to_string(c.d_model));
  }
  at_least("context", c.context, 2);
  at_least("intermediate", c.intermediate, 1);
  at_least("kv_heads", c.kv_heads, 1);
  at_least("vocab", c.vocab, 0);
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
  at_least("eval_interval", c.eval_interval, 0);
  if (c.model == ModelKind::Mlp && !c.data.empty())
    fail("data", "token files are for the gpt and llama models; the mlp's data is synthetic");
  at_least("width", c.width, 1);
  at_least("depth", c.depth, 1);
  at_least("features", c.features, 1);
  at_least("outlier_channels", c.outlier_channels, 0);
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
  at_least("drift_period", c.drift_period, 2);
  at_least("batch", c.batch, 1);
  if (c.steps < 1) fail("steps", "must be >= 1, not " + std::to_string(c.steps));
  if (!std::isfinite(c.lr) || c.lr <= 0 || c.lr > 10)
    fail("lr", "must be a finite number in (0, 10], not " + json(c.lr).dump());
  at_least("warmup", c.warmup, 0);
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
  one_of("dtype", c.dtype, {"fp32", "bf16"});
  one_of("scaling", c.scaling, {"delayed", "current"});
  if (c.scaling == "delayed" && c.recipe != Float8Recipe::Tensorwise && c.fp8) {
    fail("scaling", "delayed scaling is tensorwise; recipe \"" +
                        std::string(float8_recipe_name(c.recipe)) + "\" needs scaling=current");
  }
  if (c.margin < -64 || c.margin > 64) fail("margin", "must be an integer in [-64, 64]");
  if (c.window < 1 || c.window > 65536) fail("window", "must be an integer in [1, 65536]");
  one_of("amax_algo", c.amax_algo, {"max", "most_recent"});
  at_least("stats_interval", c.stats_interval, 0);
  at_least("sqnr_interval", c.sqnr_interval, 0);
  one_of("on_nonfinite", c.on_nonfinite, {"stop", "skip"});
  at_least("log_interval", c.log_interval, 1);
  at_least("rank_timeout", c.rank_timeout, 1);
  if (c.name.empty()) fail("name", "must not be empty");
  // A blank name shows as nothing in lists; bytes that are not UTF-8 cannot be shown; a NUL
  // would cut the name short; a tab or line break would break the lists' columns.
  if (const std::string why = name_problem(c.name); !why.empty()) fail("name", why);
  for (const auto& [key, f] : fields()) {
    if (std::isnan(f.max)) continue;
    const json v = f.get(c);
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

void check_run_memory(const RunConfig& c, uint64_t limit) {
  if (limit == 0) limit = run_memory_limit();
  const MemoryEstimate m = estimate_run_memory(c);
  if (m.total <= static_cast<double>(limit)) return;
  const bool decoder = c.model != ModelKind::Mlp;
  const std::pair<double, const char*> parts[] = {
      {m.parameters, decoder ? "d_model (with layers)" : "width (with depth, features)"},
      {m.activations,
       decoder ? "batch (with context, d_model, layers)" : "batch (with width, depth, features)"},
      {m.histories, "window (with the number of FP8 layers)"},
      {m.metrics, "steps (with log_interval)"}};
  const auto* worst = &parts[0];
  for (const auto& p : parts) {
    if (p.first > worst->first) worst = &p;
  }
  auto gb = [](double b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g GB", b / 1e9);
    return std::string(buf);
  };
  const std::string field = worst->second;
  throw std::invalid_argument(
      "config field '" + field.substr(0, field.find(' ')) + "'" +
      field.substr(field.find(' ') == std::string::npos ? field.size() : field.find(' ')) +
      ": the run would need about " + gb(m.total) + " of memory (parameters and optimizer state " +
      gb(m.parameters) + ", activations " + gb(m.activations) + ", amax histories " +
      gb(m.histories) + ", metric history " + gb(m.metrics) + "), over the limit of " +
      gb(static_cast<double>(limit)) + " (this machine's memory)");
}

MemoryEstimate estimate_run_memory(const RunConfig& c) {
  MemoryEstimate m;
  const double f4 = 4;  // fp32 bytes
  const double batch = c.batch;
  double params = 0, acts = 0, fp8_layers = 0;
  if (c.model == ModelKind::Gpt) {
    const double d = c.d_model, T = c.context, V = 256;  // the corpus's characters: < 256
    params = V * d + T * d + c.layers * (12 * d * d + 13 * d) + d * V;
    // Per block: the residual stream, norms, qkv, attention scores and weights, the MLP.
    acts = c.layers * batch * T * (16 * d + 3.0 * c.heads * T) + 4 * batch * T * V;
    fp8_layers = 4.0 * c.layers;
  } else if (c.model == ModelKind::Llama) {
    const double d = c.d_model, T = c.context, I = c.intermediate;
    const double V = c.vocab > 0 ? c.vocab : 256;  // 0: the corpus's characters, < 256
    const double kv = d * c.kv_heads / std::max(1, c.heads);
    params = V * d * (c.tie_embeddings ? 1 : 2) + d +
             c.layers * (2 * d * d + 2 * d * kv + 3 * d * I + 2 * d + 2 * kv);
    // Per layer: the residual stream, norms, q, k, v (repeated), rotary copies, attention
    // scores and weights, gate, up, their product.
    acts = c.layers * batch * T * (14 * d + 4 * I + 3.0 * c.heads * T) + 4 * batch * T * V;
    fp8_layers = 7.0 * c.layers;
  } else {
    const double w = c.width, f = c.features;
    params = c.depth <= 1 ? f * f : 2 * f * w + (c.depth - 2.0) * w * w;
    acts = batch * (4 * f + 4.0 * c.depth * w);
    fp8_layers = c.depth;
  }
  const double models = c.reference && c.fp8 ? 2 : 1;
  // Weights, gradients and AdamW's two moments in fp32, and an FP8 copy of each weight.
  m.parameters = models * params * (4 * f4 + 2);
  // Kept for the backward pass, plus the FP8 copies and temporaries of the quantization.
  m.activations = models * acts * f4 * 2;
  m.histories = c.fp8 ? fp8_layers * 3 * c.window * f4 * 2 : 0;
  // What a viewer holds of a run: 8 scalars a logged step.
  m.metrics = static_cast<double>(c.steps) / c.log_interval * 8 * 8;
  m.total = m.parameters + m.activations + m.histories + m.metrics;
  return m;
}

uint64_t run_memory_limit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return uint64_t{1} << 40;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
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
  for (const auto& [k, f] : fields()) j[k] = f.get(c);
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
  f.delayed = c.scaling == "delayed";
  f.delayed_scaling.window = c.window;
  f.delayed_scaling.margin = c.margin;
  f.delayed_scaling.algo = c.amax_algo == "most_recent" ? AmaxAlgo::MostRecent : AmaxAlgo::Max;
  return f;
}

}  // namespace fp8wb
