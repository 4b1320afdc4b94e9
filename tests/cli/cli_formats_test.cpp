// fp8wb's output for known values, run in-process through run_cli().
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "fp8wb/core/formats/value_report.h"
#include "fp8wb/core/metrics.h"

namespace {

using fp8wb::test::Result;
using fp8wb::test::run;

bool has_line(const std::string& text, const std::string& a, const std::string& b) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
  }
  return false;
}

TEST(CliFormats, KnownValueTable) {
  const Result r = run({"formats", "1", "0.1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has_line(r.out, "E4M3FN    0x38  0 0111 000", "exact")) << r.out;
  EXPECT_TRUE(has_line(r.out, "E5M2      0x3c  0 01111 00", "exact")) << r.out;
  EXPECT_TRUE(has_line(r.out, "E4M3FN    0x1d  0 0011 101", "0.1015625")) << r.out;
  EXPECT_TRUE(has_line(r.out, "E4M3FN    0x1d", "1.56%")) << r.out;
  EXPECT_TRUE(has_line(r.out, "E2M1FN    0x00", "underflow")) << r.out;
}

TEST(CliFormats, NegativeAndOverflowingValues) {
  const Result r = run({"formats", "-500", "--format", "e4m3", "-f", "E5M2", "--overflow", "ieee"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has_line(r.out, "E4M3FN    0xff", "overflow")) << r.out;
  EXPECT_TRUE(has_line(r.out, "E5M2      0xe0", "-512")) << r.out;
  const Result s = run({"formats", "1e300", "-f", "e5m2"});
  EXPECT_TRUE(has_line(s.out, "E5M2      0x7b", "saturated")) << s.out;
}

TEST(CliFormats, Json) {
  const Result r = run({"formats", "470", "-f", "e4m3", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["code"], "0x7e");
  EXPECT_EQ(j[0]["decoded"], 448.0);
  EXPECT_EQ(j[0]["flags"]["saturated"], true);
  EXPECT_EQ(j[0]["bits"]["exponent"], "1111");
  const Result n = run({"formats", "nan", "-f", "e5m2", "--json"});
  EXPECT_EQ(nlohmann::json::parse(n.out)[0]["decoded"], "nan");
}

TEST(CliFormats, CodeTable) {
  const Result r = run({"formats", "--table", "E4M3FN"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has_line(r.out, "0x7e   0 1111 110", "448")) << r.out;
  EXPECT_TRUE(has_line(r.out, "0x7f   0 1111 111", "nan")) << r.out;
  EXPECT_TRUE(has_line(r.out, "0x01   0 0000 001", "subnormal")) << r.out;
  size_t lines = 0;
  for (char c : r.out) lines += c == '\n';
  EXPECT_EQ(lines, 256u + 2u);
  const Result j = run({"formats", "--table", "fp4", "--json"});
  EXPECT_EQ(nlohmann::json::parse(j.out).size(), 16u);
  const Result c = run({"formats", "--table", "e5m2", "--csv"});
  EXPECT_TRUE(has_line(c.out, "0x7c,0 11111 00,inf,inf", "")) << c.out;
}

TEST(CliFormats, BadInputGetsClearErrors) {
  Result r = run({"formats", "abc"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("'abc' is not a number"), std::string::npos) << r.err;
  r = run({"formats", "1", "-f", "e4m4"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown format 'e4m4'"), std::string::npos);
  EXPECT_NE(r.err.find("E2M3FN"), std::string::npos);
  r = run({"formats", "--table", "bf16"});
  EXPECT_EQ(r.rc, 2);
  r = run({"formats", "1", "--overflow", "wrap"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("saturate or ieee"), std::string::npos);
  r = run({"formats"});
  EXPECT_EQ(r.rc, 2);
  r = run({"no-such-command"});
  EXPECT_NE(r.rc, 0);
}

// Every usage error the command-line parser finds exits with 2, as the commands' own
// usage errors do, and says the parser's message; --help and --version exit with 0.
TEST(CliFormats, ParserUsageErrorsExitTwo) {
  const std::vector<std::vector<std::string>> usage = {
      {"no-such-command"},                       // an unknown subcommand
      {"formats", "1", "--no-such-option"},      // an unknown option
      {"demo"},                                  // a required argument missing
      {"demo", "nonsense"},                      // a value not in the option's set
      {"demo", "gradients", "--scale", "abc"},   // a value of the wrong type
      {"inspect", "x.safetensors", "--device"},  // an option without its value
      {"train", "--nproc"},
      {"runs", "list", "extra", "args"}};
  for (const auto& args : usage) {
    const Result r = run(args);
    EXPECT_EQ(r.rc, 2) << args.front() << " " << r.err;
    EXPECT_FALSE(r.err.empty()) << args.front();
  }
  EXPECT_NE(run({"formats", "1", "--no-such-option"}).err.find("--no-such-option"),
            std::string::npos);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--help"}, {"demo", "--help"}, {"train", "--help"}, {"--version"}}) {
    const Result r = run(args);
    EXPECT_EQ(r.rc, 0) << args.front() << " " << r.err;
  }
}

TEST(CliFormats, Version) {
  const Result r = run({"--version"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("fp8wb 0.1.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FP8 GEMM"), std::string::npos) << r.out;
}

}  // namespace

namespace {

TEST(CliDemo, OutliersTableAndJson) {
  const Result r = run({"demo", "outliers"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has_line(r.out, "30000", "%")) << r.out;
  const Result j = run({"demo", "outliers", "--json", "-k", "100"});
  ASSERT_EQ(j.rc, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["rows"].size(), 1u);
  EXPECT_NEAR(doc["rows"][0]["block_1x128_error_pct"].get<double>(), 2.6, 0.3);
}

TEST(CliDemo, GradientsJson) {
  const Result j = run({"demo", "gradients", "--json"});
  ASSERT_EQ(j.rc, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["cases"].size(), 4u);
  EXPECT_EQ(doc["cases"][3]["format"], "E5M2");
  EXPECT_EQ(doc["cases"][3]["underflow_pct"], 0.0);
  EXPECT_GT(doc["cases"][1]["histogram"]["bins"].size(), 10u);
  const Result t = run({"demo", "gradients"});
  EXPECT_TRUE(has_line(t.out, "E4M3FN", "per-tensor")) << t.out;
}

// Every derived figure of kTensorStatFigures is in the demos' JSON (each recipe's, in the
// outlier demo): a figure added to the table is written without another list to change.
TEST(CliDemo, JsonWritesEveryTensorStatFigure) {
  const Result o = run({"demo", "outliers", "--json", "-k", "100"});
  ASSERT_EQ(o.rc, 0) << o.err;
  const auto rows = nlohmann::json::parse(o.out)["rows"];
  ASSERT_EQ(rows.size(), 1u);
  const Result g = run({"demo", "gradients", "--json"});
  ASSERT_EQ(g.rc, 0) << g.err;
  const auto cases = nlohmann::json::parse(g.out)["cases"];
  ASSERT_EQ(cases.size(), 4u);
  for (const fp8wb::TensorStatFigure& f : fp8wb::kTensorStatFigures) {
    for (const char* prefix : {"tensorwise_", "block_1x128_"})
      EXPECT_TRUE(rows[0].contains(prefix + std::string(f.name))) << prefix << f.name;
    for (const auto& c : cases) EXPECT_TRUE(c.contains(f.name)) << f.name << " in " << c.dump();
  }
  // An exact figure JSON cannot hold is its text, as before.
  EXPECT_TRUE(cases[0]["sqnr_db"].is_number() || cases[0]["sqnr_db"].is_string());
}

TEST(CliDemo, BadArguments) {
  EXPECT_NE(run({"demo", "nonsense"}).rc, 0);
  EXPECT_EQ(run({"demo", "outliers", "--format", "e9m9"}).rc, 2);
  const Result r = run({"demo", "gradients", "--scale", "-1"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("gradient scale"), std::string::npos);
}

// A scale that takes the gradients past fp32's range leaves no finite value to cast:
// refused, naming the scale and the largest one, as a non-finite scale is.
TEST(CliDemo, GradientScaleBeyondFp32IsRefused) {
  for (const bool as_json : {false, true}) {
    std::vector<std::string> args = {"demo", "gradients", "--scale", "1e300"};
    if (as_json) args.push_back("--json");
    const Result r = run(args);
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find("gradient scale 1e+300"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not finite in fp32"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("inf"), std::string::npos) << r.err;
  }
  // The largest scale the message names is taken.
  const std::string err = run({"demo", "gradients", "--scale", "1e300"}).err;
  const std::string said = "the largest scale is ";
  ASSERT_NE(err.find(said), std::string::npos) << err;
  const std::string largest = err.substr(err.find(said) + said.size());
  EXPECT_EQ(largest, "3.402e+39\n");
  const Result ok = run({"demo", "gradients", "--scale", "3.402e39", "--json"});
  ASSERT_EQ(ok.rc, 0) << ok.err;
  const auto doc = nlohmann::json::parse(ok.out);
  EXPECT_EQ(doc["cases"][0]["histogram"]["nonfinite"], 0);
}

TEST(CliFormats, NegativeValuesAfterDashDashAndCsvWithoutTable) {
  Result r = run({"formats", "-f", "e4m3", "--", "-inf"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("-448"), std::string::npos) << r.out;
  r = run({"formats", "--csv", "1"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--table"), std::string::npos) << r.err;
}

}  // namespace

namespace {

TEST(CliDemo, MasterWeightsTableAndJson) {
  const Result t = run({"demo", "master-weights"});
  ASSERT_EQ(t.rc, 0) << t.err;
  // The figures the chapter gives, to four decimals: bf16 loses every update of 1e-3,
  // fp32 master weights keep them, fp16 moves by 2^-10 each time: 1 + 1000 / 1024.
  EXPECT_TRUE(has_line(t.out, "fp32 (master weights)", "2.0000")) << t.out;
  EXPECT_TRUE(has_line(t.out, "bf16    ", "1.0000")) << t.out;
  EXPECT_TRUE(has_line(t.out, "fp16", "1.9766")) << t.out;
  EXPECT_TRUE(has_line(t.out, "E4M3", "1.0000")) << t.out;
  EXPECT_TRUE(has_line(t.out, "E5M2", "1.0000")) << t.out;
  EXPECT_TRUE(has_line(t.out, "bf16, stochastic rounding", "mean of 32 seeds")) << t.out;

  const Result j = run({"demo", "master-weights", "--json", "--update", "0.002", "--steps", "10"});
  ASSERT_EQ(j.rc, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["demo"], "master-weights");
  ASSERT_EQ(doc["tracks"].size(), 6u);
  float w = 1.0f;
  for (int k = 0; k < 10; ++k) w += 0.002f;
  EXPECT_EQ(doc["tracks"][0]["format"], "fp32");
  EXPECT_EQ(doc["tracks"][0]["final"].get<double>(), static_cast<double>(w));
  // fp16: 0.002 lies between 2^-9 (0.00195) and 2^-9 + 2^-11: each add moves 2^-9.
  EXPECT_EQ(doc["tracks"][2]["format"], "fp16");
  EXPECT_EQ(doc["tracks"][2]["final"].get<double>(), 1.0 + 10 * std::ldexp(1.0, -9));
  EXPECT_EQ(doc["tracks"][2]["spacing_near_initial"].get<double>(), std::ldexp(1.0, -10));
  EXPECT_EQ(doc["tracks"][5]["rounding"], "stochastic");
  EXPECT_EQ(doc["tracks"][5]["seeds"], 32);

  EXPECT_EQ(run({"demo", "master-weights", "--steps", "0"}).rc, 2);
}

TEST(CliDemo, LossScalingJson) {
  const Result j = run({"demo", "loss-scaling", "--json", "--steps", "300", "--growth-interval",
                        "20", "--init-scale", "1024"});
  ASSERT_EQ(j.rc, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["runs"].size(), 4u);
  for (int i = 0; i < 4; i += 2) {
    const auto& plain = doc["runs"][i];
    const auto& scaled = doc["runs"][i + 1];
    EXPECT_EQ(plain["loss_scaling"], "none");
    EXPECT_EQ(scaled["loss_scaling"], "dynamic");
    EXPECT_LT(scaled["mean_underflow_pct"].get<double>(),
              plain["mean_underflow_pct"].get<double>());
    // The scale from 1024: doubled after every 20 good steps, halved after a skipped one.
    const auto& scales = scaled["scale"];
    ASSERT_EQ(scales.size(), 300u);
    std::vector<size_t> skipped = scaled["skipped"].get<std::vector<size_t>>();
    double s = 1024;
    int good = 0;
    for (size_t k = 0; k < 300; ++k) {
      ASSERT_EQ(scales[k].get<double>(), s) << k;
      if (std::find(skipped.begin(), skipped.end(), k) != skipped.end()) {
        s /= 2;
        good = 0;
      } else if (++good == 20) {
        s *= 2;
        good = 0;
      }
    }
  }
  const Result t = run({"demo", "loss-scaling", "--steps", "100"});
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_TRUE(has_line(t.out, "fp16", "dynamic")) << t.out;
  EXPECT_TRUE(has_line(t.out, "E5M2", "none")) << t.out;
  EXPECT_EQ(run({"demo", "loss-scaling", "--init-scale", "0"}).rc, 2);
}

// A value exactly midway between two representable ones is a tie, said as such with the
// neighbour nearest-even takes: half the smallest subnormal is not "below half" of it.
TEST(CliFormats, ATieIsSaidAsATieThatRoundsToEven) {
  Result r = run({"formats", "0x1p-10", "-f", "e4m3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("note: exactly half the smallest subnormal: a tie between 0 and "
                       "0.001953125: rounds to the even one, 0 (flushes to zero)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("below half"), std::string::npos) << r.out;
  // Ties between normal values: down to 1 (mantissa 000), up to 1.25 (mantissa 010).
  r = run({"formats", "1.0625", "1.1875", "-f", "e4m3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("a tie between 1 and 1.125: rounds to the even one, 1\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("a tie between 1.125 and 1.25: rounds to the even one, 1.25\n"),
            std::string::npos)
      << r.out;
  // E8M0FNU rounds a half up, as ml_dtypes does.
  r = run({"formats", "3", "-f", "e8m0", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)[0]["note"],
            "a tie between 2 and 4: E8M0FNU rounds a half up, to 4");
  // Below the tie it is below half.
  r = run({"formats", "0x1.fp-11", "-f", "e4m3"});
  EXPECT_NE(r.out.find("below half the smallest subnormal"), std::string::npos) << r.out;
}

// A value saturates (or overflows) when it rounds beyond max (docs/numerics.md): the tie
// between max and the next step up goes to the even one, which for E4M3FN is max itself
// (464 -> 448) and for E5M2 the step beyond (61440 saturates). The reference is each
// format's max and mantissa width from the spec; E8M0FNU rounds a half up.
TEST(CliFormats, SaturatesExactlyWhenTheValueRoundsBeyondMax) {
  struct Spec {
    const char* name;
    double max;
    int mbits;
    bool has_nonfinite;  // ieee mode gives Inf or NaN (FP4/FP6 saturate)
  };
  const Spec specs[] = {{"E4M3FN", 448, 3, true},
                        {"E5M2", 57344, 2, true},
                        {"E4M3FNUZ", 240, 3, true},
                        {"E5M2FNUZ", 57344, 2, true},
                        {"E8M0FNU", std::ldexp(1.0, 127), 0, true},
                        {"E2M1FN", 6, 1, false},
                        {"E3M2FN", 28, 2, false},
                        {"E2M3FN", 7.5, 3, false}};
  auto hex = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", v);
    return std::string(buf);
  };
  for (const Spec& f : specs) {
    const int e = std::ilogb(f.max);
    const double step = std::ldexp(1.0, e - f.mbits);
    const double next = f.max + step;
    const double mid = (f.max + next) / 2;
    // Ties go to an even last mantissa bit; E8M0FNU (no mantissa) rounds a half up.
    const bool max_is_odd = std::fmod(f.max / step, 2.0) == 1.0;
    const bool tie_goes_beyond = f.mbits == 0 || max_is_odd;
    for (const std::string mode : {"saturate", "ieee"}) {
      const bool nonfinite = mode == "ieee" && f.has_nonfinite;
      const struct {
        double v;
        bool beyond;
      } cases[] = {{f.max, false},
                   {(f.max + mid) / 2, false},
                   {mid, tie_goes_beyond},
                   {(mid + next) / 2, true},
                   {next, true}};
      for (const auto& c : cases) {
        for (const double v : {c.v, -c.v}) {
          if (v < 0 && std::string(f.name) == "E8M0FNU") continue;  // no sign
          const std::string text = hex(v);
          const Result r = run({"formats", "-f", f.name, "-o", mode, "--json", "--", text});
          ASSERT_EQ(r.rc, 0) << r.err;
          const auto j = nlohmann::json::parse(r.out)[0];
          const std::string what = std::string(f.name) + " " + mode + " " + text;
          EXPECT_EQ(j["flags"]["saturated"], c.beyond && !nonfinite) << what << "\n" << r.out;
          EXPECT_EQ(j["flags"]["overflow"], c.beyond && nonfinite) << what << "\n" << r.out;
          if (!c.beyond) {
            EXPECT_EQ(j["decoded"], v < 0 ? -f.max : f.max) << what;  // the nearest is max
          }
          if (v == mid || v == -mid) {
            // Said as a tie between max and the step beyond it, which the format lacks.
            const std::string lo = fp8wb::format_number(v < 0 ? -f.max : f.max);
            const std::string hi = fp8wb::format_number(v < 0 ? -next : next);
            EXPECT_NE(j.value("note", "")
                          .find("a tie between " + lo + " (the largest finite value) and " + hi +
                                " (one step beyond it, which " + f.name + " does not have)"),
                      std::string::npos)
                << what << "\n"
                << r.out;
          }
        }
      }
    }
  }
  // The text names the tie, and no clamping.
  const Result r = run({"formats", "464", "-f", "e4m3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find("clamped"), std::string::npos) << r.out;
  EXPECT_FALSE(has_line(r.out, "E4M3FN", "saturated")) << r.out;
  EXPECT_NE(r.out.find("a tie between 448 (the largest finite value) and 480 (one step beyond "
                       "it, which E4M3FN does not have): rounds to the even one, 448"),
            std::string::npos)
      << r.out;
}

// Values beyond fp64 get one message however they are written (2^99999 was "not a
// number", 1e400 became inf and 1e-400 "0, exact"); text fp64 rounds is never exact.
TEST(CliFormats, BeyondFp64AndRoundedTextAreSaidSo) {
  for (const std::string text : {"2^99999", "1e400", "1e-400"}) {
    const Result r = run({"formats", text, "-f", "e4m3"});
    EXPECT_EQ(r.rc, 2) << text;
    EXPECT_NE(r.err.find("'" + text + "' is beyond the range of fp64"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("exact"), std::string::npos) << r.out;
  }
  Result r = run({"formats", "1.00000000000000000001", "-f", "e4m3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("value 1 (fp64's nearest to 1.00000000000000000001)"), std::string::npos)
      << r.out;
  EXPECT_FALSE(has_line(r.out, "E4M3FN", "exact")) << r.out;
  r = run({"formats", "1.00000000000000000001", "1", "-f", "e4m3", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j[0]["flags"]["exact"], false);
  EXPECT_EQ(j[0]["input_rounded"], true);
  EXPECT_EQ(j[1]["flags"]["exact"], true);
  EXPECT_EQ(j[1]["input_rounded"], false);
}

// Hex text with more significant bits than fp64 holds is rounded like decimal text, and
// said so; hex text fp64 holds stays exact. The reference is the wider long double.
TEST(CliFormats, HexTextThatFp64RoundsIsNotExact) {
  for (const std::string text :
       {"0x1.00000000000001p0", "0x1.0000000000000000p0", "0x1.fffffffffffff8p-3",
        "0x1.fffffffffffffp-3", "0x3.0000000000001p-2", "0x1.8p-1074", "0x1p-1074", "0x10p0",
        "0X1.000000000000008P+2", "0x0.00000000000001p0"}) {
    const long double wide = std::strtold(text.c_str(), nullptr);
    const bool rounded = wide != static_cast<long double>(std::strtod(text.c_str(), nullptr));
    const Result r = run({"formats", text, "-f", "e8m0", "--json"});
    ASSERT_EQ(r.rc, 0) << text << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out)[0];
    EXPECT_EQ(j["input_rounded"], rounded) << text;
    if (rounded) EXPECT_EQ(j["flags"]["exact"], false) << text;
  }
  const Result r = run({"formats", "0x1.00000000000001p0", "-f", "e4m3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("value 1 (fp64's nearest to 0x1.00000000000001p0)"), std::string::npos)
      << r.out;
  EXPECT_FALSE(has_line(r.out, "E4M3FN", "exact")) << r.out;
}

}  // namespace

// A run id that is not a positive whole number is named as such (not the parser's words), with the
// exit code of the command's other errors; a folder given as the database is called one.
// `fp8wb runs` without an action lists the runs, as `runs list` does.
TEST(CliRuns, RunsAloneLists) {
  const std::string db = ::testing::TempDir() + "/runs_alone.sqlite";
  std::filesystem::remove(db);
  ASSERT_EQ(run({"train", "--db", db, "--set", "model=mlp", "--set", "steps=2"}).rc, 0);
  const Result alone = run({"runs", "--db", db}), list = run({"runs", "list", "--db", db});
  EXPECT_EQ(alone.rc, 0) << alone.err;
  EXPECT_EQ(alone.out, list.out);
  EXPECT_NE(alone.out.find("finished"), std::string::npos) << alone.out;
  EXPECT_EQ(run({"runs", "--json", "--db", db}).out,
            run({"runs", "list", "--json", "--db", db}).out);
  std::filesystem::remove(db);
}

TEST(CliRuns, BadIdAndAFolderAsTheDatabaseSaySo) {
  const std::string folder = ::testing::TempDir();
  Result r = run({"runs", "show", "abc", "--db", folder});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("run id must be a positive whole number (1 to 9223372036854775807), not "
                       "'abc'"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("Could not convert"), std::string::npos) << r.err;
  r = run({"runs", "delete", "12x", "--db", folder});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("not '12x'"), std::string::npos) << r.err;
  // A number that is no run id is not called "not a number": the same words for every
  // command that takes a run id, before any database is opened.
  for (const char* action : {"show", "export", "delete"}) {
    for (const char* id : {"-1", "0", "1.5", "99999999999999999999"}) {
      r = run({"runs", action, id, "--db", folder, "-y"});
      EXPECT_EQ(r.rc, 1) << action << " " << id;
      EXPECT_NE(r.err.find(std::string("fp8wb runs ") + action +
                           ": run id must be a positive whole number (1 to "
                           "9223372036854775807), not '" +
                           id + "'"),
                std::string::npos)
          << r.err;
      EXPECT_EQ(r.err.find("must be a number"), std::string::npos) << r.err;
    }
  }
  r = run({"runs", "list", "--db", folder});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("is a folder"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no run database"), std::string::npos) << r.err;
}

TEST(CliInfo, NamesTheDefaultFp8Formats) {
  // This machine computes with a CPU or CUDA LibTorch: the OCP formats, E4M3FN and E5M2.
  const Result r = run({"info"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has_line(r.out, "FP8 formats", "hybrid (E4M3FN, E5M2)")) << r.out;
  EXPECT_EQ(r.out.find("ROCm"), std::string::npos) << r.out;
}

namespace {

// Negative values are values wherever they are written, not only after `--`: -inf, -.5,
// -nan and -2^-9 as -500 always was.
TEST(CliFormats, NegativeValuesAreValuesWithoutDashDash) {
  for (const std::string v : {"-inf", "-.5", "-nan", "-2^-9", "-infinity"}) {
    const Result r = run({"formats", v, "-f", "e4m3", "--json"});
    ASSERT_EQ(r.rc, 0) << v << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j.size(), 1u) << r.out;
  }
  Result r = run({"formats", "-inf", "-f", "e4m3"});
  EXPECT_TRUE(has_line(r.out, "E4M3FN    0xfe", "-448")) << r.out << r.err;
  r = run({"formats", "1", "-.5", "-f", "e4m3", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["input"], 1.0);  // in the order given
  EXPECT_EQ(j[1]["input"], -0.5);
  // An option that is no number is still an unknown option.
  r = run({"formats", "1", "-x"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("-x"), std::string::npos) << r.err;
}

// Inf clamped to the largest finite value is flagged saturated, as a finite value beyond
// max is; Inf that stays Inf (E5M2 in ieee mode) is not.
TEST(CliFormats, InfClampedIsFlaggedSaturated) {
  Result r = run({"formats", "inf", "-inf", "-f", "e4m3", "-f", "e5m2", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 4u);
  for (const auto& row : j) EXPECT_EQ(row["flags"]["saturated"], true) << row.dump();
  r = run({"formats", "inf", "-f", "e4m3"});
  EXPECT_TRUE(has_line(r.out, "E4M3FN    0x7e", "saturated")) << r.out;
  r = run({"formats", "inf", "-f", "e5m2", "-o", "ieee", "--json"});
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j[0]["flags"]["saturated"], false) << r.out;
}

// The formats without Inf and NaN (FP4, FP6) clamp in ieee mode too: said in the note,
// and flagged saturated, never as if ieee overflow applied.
TEST(CliFormats, FormatsWithoutInfSayThatIeeeModeClamps) {
  for (const std::string v : {"1e300", "inf", "7"}) {
    const Result r = run({"formats", v, "-f", "e2m1", "-o", "ieee"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(has_line(r.out, "E2M1FN    0x07", "saturated")) << v << "\n" << r.out;
    EXPECT_NE(r.out.find("E2M1FN has no Inf or NaN: ieee mode clamps too"), std::string::npos)
        << v << "\n"
        << r.out;
  }
  // In saturate mode the clamping is what was asked for: no such note.
  const Result s = run({"formats", "1e300", "-f", "e2m1"});
  EXPECT_EQ(s.out.find("ieee mode clamps too"), std::string::npos) << s.out;
}

// Outlier factors that take the outliers out of fp32's finite normal range (Inf, or
// zeros and subnormals) are refused, naming the factor and the range taken; the range's
// ends are taken.
TEST(CliDemo, OutlierFactorsBeyondFp32AreRefused) {
  for (const std::string k : {"1e300", "1e39", "1e-300", "1e-45"}) {
    const Result r = run({"demo", "outliers", "-k", k, "--json"});
    EXPECT_EQ(r.rc, 2) << k << "\n" << r.out;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find("outlier factor "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("out of fp32's finite normal range"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("factors from "), std::string::npos) << r.err;
  }
  const std::string err = run({"demo", "outliers", "-k", "1e300"}).err;
  EXPECT_NE(err.find("outlier factor 1e+300 "), std::string::npos) << err;
  const size_t from = err.find("factors from ") + 13;
  const size_t to = err.find(" to ", from);
  const size_t end = err.find(" are taken", to);
  ASSERT_NE(end, std::string::npos) << err;
  const std::string least = err.substr(from, to - from), most = err.substr(to + 4, end - to - 4);
  const Result ok = run({"demo", "outliers", "-k", least, "-k", most, "--json"});
  ASSERT_EQ(ok.rc, 0) << ok.err;
  const auto doc = nlohmann::json::parse(ok.out);
  ASSERT_EQ(doc["rows"].size(), 2u);
  for (const auto& row : doc["rows"]) EXPECT_TRUE(row["tensorwise_sqnr_db"].is_number()) << row;
}

// A scale that takes the gradients below fp32's normal range leaves zeros and subnormals
// before any cast: refused, naming the scale and the smallest one, which is taken.
TEST(CliDemo, GradientScaleBelowFp32IsRefused) {
  for (const std::string scale : {"1e-320", "1e-35"}) {
    const Result r = run({"demo", "gradients", "--scale", scale});
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find("the gradient scale " +
                         fp8wb::format_number(std::strtod(scale.c_str(), nullptr))),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("below fp32's smallest normal value"), std::string::npos) << r.err;
  }
  const std::string err = run({"demo", "gradients", "--scale", "1e-320"}).err;
  const std::string said = "the smallest scale is ";
  ASSERT_NE(err.find(said), std::string::npos) << err;
  const std::string least = err.substr(err.find(said) + said.size());
  EXPECT_EQ(least, "1.176e-30\n");
  const Result ok = run({"demo", "gradients", "--scale", "1.176e-30", "--json"});
  ASSERT_EQ(ok.rc, 0) << ok.err;
}

}  // namespace

namespace {

// The code points (not bytes) before byte offset `at` of `line`: a column on a terminal
// for the demo's text, whose block characters take one column each.
size_t column_of(const std::string& line, size_t at) {
  size_t n = 0;
  for (size_t i = 0; i < at && i < line.size(); ++i) n += (line[i] & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// At a gradient scale of 2^24 about half the values lie beyond E4M3's 448 and are
// clamped: the table, the JSON and a note say how many, and the note says why the SQNR
// is near 0 dB; the histogram takes in every value's bin and its band stands under it.
TEST(CliDemo, GradientsSayWhatIsClampedAndWhy) {
  const Result j = run({"demo", "gradients", "--scale", "16777216", "--json"});
  ASSERT_EQ(j.rc, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  const double n = doc["n"].get<double>();
  const auto& cast = doc["cases"][0];  // E4M3FN, a plain cast
  ASSERT_EQ(cast["format"], "E4M3FN");
  ASSERT_EQ(cast["scaling"], "none");
  ASSERT_TRUE(cast["saturated"].is_number_unsigned()) << cast.dump();
  const double clamped = cast["saturated"].get<double>();
  EXPECT_GT(clamped, 0.4 * n);
  EXPECT_LT(clamped, 0.6 * n);
  EXPECT_NEAR(cast["saturated_pct"].get<double>(), 100.0 * clamped / n, 1e-9);
  EXPECT_LT(cast["sqnr_db"].get<double>(), 1.0);
  ASSERT_TRUE(cast["note"].is_string()) << cast.dump();
  const std::string note = cast["note"];
  EXPECT_NE(note.find("clamped"), std::string::npos) << note;
  EXPECT_NE(note.find("448"), std::string::npos) << note;
  EXPECT_NE(note.find(fmt::format("{:.2f}%", cast["saturated_pct"].get<double>())),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("SQNR"), std::string::npos) << note;
  // Per-tensor scaling never clamps: nothing to note.
  EXPECT_EQ(doc["cases"][1]["saturated"], 0);
  EXPECT_TRUE(doc["cases"][1]["note"].is_null()) << doc["cases"][1].dump();

  const Result t = run({"demo", "gradients", "--scale", "16777216"});
  ASSERT_EQ(t.rc, 0) << t.err;
  const auto lines = lines_of(t.out);
  size_t header = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("format", 0) == 0) header = i;
  }
  ASSERT_LT(header + 3, lines.size()) << t.out;
  EXPECT_NE(lines[header].find("saturated"), std::string::npos) << t.out;
  const std::string& row = lines[header + 1];  // E4M3FN, none (cast)
  EXPECT_NE(row.find(fmt::format("{:.2f}% ({})", cast["saturated_pct"].get<double>(),
                                 cast["saturated"].get<uint64_t>())),
            std::string::npos)
      << t.out;
  // The note, its continuation lines (indented) joined to it.
  std::string flat = t.out;
  for (size_t at; (at = flat.find("\n      ")) != std::string::npos;) flat.replace(at, 7, " ");
  EXPECT_TRUE(has_line(flat, "Note: E4M3FN, none (cast): " + note + ".", "")) << t.out;
  EXPECT_TRUE(has_line(flat, "Note: E4M3FN, none (cast):",
                       fmt::format("(SQNR {:.1f} dB)", cast["sqnr_db"].get<double>())))
      << t.out;
  // The largest values, |g| up to 0.1 * 2^24 = 2^20.6, are in the histogram's bin 2^20.
  const std::string& bars = lines[header + 2];
  const std::string& band = lines[header + 3];
  ASSERT_NE(bars.find("log2|x*scale|"), std::string::npos) << t.out;
  EXPECT_EQ(bars.substr(bars.size() - 5), " 2^20") << t.out;
  // E4M3's band starts at its smallest subnormal, 2^-9, under the bin 2^-9.
  const size_t first_bin = column_of(bars, bars.find(' ', bars.find("2^")) + 1);
  const int lo = std::stoi(bars.substr(bars.find("2^") + 2));
  EXPECT_EQ(column_of(band, band.find('s')), first_bin + static_cast<size_t>(-9 - lo)) << t.out;
}

// The outliers demo names its comparison figures for what they are, a reference result
// from the literature on mixed-precision and FP8 training, with the figures themselves.
TEST(CliDemo, OutliersNameTheReferenceResult) {
  const Result r = run({"demo", "outliers"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find("chapter"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reference result from the mixed-precision / FP8 training literature"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("2.6% / 4.9% / 14.1% at k = 1e2 / 1e4 / 3e4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1x128 blocks 2.6% throughout"), std::string::npos) << r.out;
}

// `formats` explains values or lists a code table: a value given with --table is refused
// (it would be left out without a word), saying how to ask for each.
TEST(CliFormats, ValuesWithATableAreRefused) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"formats", "0.1", "--table", "e4m3"},
                                             {"formats", "--table", "e4m3", "0.1", "--json"},
                                             {"formats", "0.1", "-t", "e4m3", "--csv"}}) {
    const Result r = run(args);
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find("fp8wb formats: give values or --table, not both"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("`fp8wb formats 0.1 -f e4m3` explains 0.1 in e4m3"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("`fp8wb formats --table e4m3` lists its codes"), std::string::npos)
        << r.err;
  }
}

// E8M0FNU has no subnormals: its table's header says so, not "min subnormal 0".
TEST(CliFormats, E8M0TableSaysItHasNoSubnormals) {
  const Result r = run({"formats", "--table", "e8m0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string head = r.out.substr(0, r.out.find('\n'));
  EXPECT_NE(head.find("E8M0FNU:"), std::string::npos) << head;
  EXPECT_NE(head.find("min subnormal none"), std::string::npos) << head;
  EXPECT_EQ(head.find("min subnormal 0"), std::string::npos) << head;
  const Result e4 = run({"formats", "--table", "e4m3"});
  const std::string e4_head = e4.out.substr(0, e4.out.find('\n'));
  EXPECT_NE(e4_head.find("min subnormal " + fp8wb::format_number(std::ldexp(1.0, -9))),
            std::string::npos)
      << e4_head;
}

}  // namespace
