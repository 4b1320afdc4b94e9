// The AVX-512 statistics loop's histogram field counting (both variants: by compares, and
// by GFNI bit transposes with BITALG population counts) against a plain count, for every
// element format: fields in and around each format's hot range, zeros, rare fields one
// element at a time, and lengths around the counters' 64-element steps and their flushes.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "quantize_cpu_internal.h"

namespace fp8wb {
namespace {

using quantize_cpu_detail::RawHistogram;

#if defined(FP8WB_HAVE_AVX2_PATH)
using CountFn = void (*)(const uint8_t*, int64_t, RawHistogram&);

bool has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

bool has_gfni() {
  return has_avx512() && __builtin_cpu_supports("gfni") && __builtin_cpu_supports("avx512bitalg");
}

// Fields as the loop stores them: mostly near the format's largest exponent, some zeros,
// some anywhere in 0-255.
std::vector<uint8_t> fields(int64_t n, int top, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> kind(0, 9), near(top - 20, top + 3), any(0, 255);
  std::vector<uint8_t> b(static_cast<size_t>(n));
  for (auto& v : b) {
    const int k = kind(rng);
    v = static_cast<uint8_t>(k == 0 ? 0 : (k == 1 ? any(rng) : near(rng)));
  }
  return b;
}

void expect_counts(CountFn fn, Format f, const char* what) {
  const CodecSpec s = codec_spec(f);
  const int top = 127 + (s.max_mag >> s.mbits) - s.bias + 1;
  for (int64_t n : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{31 * 64},
                    int64_t{31 * 64 + 5}, int64_t{255 * 64 + 17}, int64_t{40000}}) {
    SCOPED_TRACE(std::string(what) + " " + std::string(format_info(f).name) +
                 " n=" + std::to_string(n));
    // Random fields; then one field throughout (the most a counter gains per step) at the
    // hot range's ends and zero.
    std::vector<std::vector<uint8_t>> cases = {fields(n, top, static_cast<uint32_t>(n))};
    for (int v : {top, top - 14, 0})
      cases.emplace_back(static_cast<size_t>(n), static_cast<uint8_t>(v));
    for (const auto& b : cases) {
      RawHistogram got;
      got.field[7] = 5;  // counts are added to what is there
      fn(b.data(), n, got);
      std::array<uint64_t, 256> want{};
      want[7] = 5;
      for (uint8_t v : b) ++want[v];
      for (size_t j = 0; j < 256; ++j) EXPECT_EQ(got.field[j], want[j]) << "field " << j;
    }
  }
}

template <Format F>
void both(bool gfni) {
  expect_counts(&quantize_cpu_detail::count_fields_avx512<F>, F, "compares");
  if (gfni) expect_counts(&quantize_cpu_detail::count_fields_gfni<F>, F, "GFNI");
}
#endif

TEST(FieldCount, EveryVariantCountsEveryField) {
#if defined(FP8WB_HAVE_AVX2_PATH)
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this processor";
  const bool gfni = has_gfni();
  both<Format::E4M3FN>(gfni);
  both<Format::E5M2>(gfni);
  both<Format::E4M3FNUZ>(gfni);
  both<Format::E5M2FNUZ>(gfni);
  both<Format::E2M1FN>(gfni);
  both<Format::E3M2FN>(gfni);
  both<Format::E2M3FN>(gfni);
  if (!gfni) GTEST_SKIP() << "no GFNI and BITALG: the compare variant alone was tested";
#else
  GTEST_SKIP() << "no AVX-512 loops in this build";
#endif
}

}  // namespace
}  // namespace fp8wb
