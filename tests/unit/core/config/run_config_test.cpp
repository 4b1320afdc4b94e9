// Run configurations: parsing, overrides, the round trip through JSON, and bad values
// refused with a message that names the field.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <stdexcept>
#include <string>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/config/run_config_fields.h"

namespace fp8wb {
namespace {

TEST(RunConfig, DefaultsAreValidAndRoundTrip) {
  const RunConfig c;
  EXPECT_NO_THROW(validate_run_config(c));
  const std::string j = run_config_json(c);
  EXPECT_EQ(run_config_json(parse_run_config(j)), j);
  for (const auto& k : run_config_keys())
    EXPECT_NE(j.find("\"" + k + "\""), std::string::npos) << k;
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
  EXPECT_EQ(c.amax_algo, AmaxAlgo::MostRecent);
  EXPECT_FALSE(c.fp8);
  EXPECT_EQ(c.name, "quoted name");
}

TEST(RunConfig, Float8ConfigFollowsTheRun) {
  RunConfig c;
  c.formats = FormatPairing::E4M3;
  c.margin = 2;
  c.window = 128;
  c.amax_algo = AmaxAlgo::MostRecent;
  const Float8LinearConfig f = float8_config_of(c);
  EXPECT_TRUE(f.delayed);
  EXPECT_EQ(f.delayed_scaling.window, 128);
  EXPECT_EQ(f.delayed_scaling.margin, 2);
  EXPECT_EQ(f.delayed_scaling.algo, AmaxAlgo::MostRecent);
  EXPECT_EQ(f.grad_output.format, Format::E4M3FN);
  c.recipe = Float8Recipe::Blockwise;
  c.scaling = ScalingMode::Current;
  c.formats = FormatPairing::HybridFnuz;
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
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(b.field), std::string::npos)
        << b.json << " -> " << e.what();
    // The field as data: the key refused, or none where the config as a whole is (not an
    // object, not JSON, an override without '=').
    const bool whole = b.field == std::string("object") || b.field == std::string("JSON") ||
                       (b.json[0] == '=' && std::string(b.json + 1).find('=') == std::string::npos);
    EXPECT_EQ(e.field, whole ? std::string() : std::string(b.field))
        << b.json << " -> " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadRunConfig,
    ::testing::Values(Bad{R"({"window": -1})", "window"}, Bad{R"({"window": 0})", "window"},
                      Bad{R"({"margin": 1.5})", "margin"}, Bad{R"({"margin": 65})", "margin"},
                      Bad{R"({"recipe": "perchannel"})", "recipe"}, Bad{R"({"lr": "NaN"})", "lr"},
                      Bad{"=lr=nan", "lr"}, Bad{R"({"lr": 0})", "lr"},
                      Bad{R"({"steps": 0})", "steps"}, Bad{R"({"device": "tpu"})", "device"},
                      Bad{R"({"device": "cuda:x"})", "device"}, Bad{R"({"heads": 3})", "heads"},
                      Bad{R"({"batch": 0})", "batch"}, Bad{R"({"model": "resnet"})", "model"},
                      Bad{R"({"formats": "e5m2"})", "formats"},
                      Bad{R"({"amax_algo": "mean"})", "amax_algo"},
                      Bad{R"({"scaling": "delayed", "recipe": "rowwise"})", "scaling"},
                      Bad{R"({"stats_interval": -2})", "stats_interval"},
                      Bad{R"({"on_nonfinite": "ignore"})", "on_nonfinite"},
                      Bad{R"({"dtype": "fp16"})", "dtype"}, Bad{R"({"fp8": "yes"})", "fp8"},
                      Bad{R"({"windw": 16})", "windw"}, Bad{R"({"grad_clip": -1})", "grad_clip"},
                      Bad{R"({"outlier_channels": 100})", "outlier_channels"},
                      Bad{R"({"seed": -5})", "seed"}, Bad{R"({"context": 1})", "context"},
                      Bad{R"({"steps": 1e30})", "steps"}, Bad{R"({"name": ""})", "name"},
                      Bad{"=window", "window"}, Bad{R"([1, 2])", "object"},
                      Bad{R"({"window": 16,)", "JSON"}));

// Issue #52: "margin = 2" (spaces a shell quote keeps) is margin=2, not an unknown field
// 'margin '; recipe=delayed says that delayed is a value of scaling; a field given twice
// is refused, naming both values, instead of silently taking the last.
TEST(RunConfigMessages, OverridesAreTrimmedHintedAndGivenOnce) {
  RunConfig c;
  apply_override(c, " margin = 2 ");
  EXPECT_EQ(c.margin, 2);
  apply_override(c, "recipe =\trowwise");
  EXPECT_EQ(c.recipe, Float8Recipe::Rowwise);
  EXPECT_EQ(override_key(" steps =3"), "steps");
  try {
    apply_override(c, "recipe=delayed");
    FAIL() << "recipe=delayed accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field, "recipe");
    EXPECT_NE(std::string(e.what()).find("(delayed is a value of scaling: scaling=delayed)"),
              std::string::npos)
        << e.what();
  }
  try {
    RunConfig d;
    apply_overrides(d, {"steps=1", "window=4", "steps = 2"});
    FAIL() << "steps given twice accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field, "steps");
    EXPECT_NE(std::string(e.what()).find("given twice (steps=1, then steps = 2)"),
              std::string::npos)
        << e.what();
  }
  RunConfig d;
  apply_overrides(d, {"steps=7", "window=4"});
  EXPECT_EQ(d.steps, 7);
  EXPECT_EQ(d.window, 4);
}

// A tensor's scaling as fp8wb inspect names it, given as a training recipe, says which
// recipe uses it (blockwise: x and dy in 1x128 groups, w in 128x128 tiles) or that none does.
TEST(RunConfigMessages, AnInspectScalingAsRecipeNamesTheRecipeWithIt) {
  const auto message = [](const std::string& word) {
    RunConfig c;
    try {
      apply_override(c, "recipe=" + word);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  for (const char* word : {"1x128", "128x128"}) {
    EXPECT_EQ(message(word), "config field 'recipe': \"" + std::string(word) +
                                 "\" is not one of tensorwise, rowwise, blockwise, mx (" + word +
                                 " is a tensor's scaling, as fp8wb inspect names it; the "
                                 "training recipe with it is blockwise)");
  }
  EXPECT_NE(message("nvfp4").find("no training recipe uses it"), std::string::npos)
      << message("nvfp4");
  EXPECT_EQ(message("perchannel"),
            "config field 'recipe': \"perchannel\" is not one of "
            "tensorwise, rowwise, blockwise, mx");
}

// What a config may be is bounded: nesting (no recursion on 70,000 levels), size, every
// number's magnitude, a run's memory; messages name the field and quote little.
TEST(RunConfigLimits, DeepNestingIsRefusedNamingTheField) {
  const std::string deep = std::string(70000, '[') + std::string(70000, ']');
  try {
    parse_run_config(R"({"steps": )" + deep + "}");
    FAIL() << "a 70,000-level value was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("nests deeper"), std::string::npos) << e.what();
  }
  RunConfig c;
  try {
    apply_override(c, "steps=" + deep.substr(35000, 65000));
    FAIL() << "a 65,000-level override was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'steps'"), std::string::npos) << e.what();
  }
  // Within the limit, a value of the wrong type is quoted short.
  const std::string ok = std::string(30, '[') + std::string(30, ']');
  try {
    parse_run_config(R"({"steps": )" + ok + "}");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
  }
  const std::string longname(5000, 'x');
  try {
    parse_run_config(R"({"model": ")" + longname + R"("})");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
  }
  EXPECT_THROW(parse_run_config(std::string(kMaxConfigBytes + 1, ' ')), std::invalid_argument);
}

TEST(RunConfigLimits, NumbersOutOfRangeNameTheField) {
  for (const char* text : {R"({"lr": 1e400})", R"({"steps": 5, "lr": -1e999})"}) {
    try {
      parse_run_config(text);
      FAIL() << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'lr'"), std::string::npos) << e.what();
    }
  }
  RunConfig c;
  try {
    apply_override(c, "lr=1e400");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'lr'"), std::string::npos) << e.what();
  }
}

// Whole-number fields are reported in whole numbers.
TEST(RunConfigLimits, LowerBoundsOfWholeNumbersReadAsWholeNumbers) {
  try {
    parse_run_config(R"({"d_model": 7})");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'d_model': must be >= 8, not 7"), std::string::npos)
        << e.what();
  }
}

TEST(RunConfigLimits, EveryFieldHasAnUpperBound) {
  for (const char* o : {"window=16777216", "layers=2147483647", "d_model=1048576",
                        "batch=2000000000", "steps=100000000000", "context=1000000",
                        "width=1000000", "depth=100000", "log_interval=2000000000"}) {
    RunConfig c;
    const std::string key = std::string(o).substr(0, std::string(o).find('='));
    try {
      apply_override(c, o);
      validate_run_config(c);
      FAIL() << o << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'" + key + "'"), std::string::npos) << e.what();
    }
  }
  RunConfig c;
  c.name = std::string(1000, 'n');
  EXPECT_THROW(validate_run_config(c), std::invalid_argument);
}

TEST(RunConfigLimits, RunsThatWouldNotFitInMemoryAreRefused) {
  RunConfig c;
  const MemoryEstimate small = estimate_run_memory(c);
  EXPECT_GT(small.total, 1e6);
  EXPECT_LT(small.total, 1e9);
  EXPECT_NO_THROW(check_run_memory(c, uint64_t{1} << 32));
  c.batch = 60000;
  c.context = 8000;
  try {
    validate_run_config(c);
    FAIL() << "a run of " << estimate_run_memory(c).total << " bytes was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'batch'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("memory"), std::string::npos) << e.what();
    EXPECT_EQ(e.field, "batch");  // the field that weighs most, as data
    EXPECT_EQ(e.reason.rfind("with context, d_model, layers, the run would need about ", 0), 0u)
        << e.reason;
  }
  RunConfig w;
  w.d_model = 8192;
  w.layers = 256;
  try {
    check_run_memory(w, uint64_t{1} << 34);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("config field 'd_model' (with layers): the run ", 0), 0u)
        << e.what();
    EXPECT_EQ(e.field, "d_model");
  }
}

