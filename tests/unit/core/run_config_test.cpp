// Run configurations: parsing, overrides, the round trip through JSON, and bad values
// refused with a message that names the field.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "fp8wb/core/run_config.h"

namespace fp8wb {
namespace {

TEST(RunConfig, DefaultsAreValidAndRoundTrip) {
  const RunConfig c;
  EXPECT_NO_THROW(validate_run_config(c));
  const std::string j = run_config_json(c);
  EXPECT_EQ(run_config_json(parse_run_config(j)), j);
  for (const auto& k : run_config_keys()) EXPECT_NE(j.find("\"" + k + "\""), std::string::npos) << k;
}

TEST(RunConfig, ParsesFieldsAndOverrides) {
  RunConfig c = parse_run_config(
      R"({"model": "mlp", "steps": 50, "lr": 1e-3, "scaling": "current", "recipe": "rowwise",
          "fp8": true, "name": "rowwise run", "window": 1.0})");
  EXPECT_EQ(c.model, ModelKind::Mlp);
  EXPECT_EQ(c.steps, 50);
  EXPECT_DOUBLE_EQ(c.lr, 1e-3);
  EXPECT_EQ(c.window, 1);  // 1.0 is an integer
  apply_override(c, "window=1024");
  apply_override(c, "amax_algo=most_recent");  // a bare word is a string
  apply_override(c, "fp8=false");
  apply_override(c, "name=\"quoted name\"");
  EXPECT_EQ(c.window, 1024);
  EXPECT_EQ(c.amax_algo, "most_recent");
  EXPECT_FALSE(c.fp8);
  EXPECT_EQ(c.name, "quoted name");
}

TEST(RunConfig, Float8ConfigFollowsTheRun) {
  RunConfig c;
  c.formats = "e4m3";
  c.margin = 2;
  c.window = 128;
  c.amax_algo = "most_recent";
  const Float8LinearConfig f = float8_config_of(c);
  EXPECT_TRUE(f.delayed);
  EXPECT_EQ(f.delayed_scaling.window, 128);
  EXPECT_EQ(f.delayed_scaling.margin, 2);
  EXPECT_EQ(f.delayed_scaling.algo, AmaxAlgo::MostRecent);
  EXPECT_EQ(f.grad_output.format, Format::E4M3FN);
  c.recipe = "blockwise";
  c.scaling = "current";
  c.formats = "hybrid_fnuz";
  const Float8LinearConfig b = float8_config_of(c);
  EXPECT_EQ(b.input.kind, ScalingKind::Block1x128);
  EXPECT_EQ(b.weight.kind, ScalingKind::Block128x128);
  EXPECT_EQ(b.grad_output.format, Format::E5M2FNUZ);
  EXPECT_FALSE(b.delayed);
}

struct Bad {
  const char* json;   // a config (or, starting with '=', an override)
  const char* field;  // the field the message must name
};

class BadRunConfig : public ::testing::TestWithParam<Bad> {};

TEST_P(BadRunConfig, IsRefusedNamingTheField) {
  const Bad b = GetParam();
  try {
    if (b.json[0] == '=') {
      RunConfig c;
      apply_override(c, b.json + 1);
      validate_run_config(c);
    } else {
      parse_run_config(b.json);
    }
    FAIL() << "accepted: " << b.json;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(b.field), std::string::npos)
        << b.json << " -> " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadRunConfig,
    ::testing::Values(Bad{R"({"window": -1})", "window"}, Bad{R"({"window": 0})", "window"},
                      Bad{R"({"margin": 1.5})", "margin"}, Bad{R"({"margin": 65})", "margin"},
                      Bad{R"({"recipe": "perchannel"})", "recipe"},
                      Bad{R"({"lr": "NaN"})", "lr"}, Bad{"=lr=nan", "lr"},
                      Bad{R"({"lr": 0})", "lr"}, Bad{R"({"steps": 0})", "steps"},
                      Bad{R"({"device": "tpu"})", "device"},
                      Bad{R"({"device": "cuda:x"})", "device"},
                      Bad{R"({"heads": 3})", "heads"}, Bad{R"({"batch": 0})", "batch"},
                      Bad{R"({"model": "resnet"})", "model"},
                      Bad{R"({"formats": "e5m2"})", "formats"},
                      Bad{R"({"amax_algo": "mean"})", "amax_algo"},
                      Bad{R"({"scaling": "delayed", "recipe": "rowwise"})", "scaling"},
                      Bad{R"({"stats_interval": -2})", "stats_interval"},
                      Bad{R"({"on_nonfinite": "ignore"})", "on_nonfinite"},
                      Bad{R"({"dtype": "fp16"})", "dtype"},
                      Bad{R"({"fp8": "yes"})", "fp8"}, Bad{R"({"windw": 16})", "windw"},
                      Bad{R"({"grad_clip": -1})", "grad_clip"},
                      Bad{R"({"outlier_channels": 100})", "outlier_channels"},
                      Bad{R"({"seed": -5})", "seed"}, Bad{R"({"context": 1})", "context"},
                      Bad{R"({"steps": 1e30})", "steps"}, Bad{R"({"name": ""})", "name"},
                      Bad{"=window", "window"}, Bad{R"([1, 2])", "object"},
                      Bad{R"({"window": 16,)", "JSON"}));

}  // namespace
}  // namespace fp8wb
