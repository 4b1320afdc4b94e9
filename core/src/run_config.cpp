#include "fp8wb/core/run_config.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <stdexcept>

namespace fp8wb {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& key, const std::string& why) {
  throw std::invalid_argument("config field '" + key + "': " + why);
}

std::string type_of(const json& v) {
  return v.type_name();
}

int64_t as_int(const std::string& key, const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9e15) return static_cast<int64_t>(d);
    fail(key, "expected an integer, got " + v.dump());
  }
  fail(key, "expected an integer, got " + type_of(v) + " " + v.dump());
}

int as_int32(const std::string& key, const json& v) {
  const int64_t i = as_int(key, v);
  if (i < INT32_MIN || i > INT32_MAX) fail(key, std::to_string(i) + " is out of range");
  return static_cast<int>(i);
}

double as_double(const std::string& key, const json& v) {
  if (v.is_number()) return v.get<double>();
  // JSON has no NaN or infinities: written as strings they are still refused by name.
  if (v.is_string()) fail(key, "expected a number, got \"" + v.get<std::string>() + "\"");
  fail(key, "expected a number, got " + type_of(v));
}

bool as_bool(const std::string& key, const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  fail(key, "expected true or false, got " + v.dump());
}

std::string as_string(const std::string& key, const json& v) {
  if (v.is_string()) return v.get<std::string>();
  fail(key, "expected a string, got " + v.dump());
}

struct Field {
  std::function<void(RunConfig&, const json&)> set;
  std::function<json(const RunConfig&)> get;
};

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
                    } else {
                      fail("model", "\"" + s + "\" is not one of gpt, mlp");
                    }
                  },
                  [](const RunConfig& c) { return json(std::string(model_kind_name(c.model))); }}});
    i32("d_model", &RunConfig::d_model);
    i32("layers", &RunConfig::layers);
    i32("heads", &RunConfig::heads);
    i32("context", &RunConfig::context);
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
    str("recipe", &RunConfig::recipe);
    str("formats", &RunConfig::formats);
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
  fail(key, "\"" + v + "\" is not one of " + list);
}

void at_least(const std::string& key, double v, double lo) {
  if (!(v >= lo)) fail(key, "must be >= " + json(lo).dump() + ", not " + json(v).dump());
}

}  // namespace

std::string_view model_kind_name(ModelKind m) {
  return m == ModelKind::Gpt ? "gpt" : "mlp";
}

const std::vector<std::string>& run_config_keys() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> v;
    for (const auto& [key, f] : fields()) v.push_back(key);
    return v;
  }();
  return k;
}

RunConfig parse_run_config(std::string_view json_text) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(std::string("config is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument("config must be a JSON object of fields");
  RunConfig c;
  for (const auto& [key, v] : j.items()) set_key(c, key, v);
  validate_run_config(c);
  return c;
}

void apply_override(RunConfig& c, std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw std::invalid_argument("override '" + std::string(assignment) +
                                "' is not key=value (e.g. window=1024)");
  }
  const std::string key(assignment.substr(0, eq));
  const std::string text(assignment.substr(eq + 1));
  json v;
  try {
    v = json::parse(text);
  } catch (const json::parse_error&) {
    v = text;  // a bare word: a string
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
    fail("heads", std::to_string(c.heads) + " does not divide d_model " +
                      std::to_string(c.d_model));
  }
  at_least("context", c.context, 2);
  at_least("width", c.width, 1);
  at_least("depth", c.depth, 1);
  at_least("features", c.features, 1);
  at_least("outlier_channels", c.outlier_channels, 0);
  if (c.outlier_channels > c.features) {
    fail("outlier_channels", std::to_string(c.outlier_channels) + " exceeds features " +
                                 std::to_string(c.features));
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
    fail("device", "\"" + c.device + "\" is not one of cpu, cuda, cuda:N");
  }
  if (c.device.rfind("cuda:", 0) == 0) {
    const std::string n = c.device.substr(5);
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 3)
      fail("device", "\"" + c.device + "\": N in cuda:N must be a device number");
  }
  one_of("dtype", c.dtype, {"fp32", "bf16"});
  one_of("recipe", c.recipe, {"tensorwise", "rowwise", "blockwise", "mx"});
  one_of("formats", c.formats, {"hybrid", "e4m3", "hybrid_fnuz", "e4m3_fnuz"});
  one_of("scaling", c.scaling, {"delayed", "current"});
  if (c.scaling == "delayed" && c.recipe != "tensorwise" && c.fp8) {
    fail("scaling", "delayed scaling is tensorwise; recipe \"" + c.recipe +
                        "\" needs scaling=current");
  }
  if (c.margin < -64 || c.margin > 64) fail("margin", "must be an integer in [-64, 64]");
  if (c.window < 1 || c.window > (1 << 24)) fail("window", "must be an integer in [1, 16777216]");
  one_of("amax_algo", c.amax_algo, {"max", "most_recent"});
  at_least("stats_interval", c.stats_interval, 0);
  at_least("sqnr_interval", c.sqnr_interval, 0);
  one_of("on_nonfinite", c.on_nonfinite, {"stop", "skip"});
  at_least("log_interval", c.log_interval, 1);
  if (c.name.empty()) fail("name", "must not be empty");
}

std::string run_config_json(const RunConfig& c) {
  json j = json::object();
  for (const auto& [k, f] : fields()) j[k] = f.get(c);
  return j.dump(2);
}

Float8LinearConfig float8_config_of(const RunConfig& c) {
  Float8LinearConfig f;
  const bool fnuz = c.formats.find("fnuz") != std::string::npos;
  const Format e4 = fnuz ? Format::E4M3FNUZ : Format::E4M3FN;
  const Format e5 = fnuz ? Format::E5M2FNUZ : Format::E5M2;
  const bool hybrid = c.formats.rfind("hybrid", 0) == 0;
  f.input.format = f.weight.format = e4;
  f.grad_output.format = hybrid ? e5 : e4;
  ScalingKind x = ScalingKind::Tensorwise, w = ScalingKind::Tensorwise;
  if (c.recipe == "rowwise") {
    x = w = ScalingKind::Rowwise;
  } else if (c.recipe == "blockwise") {
    x = ScalingKind::Block1x128;
    w = ScalingKind::Block128x128;
  } else if (c.recipe == "mx") {
    x = w = ScalingKind::MX;
  }
  f.input.kind = x;
  f.weight.kind = w;
  f.grad_output.kind = x;
  for (QuantRecipe* r : {&f.input, &f.weight, &f.grad_output}) r->margin = c.margin;
  f.fprop_fp8 = c.fprop_fp8;
  f.dgrad_fp8 = c.dgrad_fp8;
  f.wgrad_fp8 = c.wgrad_fp8;
  f.stats_interval = c.stats_interval;
  f.sqnr_interval = c.sqnr_interval;
  f.delayed = c.scaling == "delayed";
  f.delayed_scaling.window = c.window;
  f.delayed_scaling.margin = c.margin;
  f.delayed_scaling.algo = c.amax_algo == "most_recent" ? AmaxAlgo::MostRecent : AmaxAlgo::Max;
  return f;
}

}  // namespace fp8wb
