// The format explorer's logic against hand-worked cases and an fp64 nearest-value search.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "fp8wb/core/formats/value_report.h"

namespace fp8wb {
namespace {

TEST(ExplainValue, PointOneInE4M3) {
  // 0.1 = 1.6 * 2^-4: exponent field -4 + 7 = 3, mantissa 1.6 -> 1.625 (101).
  const ValueReport r = explain_value(0.1, Format::E4M3FN);
  EXPECT_EQ(r.code, 0x1D);
  EXPECT_EQ(r.bits.sign, "0");
  EXPECT_EQ(r.bits.exponent, "0011");
  EXPECT_EQ(r.bits.mantissa, "101");
  EXPECT_EQ(r.decoded, 0.1015625);
  EXPECT_DOUBLE_EQ(r.abs_error, 0.1015625 - 0.1);
  EXPECT_DOUBLE_EQ(r.rel_error, (0.1015625 - 0.1) / 0.1);
  ASSERT_TRUE(r.below && r.above);
  EXPECT_EQ(*r.below, 0.09375);
  EXPECT_EQ(*r.above, 0.109375);
  EXPECT_FALSE(r.exact || r.subnormal || r.saturated || r.underflow || r.is_nan);
}

TEST(ExplainValue, OneInEveryFormat) {
  const struct {
    Format f;
    uint8_t code;
  } want[] = {{Format::E4M3FN, 0x38},   {Format::E5M2, 0x3C},    {Format::E4M3FNUZ, 0x40},
              {Format::E5M2FNUZ, 0x40}, {Format::E8M0FNU, 0x7F}, {Format::E2M1FN, 0x2},
              {Format::E3M2FN, 0x0C},   {Format::E2M3FN, 0x08}};
  for (const auto& w : want) {
    const ValueReport r = explain_value(1.0, w.f);
    EXPECT_EQ(r.code, w.code) << format_info(w.f).name;
    EXPECT_TRUE(r.exact);
    EXPECT_EQ(r.kind, CodeKind::Normal);
  }
}

TEST(ExplainValue, NoDoubleRoundingThroughFp32) {
  // 1.0625 is the tie between 1.0 and 1.125 in E4M3; a value a hair above it must go up,
  // although rounding it to fp32 first would land on the tie and go down to even (1.0).
  EXPECT_EQ(explain_value(1.0625 + 1e-12, Format::E4M3FN).decoded, 1.125);
  EXPECT_EQ(explain_value(1.0625 - 1e-12, Format::E4M3FN).decoded, 1.0);
  EXPECT_EQ(explain_value(1.0625, Format::E4M3FN).decoded, 1.0);
}

TEST(ExplainValue, NearestRepresentableAgainstFp64Search) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-12, 9);
  for (Format f : {Format::E4M3FN, Format::E5M2, Format::E2M1FN, Format::E3M2FN}) {
    const auto vals = representable_values(f);
    for (int i = 0; i < 3000; ++i) {
      const double x = std::exp2(u(rng)) * (i % 2 ? -1 : 1);
      if (std::fabs(x) > format_info(f).max_finite) continue;
      double best = vals.front();
      for (double v : vals) {
        if (std::fabs(v - x) < std::fabs(best - x)) best = v;
      }
      const ValueReport r = explain_value(x, f);
      // Ties aside (measure zero for random doubles), the decoded value is the nearest.
      EXPECT_EQ(std::fabs(r.decoded - x), std::fabs(best - x)) << format_info(f).name << " " << x;
    }
  }
}

TEST(ExplainValue, Flags) {
  EXPECT_TRUE(explain_value(0.001953125, Format::E4M3FN).subnormal);  // 2^-9
  EXPECT_TRUE(explain_value(0.0009, Format::E4M3FN).underflow);       // < 2^-10
  const ValueReport sat = explain_value(1000, Format::E4M3FN);
  EXPECT_TRUE(sat.saturated);
  EXPECT_EQ(sat.decoded, 448);
  const ValueReport inf = explain_value(1e6, Format::E5M2, Overflow::Ieee);
  EXPECT_TRUE(inf.overflowed);
  EXPECT_EQ(inf.kind, CodeKind::Infinity);
  EXPECT_TRUE(std::isinf(inf.abs_error));
  const ValueReport nan = explain_value(1e6, Format::E4M3FN, Overflow::Ieee);
  EXPECT_TRUE(nan.overflowed && nan.is_nan);
  const ValueReport beyond = explain_value(1e300, Format::E5M2, Overflow::Saturate);
  EXPECT_TRUE(beyond.saturated);
  EXPECT_EQ(beyond.decoded, 57344);
  const ValueReport nz = explain_value(-1e-9, Format::E4M3FNUZ);
  EXPECT_EQ(nz.code, 0x00);
  EXPECT_NE(nz.note.find("no -0"), std::string::npos);
  const ValueReport e8 = explain_value(-2, Format::E8M0FNU);
  EXPECT_TRUE(e8.is_nan);
  EXPECT_FALSE(e8.note.empty());
  const ValueReport fp4nan = explain_value(NAN, Format::E2M1FN);
  EXPECT_EQ(fp4nan.code, 0x08);  // ml_dtypes' convention
  EXPECT_NE(fp4nan.note.find("no NaN"), std::string::npos);
}

