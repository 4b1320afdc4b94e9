// The run config's field table (run_config_fields.h): every RunConfig member round-trips
// through JSON by its row, the rows' bounds are the ones parsing refuses past, and the
// allowed names of an enum's row are its name table's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>
#include <string>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/config/run_config_fields.h"

namespace fp8wb {
namespace {

using nlohmann::json;

// A value other than the default for every field, the whole config valid.
const char* const kEveryFieldChanged = R"({
  "name": "every field", "model": "llama", "d_model": 32, "layers": 1, "heads": 2,
  "context": 16, "intermediate": 48, "kv_heads": 1, "rope_theta": 500000.0,
  "norm_eps": 1e-06, "tie_embeddings": true, "vocab": 300, "smooth_swiglu": true,
  "hf": "/checkpoint", "data": "/tokens.bin", "eval_interval": 25, "width": 32, "depth": 2,
  "features": 16, "outlier_channels": 3, "outlier_scale": 20.0, "target_tail": 5.0,
  "drift": 0.5, "drift_period": 40, "batch": 8, "steps": 30, "lr": 0.001, "warmup": 5,
  "min_lr_ratio": 0.2, "weight_decay": 0.1, "grad_clip": 0.5, "seed": 9007199254740992,
  "device": "cuda:1", "dtype": "bf16", "fp8": false, "recipe": "rowwise", "formats": "e4m3",
  "scaling": "current", "margin": -3, "window": 8, "amax_algo": "most_recent",
  "fprop_fp8": false, "dgrad_fp8": false, "wgrad_fp8": false, "stats_interval": 5,
  "sqnr_interval": 7, "reference": false, "on_nonfinite": "skip", "log_interval": 2,
  "weights": "/w.safetensors", "amax_reduction": false, "rank_timeout": 60})";

TEST(RunConfigFields, EveryMemberRoundTripsThroughJson) {
  const json changed = json::parse(kEveryFieldChanged);
  const json defaults = json::parse(run_config_json(RunConfig{}));
  // Every row is in the config above, changed: a new field needs a value here.
  ASSERT_EQ(changed.size(), run_config_fields().size());
  for (const RunConfigField& f : run_config_fields()) {
    const std::string k(f.key);
    ASSERT_TRUE(changed.contains(k)) << k << " has no changed value in this test";
    EXPECT_NE(changed[k], defaults[k]) << k;
  }
  const RunConfig c = parse_run_config(kEveryFieldChanged);
  // Written back as read: each key reads and writes its own member (a row pointing at
  // another's member would write that one's value).
  EXPECT_EQ(json::parse(run_config_json(c)), changed);
  EXPECT_EQ(run_config_json(parse_run_config(run_config_json(c))), run_config_json(c));
  // Each field changed alone changes its key alone.
  for (const RunConfigField& f : run_config_fields()) {
    const std::string k(f.key);
    if (k == "model" || k == "hf") continue;  // hf sets the model: checked below
    RunConfig one;
    apply_override(one, k + "=" + changed[k].dump());
    json expected = defaults;
    expected[k] = changed[k];
    EXPECT_EQ(json::parse(run_config_json(one)), expected) << k;
  }
  RunConfig hf;
  apply_override(hf, "hf=/checkpoint");
  EXPECT_EQ(hf.model, ModelKind::Llama);
}

TEST(RunConfigFields, KeysAreDistinctAndTheConfigsKeys) {
  std::set<std::string_view> keys;
  std::vector<std::string> in_order;
  for (const RunConfigField& f : run_config_fields()) {
    EXPECT_TRUE(keys.insert(f.key).second) << f.key << " twice";
    in_order.emplace_back(f.key);
    EXPECT_FALSE(f.label.empty()) << f.key;
    EXPECT_FALSE(f.help.empty()) << f.key;
    EXPECT_NE(f.models, 0) << f.key;
    EXPECT_EQ(find_run_config_field(f.key), &f);
    for (const RunConfigField& g : run_config_fields()) {
      if (&f != &g) {
        EXPECT_FALSE(f.member == g.member) << f.key << " and " << g.key;
      }
    }
  }
  EXPECT_EQ(in_order, run_config_keys());
  EXPECT_EQ(find_run_config_field("no_such_field"), nullptr);
}

TEST(RunConfigFields, NamesAreTheNameTables) {
  const RunConfigField* recipe = find_run_config_field("recipe");
  const RunConfigField* formats = find_run_config_field("formats");
  ASSERT_TRUE(recipe && formats);
  EXPECT_EQ(field_names_text(*recipe), table_names(kFloat8Recipes));
  EXPECT_EQ(field_names_text(*formats), table_names(kFormatPairings));
  for (const RunConfigField& f : run_config_fields()) {
    if (f.type == FieldType::Name) {
      EXPECT_FALSE(f.names.empty()) << f.key;
    }
    // Every name a row allows is taken; another is refused, the message listing them.
    for (std::string_view n : f.names) {
      RunConfig c;
      EXPECT_NO_THROW(apply_override(c, std::string(f.key) + "=" + std::string(n))) << f.key;
    }
    if (f.names.empty()) continue;
    RunConfig c;
    try {
      apply_override(c, std::string(f.key) + "=no_such_name");
      validate_run_config(c);
      ADD_FAILURE() << f.key << " took no_such_name";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field_names_text(f)), std::string::npos) << e.what();
    }
  }
}

// The bounds a row holds are the ones a config is refused past, naming the field.
TEST(RunConfigFields, RowsBoundsAreTheChecks) {
  for (const RunConfigField& f : run_config_fields()) {
    const std::string k(f.key);
    auto refused = [&](const json& v) {
      RunConfig c;
      try {
        apply_override(c, k + "=" + v.dump());
        validate_run_config(c);
      } catch (const std::invalid_argument& e) {
        return std::string(e.what()).find(k) != std::string::npos;
      }
      return false;
    };
    if (f.type == FieldType::Integer) {
      ASSERT_TRUE(f.has_min() && f.has_max()) << k;
      EXPECT_TRUE(refused(static_cast<int64_t>(f.min) - 1)) << k;
      EXPECT_TRUE(refused(static_cast<int64_t>(f.max) + 1)) << k;
      EXPECT_EQ(field_bounds_text(f),
                "[" + field_limit_text(f.min) + ", " + field_limit_text(f.max) + "]");
    } else if (f.type == FieldType::Real) {
      ASSERT_TRUE(f.has_min() && f.has_max()) << k;
      EXPECT_TRUE(refused(f.max * 2 + 1)) << k;
      EXPECT_TRUE(refused(f.min - 1)) << k;
      if (f.min_excluded) {
        EXPECT_TRUE(refused(f.min)) << k;
      }
    } else if (f.type == FieldType::Text && f.names.empty() && f.has_max()) {
      EXPECT_TRUE(refused(std::string(static_cast<size_t>(f.max) + 1, 'a'))) << k;
    }
  }
}

}  // namespace
}  // namespace fp8wb
