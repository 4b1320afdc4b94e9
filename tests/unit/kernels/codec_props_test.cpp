// Properties of the codec that no table lists: rounding to a neighbour, monotonicity,
// stochastic rounding, bf16 inputs, and the reference cases of numerics.md.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/codec_cpu.h"

namespace fp8wb {
namespace {

class CodecProps : public ::testing::TestWithParam<Format> {
 protected:
  const CodecSpec& spec() const { return format_info(GetParam()).spec; }
};

// The representable neighbours of x (fp64): the largest value <= x and the smallest >= x.
std::pair<double, double> neighbours(double x, Format f) {
  double lo = -INFINITY, hi = INFINITY;
  for (int c = 0; c < format_info(f).code_count; ++c) {
    const double v = decode(static_cast<uint8_t>(c), codec_spec(f));
    if (!std::isfinite(v)) continue;
    if (v <= x && v > lo) lo = v;
    if (v >= x && v < hi) hi = v;
  }
  return {lo, hi};
}

TEST_P(CodecProps, RoundTripEveryFiniteCode) {
  for (int c = 0; c < format_info(GetParam()).code_count; ++c) {
    const float v = decode(static_cast<uint8_t>(c), spec());
    if (std::isnan(v)) continue;
    if (std::isinf(v)) {
      EXPECT_EQ(encode(v, spec(), Overflow::Ieee), c);
      continue;
    }
    EXPECT_EQ(encode(v, spec(), Overflow::Saturate), c) << "code " << c << " value " << v;
  }
}

TEST_P(CodecProps, NearestEvenPicksTheNearerNeighbour) {
  std::mt19937 rng(7);
  const double fmax = format_info(GetParam()).max_finite;
  // E8M0FNU follows ml_dtypes, which rounds fp32 subnormals above 2^-127 up to 2^-126
  // (golden-tested); nearest rounding holds from 2^-126 on.
  const double lowest =
      GetParam() == Format::E8M0FNU ? -126.0 : std::log2(format_info(GetParam()).min_normal) - 3;
  std::uniform_real_distribution<double> logu(lowest, std::log2(fmax));
  for (int i = 0; i < 20000; ++i) {
    const float x = static_cast<float>(std::exp2(logu(rng)));
    const auto [lo, hi] = neighbours(x, GetParam());
    const double got = decode(encode(x, spec(), Overflow::Saturate), spec());
    ASSERT_TRUE(got == lo || got == hi) << x;
    const double dlo = x - lo, dhi = hi - x;
    if (dlo < dhi) {
      ASSERT_EQ(got, lo) << x;
    } else if (dhi < dlo) {
      ASSERT_EQ(got, hi) << x;
    }
  }
}

TEST_P(CodecProps, EncodeIsMonotone) {
  std::vector<float> xs;
  const double fmax = format_info(GetParam()).max_finite;
  for (double x = -1.5 * fmax; x <= 1.5 * fmax; x += fmax / 997)
    xs.push_back(static_cast<float>(x));
  double prev = -INFINITY;
  for (float x : xs) {
    const double v = decode(encode(x, spec(), Overflow::Saturate), spec());
    if (std::isnan(v)) continue;  // E8M0: negatives
    EXPECT_GE(v, prev) << x;
    prev = v;
  }
}

TEST_P(CodecProps, StochasticRoundingIsUnbiasedAndLandsOnNeighbours) {
  const auto& info = format_info(GetParam());
  // A value a third of the way between two neighbours, in the normal range.
  const double a = info.min_normal * 2, b = a * (1 + info.epsilon);
  const float x = static_cast<float>(a + (b - a) / 3);
  const size_t n = 200000;
  std::vector<float> in(n, x);
  std::vector<uint8_t> out(n);
  encode_f32(in.data(), out.data(), n, {GetParam(), Overflow::Saturate, Rounding::Stochastic, 42});
  double sum = 0;
  size_t ups = 0;
  for (uint8_t c : out) {
    const double v = decode(c, spec());
    ASSERT_TRUE(v == a || v == b) << v;
    sum += v;
    ups += v == b;
  }
  // P(up) = 1/3; the binomial standard deviation is ~0.001 of n.
  EXPECT_NEAR(static_cast<double>(ups) / n, 1.0 / 3, 0.006);
  EXPECT_NEAR(sum / n, static_cast<double>(x), (b - a) * 0.006);

  // Deterministic for a seed, independent of threads; another seed differs.
  std::vector<uint8_t> again(n), other(n);
  encode_f32(in.data(), again.data(), n, {GetParam(), Overflow::Saturate, Rounding::Stochastic, 42},
             1);
  encode_f32(in.data(), other.data(), n, {GetParam(), Overflow::Saturate, Rounding::Stochastic, 43},
             2);
  EXPECT_EQ(out, again);
  EXPECT_NE(out, other);
}

TEST_P(CodecProps, StochasticRoundingKeepsExactValues) {
  for (int c = 0; c < format_info(GetParam()).code_count; ++c) {
    const float v = decode(static_cast<uint8_t>(c), spec());
    if (!std::isfinite(v)) continue;
    for (uint32_t r : {0u, 1u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x12345678u}) {
      EXPECT_EQ(encode(v, spec(), Overflow::Saturate, Rounding::Stochastic, r), c);
    }
  }
}

TEST_P(CodecProps, Bf16EqualsWidenedFp32ForEveryPattern) {
  std::vector<uint16_t> bf(65536);
  std::vector<float> widened(65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    bf[i] = static_cast<uint16_t>(i);
    widened[i] = bits_float(i << 16);
  }
  for (Overflow ov : {Overflow::Saturate, Overflow::Ieee}) {
    std::vector<uint8_t> a(65536), b(65536);
    encode_bf16(bf.data(), a.data(), bf.size(), {GetParam(), ov});
    encode_f32(widened.data(), b.data(), widened.size(), {GetParam(), ov});
    EXPECT_EQ(a, b);
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, CodecProps, ::testing::ValuesIn(kAllFormats),
                         [](const auto& p) { return std::string(format_info(p.param).name); });

TEST(CodecReference, OneOutlierFlushesSmallValuesInE4M3) {
  // numerics.md: [-1, 1] with one 5000, per-tensor scale 448/5000: 0.01 becomes 0 because
  // 0.01 * scale falls below half the smallest subnormal (2^-10).
  const float scale = static_cast<float>(448.0 / std::max(5000.0, 1e-12));
  const CodecSpec s = codec_spec(Format::E4M3FN);
  EXPECT_EQ(encode(0.01f * scale, s, Overflow::Saturate), 0);
  EXPECT_EQ(decode(encode(5000.0f * scale, s, Overflow::Saturate), s), 448.0f);
  EXPECT_NE(encode(0.012f * scale, s, Overflow::Saturate), 0);  // just above 2^-10
}

TEST(CodecReference, TiesGoToEven) {
  const CodecSpec s = codec_spec(Format::E4M3FN);
  // Between 1.0 (mantissa 000) and 1.125 (001): the tie 1.0625 goes to 1.0;
  // between 1.125 and 1.25 the tie 1.1875 goes to 1.25 (mantissa 010).
  EXPECT_EQ(decode(encode(1.0625f, s, Overflow::Saturate), s), 1.0f);
  EXPECT_EQ(decode(encode(1.1875f, s, Overflow::Saturate), s), 1.25f);
  // Half the smallest subnormal is a tie between 0 and 2^-9: even is 0.
  EXPECT_EQ(encode(std::ldexp(1.0f, -10), s, Overflow::Saturate), 0);
  EXPECT_EQ(encode(std::nextafter(std::ldexp(1.0f, -10), 1.0f), s, Overflow::Saturate), 1);
}

TEST(CodecReference, OverflowModes) {
  const CodecSpec e4 = codec_spec(Format::E4M3FN), e5 = codec_spec(Format::E5M2);
  EXPECT_EQ(encode(1e6f, e4, Overflow::Saturate), 0x7E);
  EXPECT_EQ(encode(-1e6f, e4, Overflow::Saturate), 0xFE);
  EXPECT_EQ(encode(1e6f, e4, Overflow::Ieee), 0x7F);  // NaN: E4M3FN has no Inf
  EXPECT_EQ(encode(1e6f, e5, Overflow::Ieee), 0x7C);  // +Inf
  EXPECT_EQ(encode(-INFINITY, e5, Overflow::Saturate), 0xFB);
  EXPECT_EQ(encode(464.0f, e4, Overflow::Ieee), 0x7E);  // the tie 464 rounds down to 448
  EXPECT_EQ(encode(464.01f, e4, Overflow::Ieee), 0x7F);
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(encode(qnan, e4, Overflow::Saturate), 0x7F);
  EXPECT_EQ(encode(qnan, codec_spec(Format::E4M3FNUZ), Overflow::Saturate), 0x80);
  EXPECT_EQ(encode(-0.0f, codec_spec(Format::E4M3FNUZ), Overflow::Saturate), 0x00);
  EXPECT_EQ(encode(-0.0f, e4, Overflow::Saturate), 0x80);
}

// Zero elements: nothing is read or written, whether the pointers are null (run under
// the sanitizers) or point at buffers, which stay as they were.
TEST(CodecEdge, EmptyBuffersAreLeftUntouched) {
  encode_f32(nullptr, nullptr, 0, {});
  encode_bf16(nullptr, nullptr, 0, {});
  decode_f32(nullptr, nullptr, 0, Format::E5M2);
  const std::vector<float> in(4, 1.0f);
  const std::vector<uint16_t> in16(4, 0x3F80);
  std::vector<uint8_t> codes(4, 0xA5);
  std::vector<float> out(4, -7.0f);
  encode_f32(in.data(), codes.data(), 0, {});
  EXPECT_EQ(codes, std::vector<uint8_t>(4, 0xA5));
  encode_bf16(in16.data(), codes.data(), 0, {});
  EXPECT_EQ(codes, std::vector<uint8_t>(4, 0xA5));
  decode_f32(codes.data(), out.data(), 0, Format::E5M2);
  EXPECT_EQ(out, std::vector<float>(4, -7.0f));
  // The same buffers with one element are written (the calls above had every chance to).
  encode_f32(in.data(), codes.data(), 1, {});
  EXPECT_NE(codes[0], 0xA5);
  EXPECT_EQ(codes[1], 0xA5);
}

}  // namespace
}  // namespace fp8wb
