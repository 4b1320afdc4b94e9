// Every code and every golden input of every format, bit for bit against ml_dtypes.
#include <gtest/gtest.h>

#include <vector>

#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/codec_cpu.h"
#include "golden.h"

namespace fp8wb {
namespace {

class GoldenTest : public ::testing::TestWithParam<Format> {
 protected:
  const FormatInfo& info() const { return format_info(GetParam()); }
  std::string name() const { return std::string(info().name); }
};

TEST_P(GoldenTest, DecodeEveryCode) {
  const auto golden = test::load_golden_codes(name());
  ASSERT_EQ(golden.value_bits.size(), static_cast<size_t>(info().code_count));
  for (size_t c = 0; c < golden.value_bits.size(); ++c) {
    EXPECT_EQ(decode_bits(static_cast<uint8_t>(c), info().spec), golden.value_bits[c])
        << name() << " code 0x" << std::hex << c;
  }
}

TEST_P(GoldenTest, ScalarEncodeBothOverflowModes) {
  const auto rows = test::load_golden_encode(name());
  ASSERT_GT(rows.size(), 4000u);
  size_t bad = 0;
  for (const auto& r : rows) {
    const uint8_t ieee = encode_bits(r.input_bits, info().spec, Overflow::Ieee);
    const uint8_t sat = encode_bits(r.input_bits, info().spec, Overflow::Saturate);
    if (ieee != r.ieee || sat != r.saturate) {
      if (++bad <= 10) {
        ADD_FAILURE() << name() << " input 0x" << std::hex << r.input_bits << ": ieee 0x"
                      << int(ieee) << " (want 0x" << int(r.ieee) << "), saturate 0x" << int(sat)
                      << " (want 0x" << int(r.saturate) << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST_P(GoldenTest, BulkEncodeF32AnyThreadCount) {
  const auto rows = test::load_golden_encode(name());
  // Repeat the table so that the bulk path splits it over several chunks.
  std::vector<float> in;
  std::vector<uint8_t> want_ieee, want_sat;
  for (int rep = 0; rep < 40; ++rep) {
    for (const auto& r : rows) {
      in.push_back(bits_float(r.input_bits));
      want_ieee.push_back(r.ieee);
      want_sat.push_back(r.saturate);
    }
  }
  for (int threads : {1, 2, 3}) {
    std::vector<uint8_t> out(in.size(), 0xAA);
    encode_f32(in.data(), out.data(), in.size(), {GetParam(), Overflow::Ieee}, threads);
    EXPECT_EQ(out, want_ieee) << name() << " threads " << threads;
    std::fill(out.begin(), out.end(), 0xAA);
    encode_f32(in.data(), out.data(), in.size(), {GetParam(), Overflow::Saturate}, threads);
    EXPECT_EQ(out, want_sat) << name() << " threads " << threads;
  }
}

TEST_P(GoldenTest, BulkEncodeBf16ExactInputs) {
  std::vector<uint16_t> in;
  std::vector<uint8_t> want;
  for (const auto& r : test::load_golden_encode(name())) {
    if ((r.input_bits & 0xFFFF) == 0) {
      in.push_back(static_cast<uint16_t>(r.input_bits >> 16));
      want.push_back(r.ieee);
    }
  }
  ASSERT_GT(in.size(), 20u);
  std::vector<uint8_t> out(in.size());
  encode_bf16(in.data(), out.data(), in.size(), {GetParam(), Overflow::Ieee});
  EXPECT_EQ(out, want);
}

TEST_P(GoldenTest, BulkDecodeMatchesGolden) {
  const auto golden = test::load_golden_codes(name());
  std::vector<uint8_t> codes;
  for (int rep = 0; rep < 600; ++rep) {
    for (size_t c = 0; c < golden.value_bits.size(); ++c) codes.push_back(static_cast<uint8_t>(c));
  }
  std::vector<float> out(codes.size());
  decode_f32(codes.data(), out.data(), codes.size(), GetParam(), 2);
  for (size_t i = 0; i < codes.size(); ++i) {
    ASSERT_EQ(float_bits(out[i]), golden.value_bits[codes[i]]) << name() << " at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, GoldenTest, ::testing::ValuesIn(kAllFormats),
                         [](const auto& p) { return std::string(format_info(p.param).name); });

}  // namespace
}  // namespace fp8wb
