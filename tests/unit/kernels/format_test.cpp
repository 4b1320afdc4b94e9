// The format table against the figures of the OCP specs as numerics.md lists them.
#include <gtest/gtest.h>

#include <cmath>

#include "fp8wb/kernels/format.h"

namespace fp8wb {
namespace {

struct Expected {
  Format f;
  int bias;
  double max, min_normal, min_subnormal;
  bool inf, neg_zero;
};

TEST(FormatTable, MatchesNumericsDocument) {
  const Expected rows[] = {
      {Format::E4M3FN, 7, 448, std::ldexp(1, -6), std::ldexp(1, -9), false, true},
      {Format::E5M2, 15, 57344, std::ldexp(1, -14), std::ldexp(1, -16), true, true},
      {Format::E4M3FNUZ, 8, 240, std::ldexp(1, -7), std::ldexp(1, -10), false, false},
      {Format::E5M2FNUZ, 16, 57344, std::ldexp(1, -15), std::ldexp(1, -17), false, false},
      {Format::E8M0FNU, 127, std::ldexp(1, 127), std::ldexp(1, -127), 0, false, false},
      {Format::E2M1FN, 1, 6, 1, 0.5, false, true},
      {Format::E3M2FN, 3, 28, 0.25, std::ldexp(1, -4), false, true},
      {Format::E2M3FN, 1, 7.5, 1, 0.125, false, true},
  };
  for (const auto& e : rows) {
    const FormatInfo& i = format_info(e.f);
    SCOPED_TRACE(std::string(i.name));
    EXPECT_EQ(i.spec.bias, e.bias);
    EXPECT_EQ(i.max_finite, e.max);
    EXPECT_EQ(i.min_normal, e.min_normal);
    EXPECT_EQ(i.min_subnormal, e.min_subnormal);
    EXPECT_EQ(i.spec.has_inf, e.inf);
    EXPECT_EQ(i.spec.has_neg_zero, e.neg_zero);
    EXPECT_EQ(i.spec.bits, 1 + i.spec.ebits + i.spec.mbits - (i.spec.has_sign ? 0 : 1));
  }
  EXPECT_EQ(format_info(Format::E4M3FN).emax, 8);  // the MX emax_elem values
  EXPECT_EQ(format_info(Format::E5M2).emax, 15);
  EXPECT_EQ(format_info(Format::E2M1FN).emax, 2);
  EXPECT_EQ(format_info(Format::E4M3FN).epsilon, 0.125);
  EXPECT_EQ(format_info(Format::E5M2).epsilon, 0.25);
}

TEST(FormatNames, CanonicalNamesAndAliases) {
  for (Format f : kAllFormats) {
    EXPECT_EQ(parse_format(format_info(f).name), f);
    EXPECT_EQ(parse_format(format_info(f).ml_dtypes), f);
  }
  EXPECT_EQ(parse_format("e4m3"), Format::E4M3FN);
  EXPECT_EQ(parse_format("FP8_E5M2"), Format::E5M2);
  EXPECT_EQ(parse_format("fp4"), Format::E2M1FN);
  EXPECT_EQ(parse_format("mxfp6_e3m2"), Format::E3M2FN);
  EXPECT_EQ(parse_format("e4m3-fnuz"), Format::E4M3FNUZ);
  EXPECT_FALSE(parse_format("e4m4").has_value());
  EXPECT_FALSE(parse_format("").has_value());
  EXPECT_FALSE(parse_format("float8_").has_value());
  EXPECT_NE(format_names().find("E2M3FN"), std::string::npos);
  EXPECT_EQ(parse_overflow("SATURATE"), Overflow::Saturate);
  EXPECT_EQ(parse_overflow("ieee"), Overflow::Ieee);
  EXPECT_FALSE(parse_overflow("clip-ish").has_value());
}

}  // namespace
}  // namespace fp8wb