TEST(RunConfigLimits, ConfigFilesAreRegularAndSmall) {
  try {
    read_run_config_file("/dev/zero");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("regular"), std::string::npos) << e.what();
  }
  const std::string path = ::testing::TempDir() + "fp8wb-big-config.json";
  {
    std::ofstream f(path);
    f << "{\"name\": \"" << std::string(2 << 20, 'x') << "\"}";
  }
  try {
    read_run_config_file(path);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("limit"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(RunConfigLimits, BacktracesAreStrippedFromMessages) {
  const std::string m =
      "[enforce fail at alloc_cpu.cpp:75] data. DefaultCPUAllocator: not enough memory\n"
      "Exception raised from alloc_cpu at ../c10/core/impl/alloc_cpu.cpp:75 (most recent call "
      "first):\nframe #0: c10::Error::Error(...) + 0x8b\nframe #1: ...";
  EXPECT_EQ(without_backtrace(m),
            "[enforce fail at alloc_cpu.cpp:75] data. DefaultCPUAllocator: not enough memory");
  EXPECT_EQ(without_backtrace("plain"), "plain");
}

// Every field's bad value is a ConfigError whose field is its key and whose message is
// "config field 'KEY': REASON", from an override, a config file's JSON or validation.
TEST(RunConfigErrors, EachFieldsBadValueNamesThatField) {
  for (const RunConfigField& f : run_config_fields()) {
    const std::string key(f.key);
    // A value of the wrong type: a word for numbers and true/false, a number for text.
    const std::string bad = f.type == FieldType::Text || f.type == FieldType::Name ? "5" : "\"x\"";
    for (const bool as_file : {false, true}) {
      try {
        if (as_file) {
          parse_run_config("{\"" + key + "\": " + bad + "}");
        } else {
          RunConfig c;
          apply_override(c, key + "=" + bad);
          validate_run_config(c);
        }
        ADD_FAILURE() << key << " took " << bad;
      } catch (const ConfigError& e) {
        EXPECT_EQ(e.field, key) << e.what();
        EXPECT_FALSE(e.reason.empty()) << key;
        EXPECT_EQ(std::string(e.what()), "config field '" + key + "': " + e.reason);
      }
    }
  }
  // Refused in validation (a combination), and in a file (the path before the message).
  RunConfig c;
  c.d_model = 60;
  c.heads = 7;
  try {
    validate_run_config(c);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field, "heads");
    EXPECT_EQ(e.reason, "7 does not divide d_model 60");
  }
  const std::string path = ::testing::TempDir() + "fp8wb-bad-config.json";
  std::ofstream(path) << R"({"lr": -1})";
  try {
    read_run_config_file(path);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field, "lr");
    EXPECT_EQ(std::string(e.what()).rfind(path + ": config field 'lr': ", 0), 0u) << e.what();
  }
  std::remove(path.c_str());
}