TEST(CodeTable, CountsOfEachKind) {
  auto count = [](Format f, CodeKind k) {
    int n = 0;
    for (const auto& r : code_table(f)) n += r.kind == k;
    return n;
  };
  EXPECT_EQ(code_table(Format::E4M3FN).size(), 256u);
  EXPECT_EQ(count(Format::E4M3FN, CodeKind::NaN), 2);
  EXPECT_EQ(count(Format::E4M3FN, CodeKind::Subnormal), 14);
  EXPECT_EQ(count(Format::E4M3FN, CodeKind::Zero), 2);
  EXPECT_EQ(count(Format::E5M2, CodeKind::NaN), 6);
  EXPECT_EQ(count(Format::E5M2, CodeKind::Infinity), 2);
  EXPECT_EQ(count(Format::E4M3FNUZ, CodeKind::NaN), 1);
  EXPECT_EQ(count(Format::E4M3FNUZ, CodeKind::Zero), 1);
  EXPECT_EQ(count(Format::E8M0FNU, CodeKind::Normal), 255);
  EXPECT_EQ(code_table(Format::E2M1FN).size(), 16u);
  EXPECT_EQ(code_table(Format::E3M2FN).size(), 64u);
  EXPECT_EQ(split_bits(0x7E, Format::E4M3FN).joined('|'), "0|1111|110");
  EXPECT_EQ(split_bits(0x7F, Format::E8M0FNU).joined('|'), "01111111");
}

TEST(CodeTable, RepresentableValuesOfFp4) {
  const std::vector<double> want = {-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6};
  EXPECT_EQ(representable_values(Format::E2M1FN), want);
  EXPECT_EQ(representable_values(Format::E4M3FN).size(), 253u);  // 256 - 2 NaN - one -0
}

TEST(ParseValue, AcceptedSpellings) {
  EXPECT_EQ(parse_value("0.5"), 0.5);
  EXPECT_EQ(parse_value("  -3e-5 "), -3e-5);
  EXPECT_EQ(parse_value("0x1.8p3"), 12.0);
  EXPECT_EQ(parse_value("2^-9"), 0.001953125);
  EXPECT_EQ(parse_value("-2^10"), -1024.0);
  EXPECT_TRUE(std::isinf(parse_value("inf")));
  EXPECT_TRUE(std::isinf(parse_value("-Infinity")));
  EXPECT_TRUE(std::isnan(parse_value("nan")));
}