// Margins, windows and amax algorithms as users type them (configs, --set, replay's --grid)
// are read once, by the config: whole numbers within the field's bounds, a name of the table.
TEST(RunConfig, MarginWindowAndAmaxAlgoAreReadAsFields) {
  RunConfig c;
  apply_override(c, "margin=2");
  EXPECT_EQ(c.margin, 2);
  apply_override(c, "margin=-1");
  EXPECT_EQ(c.margin, -1);
  apply_override(c, "window=1024");
  EXPECT_EQ(c.window, 1024);
  apply_override(c, "amax_algo=most_recent");
  EXPECT_EQ(c.amax_algo, AmaxAlgo::MostRecent);
  EXPECT_NO_THROW(validate_run_config(c));
  const auto refused = [](const std::string& key, const std::string& value) {
    RunConfig r;
    try {
      apply_override(r, key + "=" + value);
      validate_run_config(r);
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.field, key) << value << ": " << e.what();
      return e.reason;
    }
    ADD_FAILURE() << key << " took " << value;
    return std::string();
  };
  for (const char* bad : {"1.5", "", "two", "2x"})
    EXPECT_NE(refused("margin", bad).find("expected an integer"), std::string::npos) << bad;
  EXPECT_EQ(refused("margin", "100"), "must be an integer in [-64, 64]");
  EXPECT_EQ(refused("margin", "1e3"), "must be an integer in [-64, 64]");
  EXPECT_EQ(refused("window", "0"), "must be an integer in [1, 65536]");
  EXPECT_EQ(refused("amax_algo", "mean"), "\"mean\" is not one of max, most_recent");
  EXPECT_EQ(refused("scaling", "late"), "\"late\" is not one of delayed, current");
  EXPECT_EQ(refused("on_nonfinite", "ignore"), "\"ignore\" is not one of stop, skip");
  EXPECT_EQ(refused("dtype", "fp16"), "\"fp16\" is not one of fp32, bf16");
}