// Values beyond fp64's range, either way and however written, are refused alike, by name.
TEST(ParseValue, BeyondFp64IsRefusedAlike) {
  for (const char* text : {"1e400", "-1e400", "2^99999", "2^1024", "0x1p2000", "1e-400", "-1e-400",
                           "2^-99999", "0x1p-2000"}) {
    try {
      parse_value(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(
          std::string(e.what()).find("'" + std::string(text) + "' is beyond the range of fp64"),
          std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(parse_value("2^1023"), std::ldexp(1.0, 1023));
  EXPECT_EQ(parse_value("2^-1074"), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(parse_value("0e999"), 0.0);
  EXPECT_EQ(parse_value("0x0p0"), 0.0);
}

// One number, however written, is one number: the Formats tab and `fp8wb formats` name the
// typed text beside the value shown only where they differ. 3^40 = 12157665459056928801
// and 5^-3 = 0.008 (1/125) worked by hand; 30^20 = 3486784401 x 10^20.
TEST(ParseValue, TextsSayTheSameNumberByValueNotSpelling) {
  const std::pair<const char*, const char*> same[] = {{"1e-3", "0.001"},
                                                      {"1E-03", "0.001"},
                                                      {"0.0010", "0.001"},
                                                      {"10^-3", "0.001"},
                                                      {"+0.001", "0.001"},
                                                      {" 1e-3 ", "0.001"},
                                                      {"-1e-3", "-0.001"},
                                                      {"0.1^3", "0.001"},
                                                      {"5^-3", "0.008"},
                                                      {"3^40", "12157665459056928801"},
                                                      {"30^20", "3.486784401e+29"},
                                                      {"-2^10", "-1024"},
                                                      {"0", "-0e5"},
                                                      {"1.5e1", "15"}};
  for (const auto& [a, b] : same) {
    EXPECT_TRUE(says_same_number(a, b)) << a << " vs " << b;
    EXPECT_TRUE(says_same_number(b, a)) << b << " vs " << a;
  }
  const std::pair<const char*, const char*> different[] = {{"0.0010000000000000000001", "0.001"},
                                                           {"1e-3", "-0.001"},
                                                           {"10^-3.0000000000000000001", "0.001"},
                                                           {"3^-1", "0.3333333333333333"},
                                                           {"2^0.5", "1.4142135623730951"},
                                                           {"0x1p-1", "0.5"},
                                                           {"inf", "inf"},
                                                           {"3^40", "1.2157665459056929e+19"}};
  for (const auto& [a, b] : different) EXPECT_FALSE(says_same_number(a, b)) << a << " vs " << b;
}

// Whether fp64 rounded the text: then no result is exact.
TEST(ParseValue, SaysWhereFp64RoundedTheText) {
  for (const char* text :
       {"0.5", "-3", "2^-9", "3^2", "0x1.8p3", "1.25e2", "0.0", "inf", "0e7", "0.0009765625"}) {
    EXPECT_FALSE(parse_value_exactly(text).rounded) << text;
  }
  for (const char* text :
       {"0.1", "1.00000000000000000001", "1e-310", "10^-1", "2^0.5", "3^40", "1e308"}) {
    EXPECT_TRUE(parse_value_exactly(text).rounded) << text;
  }
  // Hex text: fp64 holds 53 bits (1 + 2^-52 and 2^-1074 exactly, 1 + 2^-56 and
  // 1.5 * 2^-1074 not), however the text spells them.
  for (const char* text :
       {"0x1.0000000000001p0", "0x1.fffffffffffffp1023", "0x1p-1074", "0x0.0000000000001p-1022",
        "0x10p-4", "0x0.8p1", "0X1.8P3", "0x000.100"}) {
    EXPECT_FALSE(parse_value_exactly(text).rounded) << text;
  }
  for (const char* text : {"0x1.00000000000001p0", "0x1.00000000000008p0", "0x1.8p-1074",
                           "0x3fffffffffffffp0", "0x1.fffffffffffff8p0"}) {
    EXPECT_TRUE(parse_value_exactly(text).rounded) << text;
  }
  EXPECT_EQ(parse_value_exactly("0x1.00000000000001p0").value, 1.0);
  EXPECT_FALSE(explain_value(parse_value_exactly("0x1.00000000000001p0"), Format::E4M3FN).exact);
  const ParsedValue one = parse_value_exactly("1.00000000000000000001");
  EXPECT_EQ(one.value, 1.0);
  EXPECT_FALSE(explain_value(one, Format::E4M3FN).exact);
  EXPECT_TRUE(explain_value(parse_value_exactly("1"), Format::E4M3FN).exact);
}

TEST(ParseValue, RejectsNonNumbers) {
  for (const char* bad : {"", "abc", "1e", "1..2", "0.1x", "2^", "^3", "--1"}) {
    try {
      parse_value(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("not a number"), std::string::npos);
    }
  }
}

TEST(FormatNumber, ShortestExact) {
  EXPECT_EQ(format_number(500), "500");
  EXPECT_EQ(format_number(57344), "57344");
  EXPECT_EQ(format_number(0.1015625), "0.1015625");
  EXPECT_EQ(format_number(0.1), "0.1");
  EXPECT_EQ(format_number(-0.0), "-0");
  EXPECT_EQ(format_number(std::ldexp(1.0, -17)), "7.62939453125e-06");
  EXPECT_EQ(format_number(NAN), "nan");
  EXPECT_EQ(format_number(-INFINITY), "-inf");
}

}  // namespace
}  // namespace fp8wb