// The enum fields are written by name, so that configs stored in databases load as before.
TEST(RunConfig, EnumFieldsAreWrittenAsTheirNames) {
  RunConfig c;
  c.scaling = ScalingMode::Current;
  c.amax_algo = AmaxAlgo::MostRecent;
  c.on_nonfinite = OnNonfinite::Skip;
  c.dtype = ActivationDtype::Bf16;
  c.model = ModelKind::Llama;
  const std::string j = run_config_json(c);
  for (const char* kv : {R"("scaling": "current")", R"("amax_algo": "most_recent")",
                         R"("on_nonfinite": "skip")", R"("dtype": "bf16")", R"("model": "llama")"})
    EXPECT_NE(j.find(kv), std::string::npos) << kv << " in " << j;
  const RunConfig back = parse_run_config(
      R"({"scaling": "current", "amax_algo": "most_recent", "on_nonfinite": "skip",
          "dtype": "bf16", "model": "llama"})");
  EXPECT_EQ(run_config_json(back), j);
  EXPECT_EQ(back.scaling, ScalingMode::Current);
  EXPECT_EQ(back.on_nonfinite, OnNonfinite::Skip);
  EXPECT_EQ(back.dtype, ActivationDtype::Bf16);
}

}  // namespace
}  // namespace fp8wb
