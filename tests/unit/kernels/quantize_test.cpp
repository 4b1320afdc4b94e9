// Scaled quantization and its statistics against a plain fp64 recomputation, for every
// recipe and element format, plus hand-worked cases and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/quantize_cpu.h"
#include "test_tensors.h"

namespace fp8wb {
namespace {

struct Reference {
  std::vector<uint8_t> codes;
  std::vector<float> scale, scale_inv;
  StatsBuffer st{};
  std::vector<double> map_err, map_sum;
};

// Block extents written out independently of make_layout().
std::pair<int64_t, int64_t> block_of(ScalingKind k, int64_t rows, int64_t cols) {
  switch (k) {
    case ScalingKind::Tensorwise: return {rows, cols};
    case ScalingKind::Rowwise: return {1, cols};
    case ScalingKind::Block1x128: return {1, 128};
    case ScalingKind::Block128x128: return {128, 128};
    case ScalingKind::MX: return {1, 32};
    case ScalingKind::NVFP4: return {1, 16};
  }
  return {1, 1};
}

bool ref_saturates(double y, Format f) {
  const auto& info = format_info(f);
  double second = 0;
  for (int c = 0; c < info.code_count; ++c) {
    const double v = decode(static_cast<uint8_t>(c), info.spec);
    if (std::isfinite(v) && v < info.max_finite) second = std::max(second, v);
  }
  const double t = info.max_finite + (info.max_finite - second) / 2;
  const bool max_odd = (info.spec.max_mag & 1u) != 0;
  return std::fabs(y) > t || (std::fabs(y) == t && max_odd);
}

Reference reference(const std::vector<float>& x, int64_t rows, int64_t cols, const QuantRecipe& r) {
  const auto [br, bc] = block_of(r.kind, rows, cols);
  const int64_t gr = (rows + br - 1) / br, gc = (cols + bc - 1) / bc;
  const auto& info = format_info(r.format);
  const double fmax = info.max_finite;
  std::vector<double> amax(static_cast<size_t>(gr * gc), 0.0);
  double tensor_amax = 0;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const double v = x[static_cast<size_t>(i * cols + j)];
      if (!std::isfinite(v)) continue;
      double& a = amax[static_cast<size_t>((i / br) * gc + j / bc)];
      a = std::max(a, std::fabs(v));
      tensor_amax = std::max(tensor_amax, std::fabs(v));
    }
  }
  Reference ref;
  const float g = tensor_amax > 0 ? static_cast<float>(448.0 * fmax / tensor_amax) : 1.0f;
  for (double a : amax) {
    float s = 1, inv = 1;
    if (r.kind == ScalingKind::MX) {
      int e = 0;
      if (a > 0) {
        e = r.mx_rounding == MxRounding::Floor
                ? static_cast<int>(std::floor(std::log2(a))) - info.emax
                : static_cast<int>(std::ceil(std::log2(a / fmax)));
      }
      e = std::clamp(e, -127, 127);
      s = static_cast<float>(std::exp2(-e));
      inv = static_cast<float>(std::exp2(e));
    } else if (r.kind == ScalingKind::NVFP4) {
      const CodecSpec e4 = codec_spec(Format::E4M3FN);
      const float ds = decode(encode(static_cast<float>(a / fmax) * g, e4, Overflow::Saturate), e4);
      s = ds > 0 ? g / ds : 0.0f;
      inv = ds / g;
    } else {
      if (a > 0) {
        s = static_cast<float>(fmax / a);
        s = static_cast<float>(std::ldexp(static_cast<double>(s), -r.margin));
        if (r.pow2_scales)
          s = static_cast<float>(std::exp2(std::floor(std::log2(static_cast<double>(s)))));
      }
      inv = 1.0f / s;
    }
    ref.scale.push_back(s);
    ref.scale_inv.push_back(inv);
  }
  const MapGrid grid = make_map_grid(make_layout(r, rows, cols), 64);
  ref.map_err.assign(static_cast<size_t>(grid.cell_count()), 0.0);
  ref.map_sum.assign(ref.map_err.size(), 0.0);
  ref.codes.resize(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const size_t k = static_cast<size_t>(i * cols + j);
      const size_t grp = static_cast<size_t>((i / br) * gc + j / bc);
      const float v = x[k];
      const float y = v * ref.scale[grp];
      const uint8_t code = encode(y, info.spec, Overflow::Saturate);
      ref.codes[k] = code;
      ref.st.numel++;
      if (!std::isfinite(v)) {
        ref.st.nonfinite++;
        ref.st.hist[kHistNonfiniteBin]++;
        continue;
      }
      const double d = static_cast<double>(decode(code, info.spec) * ref.scale_inv[grp]);
      if (v == 0) {
        ref.st.zeros++;
        ref.st.hist[kHistZeroBin]++;
      } else {
        ref.st.underflow += d == 0;
        const int e =
            y == 0 ? -1000
                   : static_cast<int>(std::floor(std::log2(std::fabs(static_cast<double>(y)))));
        ref.st.hist[std::clamp(e - kHistMinExp, 0, kHistExpBins - 1)]++;
      }
      const float dv = decode(code, info.spec);
      const auto mag = code & ((1u << (info.spec.bits - 1)) - 1u);
      ref.st.subnormal += dv != 0 && (mag >> info.spec.mbits) == 0;
      ref.st.saturated += ref_saturates(y, r.format);
      const double err = static_cast<double>(v) - d;
      ref.st.sq_err += err * err;
      ref.st.sq_sum += static_cast<double>(v) * v;
      ref.st.amax_bits = std::max(ref.st.amax_bits, float_bits(std::fabs(v)));
      const size_t cell =
          static_cast<size_t>((i / grid.cell_rows) * grid.cols + j / grid.cell_cols);
      ref.map_err[cell] += err * err;
      ref.map_sum[cell] += static_cast<double>(v) * v;
    }
  }
  return ref;
}

std::vector<float> test_tensor(int64_t rows, int64_t cols, uint32_t seed) {
  return test::mixed_test_tensor(rows, cols, seed);
}

void expect_close(double a, double b, const char* what) {
  EXPECT_NEAR(a, b, 1e-9 * std::max(std::fabs(a), std::fabs(b)) + 1e-300) << what;
}

void expect_same_stats(const TensorStats& a, const TensorStats& b) {
  EXPECT_EQ(a.raw.numel, b.raw.numel);
  EXPECT_EQ(a.raw.zeros, b.raw.zeros);
  EXPECT_EQ(a.raw.nonfinite, b.raw.nonfinite);
  EXPECT_EQ(a.raw.underflow, b.raw.underflow);
  EXPECT_EQ(a.raw.subnormal, b.raw.subnormal);
  EXPECT_EQ(a.raw.saturated, b.raw.saturated);
  EXPECT_EQ(a.raw.amax_bits, b.raw.amax_bits);
  EXPECT_EQ(a.raw.sq_err, b.raw.sq_err);
  EXPECT_EQ(a.raw.sq_sum, b.raw.sq_sum);
  for (int i = 0; i < kHistBins; ++i) EXPECT_EQ(a.raw.hist[i], b.raw.hist[i]) << "bin " << i;
  EXPECT_EQ(a.map_sq_err, b.map_sq_err);
  EXPECT_EQ(a.map_sq_sum, b.map_sq_sum);
}

struct RecipeCase {
  QuantRecipe recipe;
  int64_t rows, cols;
};

class QuantizeAgainstReference : public ::testing::TestWithParam<RecipeCase> {};

TEST_P(QuantizeAgainstReference, CodesScalesAndEveryStatistic) {
  const auto [recipe, rows, cols] = GetParam();
  const auto x = test_tensor(rows, cols, 3);
  const Reference ref = reference(x, rows, cols, recipe);
  std::vector<uint8_t> codes(x.size(), 0xAA);
  const auto cq =
      quantize_current(TensorRef::of(x.data(), rows, cols), recipe, {codes.data()}, {}, nullptr, 2);
  EXPECT_EQ(cq.scales.scale, ref.scale);
  EXPECT_EQ(cq.scales.scale_inv, ref.scale_inv);
  EXPECT_EQ(codes, ref.codes);
  const StatsBuffer& s = cq.result.stats.raw;
  EXPECT_EQ(s.numel, ref.st.numel);
  EXPECT_EQ(s.zeros, ref.st.zeros);
  EXPECT_EQ(s.nonfinite, ref.st.nonfinite);
  EXPECT_EQ(s.underflow, ref.st.underflow);
  EXPECT_EQ(s.subnormal, ref.st.subnormal);
  EXPECT_EQ(s.saturated, ref.st.saturated);
  EXPECT_EQ(s.amax_bits, ref.st.amax_bits);
  expect_close(s.sq_err, ref.st.sq_err, "sq_err");
  expect_close(s.sq_sum, ref.st.sq_sum, "sq_sum");
  for (int b = 0; b < kHistBins; ++b) EXPECT_EQ(s.hist[b], ref.st.hist[b]) << "histogram bin " << b;
  ASSERT_EQ(cq.result.stats.map_sq_err.size(), ref.map_err.size());
  for (size_t i = 0; i < ref.map_err.size(); ++i) {
    expect_close(cq.result.stats.map_sq_err[i], ref.map_err[i], "map err");
    expect_close(cq.result.stats.map_sq_sum[i], ref.map_sum[i], "map sum");
  }
  // Without codes (the analysis' statistics-only loop): the same statistics, bit for bit.
  const auto so = quantize_current(TensorRef::of(x.data(), rows, cols), recipe, {}, {}, nullptr, 2);
  expect_same_stats(so.result.stats, cq.result.stats);
  // Dequantize gives scale_inv * decode(code), element by element.
  std::vector<float> back(x.size());
  dequantize(codes.data(), recipe, cq.scales, back.data());
  for (size_t i = 0; i < x.size(); i += 7) {
    const auto grp = static_cast<size_t>(
        cq.scales.layout.group_of(static_cast<int64_t>(i) / cols, static_cast<int64_t>(i) % cols));
    EXPECT_EQ(float_bits(back[i]),
              float_bits(decode(codes[i], codec_spec(recipe.format)) * cq.scales.scale_inv[grp]));
  }
}

QuantRecipe R(ScalingKind k, Format f, int margin = 0, bool pow2 = false,
              MxRounding mx = MxRounding::Floor) {
  QuantRecipe r;
  r.kind = k;
  r.format = f;
  r.margin = margin;
  r.pow2_scales = pow2;
  r.mx_rounding = mx;
  return r;
}

INSTANTIATE_TEST_SUITE_P(
    Recipes, QuantizeAgainstReference,
    ::testing::Values(
        RecipeCase{R(ScalingKind::Tensorwise, Format::E4M3FN), 96, 256},
        RecipeCase{R(ScalingKind::Tensorwise, Format::E5M2), 96, 256},
        RecipeCase{R(ScalingKind::Tensorwise, Format::E4M3FNUZ, 1), 64, 128},
        RecipeCase{R(ScalingKind::Tensorwise, Format::E5M2FNUZ, 0, true), 64, 128},
        RecipeCase{R(ScalingKind::Tensorwise, Format::E4M3FN, 3, true), 40, 300},
        RecipeCase{R(ScalingKind::Rowwise, Format::E4M3FN), 96, 256},
        RecipeCase{R(ScalingKind::Rowwise, Format::E5M2, 2), 33, 200},
        RecipeCase{R(ScalingKind::Block1x128, Format::E4M3FN), 64, 512},
        RecipeCase{R(ScalingKind::Block1x128, Format::E5M2), 64, 384},
        RecipeCase{R(ScalingKind::Block128x128, Format::E4M3FN), 256, 384},
        RecipeCase{R(ScalingKind::Block128x128, Format::E4M3FN, 0, true), 128, 128},
        RecipeCase{R(ScalingKind::MX, Format::E4M3FN), 64, 256},
        RecipeCase{R(ScalingKind::MX, Format::E5M2), 64, 256},
        RecipeCase{R(ScalingKind::MX, Format::E4M3FN, 0, false, MxRounding::RCeil), 64, 256},
        RecipeCase{R(ScalingKind::MX, Format::E2M1FN), 32, 128},
        RecipeCase{R(ScalingKind::MX, Format::E3M2FN, 0, false, MxRounding::RCeil), 32, 128},
        RecipeCase{R(ScalingKind::MX, Format::E2M3FN), 32, 128},
        RecipeCase{R(ScalingKind::NVFP4, Format::E2M1FN), 64, 256}),
    [](const auto& p) {
      std::string n = recipe_name(p.param.recipe) + "_" + std::to_string(p.index);
      for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return n;
    });

TEST(Quantize, HandWorkedTensorwise) {
  // amax 4 -> scale 448/4 = 112; 1 -> 112, -2 -> -224, 0.5 -> 56, 4 -> 448: all exact.
  const std::vector<float> x = {1, -2, 0.5f, 4};
  std::vector<uint8_t> codes(4);
  const auto cq = quantize_current(TensorRef::of(x.data(), 1, 4), {}, {codes.data()});
  EXPECT_EQ(cq.scales.scale[0], 112.0f);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x6E, 0xF6, 0x66,
                                         0x7E}));  // 1.75 * 2^6, -1.75 * 2^7, 1.75 * 2^5, max
  EXPECT_EQ(cq.result.stats.raw.sq_err, 0.0);
  EXPECT_EQ(cq.result.stats.sqnr_db(), INFINITY);
  EXPECT_EQ(cq.result.stats.raw.saturated, 0u);  // current scaling never saturates

  QuantRecipe m1;
  m1.margin = 1;
  EXPECT_EQ(quantize_current(TensorRef::of(x.data(), 1, 4), m1).scales.scale[0], 56.0f);
  QuantRecipe p2;
  p2.pow2_scales = true;
  EXPECT_EQ(quantize_current(TensorRef::of(x.data(), 1, 4), p2).scales.scale[0], 64.0f);
}

TEST(Quantize, OneOutlierUnderflowsTheRest) {
  // numerics.md: [-1, 1] with one 5000, E4M3 per tensor: 0.01 quantizes to 0.
  std::vector<float> x(1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -1.0f + 2.0f * static_cast<float>(i) / 1023.0f;
  x[100] = 5000.0f;
  x[200] = 0.01f;
  std::vector<uint8_t> codes(x.size());
  const auto cq = quantize_current(TensorRef::of(x.data(), 1, 1024), {}, {codes.data()});
  EXPECT_FLOAT_EQ(cq.scales.scale[0], 448.0f / 5000.0f);
  EXPECT_EQ(decode(codes[200], codec_spec(Format::E4M3FN)), 0.0f);
  EXPECT_GT(cq.result.stats.raw.underflow, 0u);
  // |x| * 0.0896 < 2^-10 for |x| < 0.0109: those underflow.
  uint64_t want = 0;
  for (size_t i = 0; i < x.size(); ++i)
    want += x[i] != 0 && std::fabs(x[i] * cq.scales.scale[0]) <= std::ldexp(1.0f, -10);
  EXPECT_EQ(cq.result.stats.raw.underflow, want);
}

TEST(Quantize, MxFloorSaturatesAndRceilDoesNot) {
  // amax 500: FLOOR gives X = 2^(8 - 8) = 1, so 500 clamps to 448; RCEIL gives X = 2.
  std::vector<float> x(32, 1.0f);
  x[0] = 500.0f;
  QuantRecipe floor_r = R(ScalingKind::MX, Format::E4M3FN);
  const auto f = quantize_current(TensorRef::of(x.data(), 1, 32), floor_r);
  EXPECT_EQ(f.scales.scale_codes[0], 127);
  EXPECT_EQ(f.result.stats.raw.saturated, 1u);
  const auto c = quantize_current(TensorRef::of(x.data(), 1, 32),
                                  R(ScalingKind::MX, Format::E4M3FN, 0, false, MxRounding::RCeil));
  EXPECT_EQ(c.scales.scale_codes[0], 128);
  EXPECT_EQ(c.result.stats.raw.saturated, 0u);
}

TEST(Quantize, TransposedCodes) {
  const auto x = test_tensor(256, 128, 9);
  for (ScalingKind k : {ScalingKind::Tensorwise, ScalingKind::Block128x128}) {
    std::vector<uint8_t> codes(x.size()), codes_t(x.size());
    quantize_current(TensorRef::of(x.data(), 256, 128), R(k, Format::E4M3FN),
                     {codes.data(), codes_t.data()});
    for (int64_t r = 0; r < 256; ++r) {
      for (int64_t c = 0; c < 128; ++c) {
        ASSERT_EQ(codes_t[static_cast<size_t>(c * 256 + r)],
                  codes[static_cast<size_t>(r * 128 + c)]);
      }
    }
  }
  std::vector<uint8_t> a(x.size()), b(x.size());
  EXPECT_THROW(quantize_current(TensorRef::of(x.data(), 256, 128),
                                R(ScalingKind::Rowwise, Format::E4M3FN), {a.data(), b.data()}),
               std::invalid_argument);
}

TEST(Quantize, FusedDequantizeEqualsDequantize) {
  const auto x = test_tensor(128, 256, 12);
  for (ScalingKind k : {ScalingKind::Tensorwise, ScalingKind::Block1x128, ScalingKind::MX}) {
    std::vector<uint8_t> codes(x.size());
    std::vector<float> fused(x.size(), -1.0f), separate(x.size());
    QuantizeTargets out;
    out.codes = codes.data();
    out.dequant = fused.data();
    const auto q = quantize_current(TensorRef::of(x.data(), 128, 256), R(k, Format::E4M3FN), out);
    dequantize(codes.data(), R(k, Format::E4M3FN), q.scales, separate.data());
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(float_bits(fused[i]), float_bits(separate[i])) << i;
  }
}

TEST(Quantize, Bf16InputEqualsWidenedFp32) {
  auto x = test_tensor(64, 256, 4);
  std::vector<uint16_t> bf(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bf[i] = static_cast<uint16_t>(float_bits(x[i]) >> 16);
    x[i] = bits_float(static_cast<uint32_t>(bf[i]) << 16);
  }
  std::vector<uint8_t> a(x.size()), b(x.size());
  const auto qa = quantize_current(TensorRef::of(x.data(), 64, 256),
                                   R(ScalingKind::Block1x128, Format::E4M3FN), {a.data()});
  const auto qb = quantize_current(TensorRef::of(bf.data(), 64, 256),
                                   R(ScalingKind::Block1x128, Format::E4M3FN), {b.data()});
  EXPECT_EQ(a, b);
  EXPECT_EQ(qa.result.stats.raw.underflow, qb.result.stats.raw.underflow);
  EXPECT_EQ(qa.result.stats.raw.sq_err, qb.result.stats.raw.sq_err);
}

TEST(Quantize, StatisticsWithoutCodesEqualThoseWithCodesForEveryBf16Value) {
  // Every bf16 bit pattern (NaN, Inf, subnormals, zeros of both signs) once per row of a
  // 256 x 256 tensor, with per-row scales from 2^-30 to 2^30 (and between powers of two):
  // with codes and without, the statistics must count and sum the same, per format.
  std::vector<uint16_t> x(65536);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint16_t>(i * 40503u);  // a permutation
  for (Format f : {Format::E4M3FN, Format::E5M2, Format::E4M3FNUZ, Format::E5M2FNUZ, Format::E2M1FN,
                   Format::E3M2FN, Format::E2M3FN}) {
    SCOPED_TRACE(format_info(f).name);
    QuantRecipe r = R(ScalingKind::Rowwise, f);
    ScaleSet sc;
    sc.layout = make_layout(r, 256, 256);
    for (int row = 0; row < 256; ++row) {
      const float s = std::ldexp(1.0f + static_cast<float>(row % 7) / 7.0f, row % 61 - 30);
      sc.scale.push_back(s);
      sc.scale_inv.push_back(1.0f / s);
    }
    std::vector<uint8_t> codes(x.size());
    const TensorRef t = TensorRef::of(x.data(), 256, 256);
    const auto with = quantize(t, r, sc, {codes.data()});
    const auto without = quantize(t, r, sc, {});
    expect_same_stats(without.stats, with.stats);
    EXPECT_GT(with.stats.raw.subnormal, 0u);
    EXPECT_GT(with.stats.raw.saturated, 0u);
    EXPECT_GT(with.stats.raw.underflow, 0u);
  }
}

// expect_same_stats() with the sums compared as bit patterns: an IEEE overflow's error is
// Inf or NaN, which == cannot compare.
uint64_t double_bits(double d) {
  uint64_t b = 0;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

void expect_identical_stats(const TensorStats& a, const TensorStats& b) {
  TensorStats a2 = a, b2 = b;
  EXPECT_EQ(double_bits(a.raw.sq_err), double_bits(b.raw.sq_err));
  EXPECT_EQ(double_bits(a.raw.sq_sum), double_bits(b.raw.sq_sum));
  ASSERT_EQ(a.map_sq_err.size(), b.map_sq_err.size());
  for (size_t i = 0; i < a.map_sq_err.size(); ++i) {
    EXPECT_EQ(double_bits(a.map_sq_err[i]), double_bits(b.map_sq_err[i])) << "cell " << i;
    EXPECT_EQ(double_bits(a.map_sq_sum[i]), double_bits(b.map_sq_sum[i])) << "cell " << i;
  }
  a2.raw.sq_err = b2.raw.sq_err = 0;
  a2.map_sq_err.clear();
  b2.map_sq_err.clear();
  expect_same_stats(a2, b2);
}

// Crafted fp32 values for one format, in units of x * scale: every code's value and the
// midpoints between neighbours (the rounding ties), just either side of each midpoint,
// the saturation boundary and around it, the subnormal range, zeros of both signs,
// Inf, NaN, fp32 subnormals and full-mantissa values, each with both signs.
std::vector<float> crafted_values(Format f) {
  const CodecSpec sp = codec_spec(f);
  std::vector<float> grid;
  for (int c = 0; c < (1 << (sp.bits - 1)); ++c) {
    const float v = decode(static_cast<uint8_t>(c), sp);
    if (std::isfinite(v)) grid.push_back(v);
  }
  std::sort(grid.begin(), grid.end());
  const float top = grid.back();
  grid.push_back(top + (top - grid[grid.size() - 2]));  // the next step past max
  std::vector<float> v;
  for (size_t i = 0; i < grid.size(); ++i) {
    v.push_back(grid[i]);
    if (i + 1 < grid.size()) {
      const float mid = (grid[i] + grid[i + 1]) / 2;  // exact: one more bit
      v.push_back(mid);
      v.push_back(std::nextafter(mid, 0.0f));
      v.push_back(std::nextafter(mid, INFINITY));
    }
  }
  for (float t : {top * 1.5f, top * 4.0f, 3e38f, FLT_MAX, grid[1] / 4, grid[1] / 2,
                  std::nextafter(grid[1] / 2, 1.0f), 1e-40f, 1e-45f, 0.0f, INFINITY,
                  std::numeric_limits<float>::quiet_NaN()})
    v.push_back(t);
  // Full-mantissa values across the range, whose fp64 sums depend on the order of addition.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int i = 0; i < 64; ++i) v.push_back(std::ldexp(u(rng), i % 12 - 6) * top);
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

// The statistics loop `path` against the portable one, bit for bit, on crafted values
// (every code, the ties between codes and either side of them, zeros, subnormals,
// underflow, saturation, NaN and Inf), for every element format, both overflow modes, fp32
// and bf16 input, and the given recipe's groups.
void expect_path_equals_portable(CpuStatsPath path, ScalingKind kind) {
  struct Restore {
    CpuStatsPath p = cpu_stats_path();
    ~Restore() { set_cpu_stats_path(p); }
  } restore;
  for (Format f : {Format::E4M3FN, Format::E5M2, Format::E4M3FNUZ, Format::E5M2FNUZ, Format::E2M1FN,
                   Format::E3M2FN, Format::E2M3FN}) {
    if (kind == ScalingKind::NVFP4 && f != Format::E2M1FN) continue;
    if (kind == ScalingKind::MX && (f == Format::E4M3FNUZ || f == Format::E5M2FNUZ)) continue;
    for (Overflow ov : {Overflow::Saturate, Overflow::Ieee}) {
      SCOPED_TRACE(std::string(format_info(f).name) + " " + std::string(overflow_name(ov)) + " " +
                   std::string(scaling_kind_name(kind)));
      const CodecSpec sp = codec_spec(f);
      // Rowwise: rows of 37 (tails after the eight- and sixteen-wide steps, cells of the
      // error map across them), each row its own scale (powers of two and between), every
      // crafted value per row. Other recipes: rows of 300, their groups' scales in turn.
      const std::vector<float> base = crafted_values(f);
      // Scale pairs: reciprocal ones, then two that are not (a scale_inv that dequantizes
      // everything to zero, an infinite scale), where the SIMD loops' shortcuts do not hold.
      const std::pair<float, float> pairs[] = {{1.0f, 1.0f},
                                               {0.5f, 2.0f},
                                               {3.0f, 1.0f / 3.0f},
                                               {1.0f / 3.0f, 3.0f},
                                               {1024.0f, 1.0f / 1024.0f},
                                               {1.0f, 0.0f},
                                               {INFINITY, 0.0f}};
      const size_t np = std::size(pairs);
      const bool rowwise = kind == ScalingKind::Rowwise;
      const int64_t cols = rowwise ? 37 : 300;
      const int64_t rows =
          rowwise ? static_cast<int64_t>((base.size() * np + cols - 1) / cols) : 130;
      std::vector<float> x(static_cast<size_t>(rows * cols));
      QuantRecipe r = R(kind, f);
      r.overflow = ov;
      r.partial_blocks = true;  // 300 = 2 x 128 + 44, 130 = 128 + 2
      ScaleSet sc;
      sc.layout = make_layout(r, rows, cols);
      const size_t first_pair = rowwise ? 0 : 2;  // a tensorwise scale that is not 1
      for (int64_t g = 0; g < sc.layout.group_count(); ++g) {
        const auto& pr = pairs[(static_cast<size_t>(g) + first_pair) % np];
        sc.scale.push_back(pr.first);
        sc.scale_inv.push_back(pr.second);
      }
      auto group = [&](size_t i) {
        return static_cast<size_t>(
            sc.layout.group_of(static_cast<int64_t>(i) / cols, static_cast<int64_t>(i) % cols));
      };
      // Element i holds crafted value (i % n) divided by its group's scale: exactly the
      // crafted x * scale where the division is exact, near it elsewhere.
      for (size_t i = 0; i < x.size(); ++i) {
        const float s = sc.scale[group(i)];
        x[i] = std::isfinite(s) ? base[i % base.size()] / s : base[i % base.size()];
      }
      std::vector<uint16_t> bf(x.size());
      for (size_t i = 0; i < x.size(); ++i) bf[i] = static_cast<uint16_t>(float_bits(x[i]) >> 16);
      for (bool bf16 : {false, true}) {
        const TensorRef t =
            bf16 ? TensorRef::of(bf.data(), rows, cols) : TensorRef::of(x.data(), rows, cols);
        StatsOptions so;
        so.map_max_cells = 8;  // cells of 5 (or 38) columns: boundaries inside the SIMD steps
        struct Out {
          std::vector<uint8_t> codes, codes_t, codes_only;
          std::vector<float> dq, dq_only;
          QuantizeResult with, without;
        };
        auto run = [&](CpuStatsPath p) {
          set_cpu_stats_path(p);
          Out o;
          o.codes.assign(x.size(), 0xAA);
          o.dq.assign(x.size(), -1.0f);
          QuantizeTargets q;
          q.codes = o.codes.data();
          q.dequant = o.dq.data();
          o.with = quantize(t, r, sc, q, so, nullptr, 1);
          o.without = quantize(t, r, sc, {}, so, nullptr, 1);
          // The loop without statistics (the widest vectors the processor has).
          o.codes_only.assign(x.size(), 0xAA);
          o.dq_only.assign(x.size(), -1.0f);
          StatsOptions off;
          off.enabled = off.histogram = off.error_map = false;
          quantize(t, r, sc, {o.codes_only.data(), nullptr, o.dq_only.data()}, off, nullptr, 1);
          return o;
        };
        const Out a = run(CpuStatsPath::Portable), b = run(path);
        ASSERT_EQ(a.codes, b.codes);
        ASSERT_EQ(a.codes, b.codes_only);
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(float_bits(a.dq[i]), float_bits(b.dq[i])) << "element " << i;
          ASSERT_EQ(float_bits(a.dq[i]), float_bits(b.dq_only[i])) << "element " << i;
        }
        expect_identical_stats(a.with.stats, b.with.stats);
        expect_identical_stats(a.without.stats, b.without.stats);
        expect_identical_stats(a.with.stats, a.without.stats);
        // And against the scalar codec: every code is encode()'s, every dequantized value
        // decode(code) * scale_inv.
        for (size_t i = 0; i < x.size(); ++i) {
          const size_t g = group(i);
          const float v = bf16 ? bits_float(static_cast<uint32_t>(bf[i]) << 16) : x[i];
          const uint8_t code = encode(v * sc.scale[g], sp, ov);
          ASSERT_EQ(b.codes[i], code) << "element " << i << " x " << v;
          ASSERT_EQ(float_bits(b.dq[i]), float_bits(decode(code, sp) * sc.scale_inv[g]))
              << "element " << i << " x " << v;
        }
        EXPECT_GT(b.with.stats.raw.saturated, 0u);
        EXPECT_GT(b.with.stats.raw.subnormal, 0u);
        EXPECT_GT(b.with.stats.raw.underflow, 0u);
        EXPECT_GT(b.with.stats.raw.nonfinite, 0u);
        EXPECT_GT(b.with.stats.raw.zeros, 0u);
      }
    }
  }
}

TEST(Quantize, Avx2PathEqualsPortablePathBitForBit) {
  if (!cpu_stats_path_available(CpuStatsPath::Avx2))
    GTEST_SKIP() << "no AVX2 statistics loop on this processor or build";
  for (ScalingKind k : kAllScalingKinds) expect_path_equals_portable(CpuStatsPath::Avx2, k);
}

TEST(Quantize, Avx512PathEqualsPortablePathBitForBit) {
  if (!cpu_stats_path_available(CpuStatsPath::Avx512))
    GTEST_SKIP() << "no AVX-512 statistics loop on this processor or build";
  for (ScalingKind k : kAllScalingKinds) expect_path_equals_portable(CpuStatsPath::Avx512, k);
}

TEST(Quantize, AutoPicksTheWidestStatisticsLoopTheProcessorHas) {
  const CpuStatsPath before = cpu_stats_path();
  set_cpu_stats_path(CpuStatsPath::Auto);
  const CpuStatsPath picked = cpu_stats_path();
  set_cpu_stats_path(before);
  EXPECT_NE(picked, CpuStatsPath::Auto);
  if (cpu_stats_path_available(CpuStatsPath::Avx512)) {
    EXPECT_EQ(picked, CpuStatsPath::Avx512);
  } else if (cpu_stats_path_available(CpuStatsPath::Avx2)) {
    EXPECT_EQ(picked, CpuStatsPath::Avx2);
    EXPECT_THROW(set_cpu_stats_path(CpuStatsPath::Avx512), std::invalid_argument);
  } else {
    EXPECT_EQ(picked, CpuStatsPath::Portable);
  }
}

TEST(Quantize, ThreadCountDoesNotChangeResults) {
  const auto x = test_tensor(512, 512, 8);
  const auto one = quantize_current(TensorRef::of(x.data(), 512, 512), {}, {}, {}, nullptr, 1);
  const auto two = quantize_current(TensorRef::of(x.data(), 512, 512), {}, {}, {}, nullptr, 2);
  EXPECT_EQ(one.result.stats.raw.underflow, two.result.stats.raw.underflow);
  EXPECT_EQ(one.result.stats.raw.subnormal, two.result.stats.raw.subnormal);
  expect_close(one.result.stats.raw.sq_err, two.result.stats.raw.sq_err, "sq_err");
}

// Every pass over rows (amax, quantize with every statistic and a what-if, dequantize,
// the value summary) gives the same bits at any thread count: the tensor splits into
// chunks by its shape alone and chunks merge in their order.
TEST(Quantize, ResultsAreBitIdenticalAtAnyThreadCount) {
  struct Case {
    QuantRecipe recipe;
    int64_t rows, cols;
  };
  // The tiny GPT's activations and gradients, an uneven shape, and 128x128 tiles whose
  // rows straddle chunks.
  const Case cases[] = {{R(ScalingKind::Tensorwise, Format::E4M3FN), 1024, 64},
                        {R(ScalingKind::Tensorwise, Format::E5M2), 1024, 256},
                        {R(ScalingKind::Rowwise, Format::E4M3FN), 333, 200},
                        {R(ScalingKind::Block128x128, Format::E4M3FN), 384, 256}};
  const QuantRecipe whatif = R(ScalingKind::Rowwise, Format::E5M2);
  for (const Case& c : cases) {
    SCOPED_TRACE(recipe_name(c.recipe) + " " + std::to_string(c.rows) + "x" +
                 std::to_string(c.cols));
    const auto x = test_tensor(c.rows, c.cols, 21);
    const TensorRef t = TensorRef::of(x.data(), c.rows, c.cols);
    const GroupLayout layout = make_layout(c.recipe, c.rows, c.cols);
    struct Run {
      AmaxResult amax;
      CurrentQuantization q;
      std::vector<uint8_t> codes;
      std::vector<float> dequant, back;
      ValueSummary summary;
    };
    auto run = [&](int threads) {
      Run r;
      r.amax = compute_amax(t, layout, threads);
      r.codes.assign(x.size(), 0);
      r.dequant.assign(x.size(), 0.0f);
      r.back.assign(x.size(), 0.0f);
      QuantizeTargets out;
      out.codes = r.codes.data();
      out.dequant = r.dequant.data();
      r.q = quantize_current(t, c.recipe, out, {}, &whatif, threads);
      dequantize(r.codes.data(), c.recipe, r.q.scales, r.back.data(), threads);
      r.summary = summarize_values(t, threads);
      return r;
    };
    const Run one = run(1);
    for (int threads : {2, 3, 8, 16}) {
      SCOPED_TRACE(std::to_string(threads) + " threads");
      const Run n = run(threads);
      EXPECT_EQ(float_bits(n.amax.tensor_amax), float_bits(one.amax.tensor_amax));
      EXPECT_EQ(n.amax.group_amax, one.amax.group_amax);
      EXPECT_EQ(n.q.scales.scale, one.q.scales.scale);
      EXPECT_EQ(n.codes, one.codes);
      EXPECT_EQ(0, std::memcmp(n.dequant.data(), one.dequant.data(), x.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(n.back.data(), one.back.data(), x.size() * sizeof(float)));
      expect_identical_stats(n.q.result.stats, one.q.result.stats);
      ASSERT_TRUE(n.q.result.whatif.has_value());
      expect_identical_stats(*n.q.result.whatif, *one.q.result.whatif);
      EXPECT_EQ(double_bits(n.summary.sum), double_bits(one.summary.sum));
      EXPECT_EQ(double_bits(n.summary.sq_sum), double_bits(one.summary.sq_sum));
      EXPECT_EQ(n.summary.finite, one.summary.finite);
      EXPECT_EQ(n.summary.hist, one.summary.hist);
    }
  }
}

TEST(Quantize, WhatIfEqualsRunningTheOtherRecipe) {
  const auto x = test_tensor(128, 256, 6);
  const QuantRecipe other = R(ScalingKind::Block1x128, Format::E5M2);
  const auto both = quantize_current(TensorRef::of(x.data(), 128, 256), {}, {}, {}, &other);
  const auto alone = quantize_current(TensorRef::of(x.data(), 128, 256), other);
  ASSERT_TRUE(both.result.whatif.has_value());
  EXPECT_EQ(both.result.whatif->raw.underflow, alone.result.stats.raw.underflow);
  EXPECT_EQ(both.result.whatif->raw.subnormal, alone.result.stats.raw.subnormal);
  expect_close(both.result.whatif->raw.sq_err, alone.result.stats.raw.sq_err, "what-if sq_err");
  EXPECT_NE(both.result.whatif->raw.sq_err, both.result.stats.raw.sq_err);
}

TEST(Quantize, ErrorMapUsesTheRecipesBlocks) {
  const auto x = test_tensor(256, 384, 2);
  const auto q = quantize_current(TensorRef::of(x.data(), 256, 384),
                                  R(ScalingKind::Block128x128, Format::E4M3FN));
  EXPECT_EQ(q.result.stats.map_grid.rows, 2);
  EXPECT_EQ(q.result.stats.map_grid.cols, 3);
  const auto t = quantize_current(TensorRef::of(x.data(), 256, 384), {});
  EXPECT_EQ(t.result.stats.map_grid.rows, 64);  // tensorwise: an even 64 x 64 tiling
  EXPECT_EQ(t.result.stats.map_grid.cols, 64);
  EXPECT_EQ(t.result.stats.map_rel_error().size(), 64u * 64u);
}

TEST(Quantize, BadInput) {
  std::vector<float> x(100 * 100, 1.0f);
  try {
    quantize_current(TensorRef::of(x.data(), 100, 100), R(ScalingKind::Block1x128, Format::E4M3FN));
    FAIL() << "accepted 100 columns for 1x128 blocks";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide"), std::string::npos) << e.what();
  }
  QuantRecipe partial = R(ScalingKind::Block1x128, Format::E4M3FN);
  partial.partial_blocks = true;
  const auto p = quantize_current(TensorRef::of(x.data(), 100, 100), partial);
  EXPECT_EQ(p.scales.scale.size(), 100u);
  EXPECT_THROW(
      quantize_current(TensorRef::of(x.data(), 10, 10), R(ScalingKind::NVFP4, Format::E4M3FN)),
      std::invalid_argument);
  EXPECT_THROW(quantize_current(TensorRef::of(x.data(), 10, 10),
                                R(ScalingKind::Tensorwise, Format::E8M0FNU)),
               std::invalid_argument);
  EXPECT_THROW(
      quantize_current(TensorRef::of(x.data(), 32, 32), R(ScalingKind::MX, Format::E4M3FN, 1)),
      std::invalid_argument);
  EXPECT_THROW(quantize_current(TensorRef::of(static_cast<const float*>(nullptr), 4, 4), {}),
               std::invalid_argument);
  EXPECT_THROW(quantize_current(TensorRef::of(x.data(), -1, 4), {}), std::invalid_argument);
  // Scales for another shape are refused.
  const auto small = quantize_current(TensorRef::of(x.data(), 10, 10), {});
  EXPECT_THROW(quantize(TensorRef::of(x.data(), 20, 10), {}, small.scales, {}),
               std::invalid_argument);
  // Empty tensors are fine.
  const auto empty = quantize_current(TensorRef::of(x.data(), 0, 16), {});
  EXPECT_EQ(empty.result.stats.raw.numel, 0u);
  // All non-finite: no amax, scale 1, everything counted as non-finite.
  std::vector<float> nan(64, std::numeric_limits<float>::quiet_NaN());
  const auto n = quantize_current(TensorRef::of(nan.data(), 8, 8), {});
  EXPECT_EQ(n.scales.scale[0], 1.0f);
  EXPECT_EQ(n.result.stats.raw.nonfinite, 64u);
  EXPECT_EQ(n.result.stats.raw.sq_err, 0.0);
}

// The error map's relative error per cell, sqrt(err / sum) rounded to float and 0 where
// the sum is not above 0 (numerics.md, "Statistics"), against the scalar recomputation
// for cells of every kind: zeros, negative and NaN sums, infinities, subnormals, a
// count not a multiple of any vector width.
TEST(Quantize, ErrorMapRelativeErrorsAreTheScalarFormulas) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mant(0.5, 1.0);
  std::uniform_int_distribution<int> expo(-1070, 1020);
  const double specials[] = {0.0,
                             -0.0,
                             -1.0,
                             std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::denorm_min(),
                             std::numeric_limits<double>::max(),
                             1e-300};
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{4097}}) {
    TensorStats t;
    for (size_t i = 0; i < n; ++i) {
      const bool special = i % 5 == 0;
      t.map_sq_sum.push_back(special ? specials[(i / 5) % 8] : std::ldexp(mant(rng), expo(rng)));
      t.map_sq_err.push_back(i % 7 == 0 ? specials[(i / 7) % 8] : std::ldexp(mant(rng), expo(rng)));
    }
    const std::vector<float> got = t.map_rel_error();
    ASSERT_EQ(got.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const double e = t.map_sq_err[i], s = t.map_sq_sum[i];
      const float want = s > 0 ? static_cast<float>(std::sqrt(e / s)) : 0.0f;
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << i;
      } else {
        EXPECT_EQ(float_bits(got[i]), float_bits(want)) << i << ": " << e << " / " << s;
      }
    }
  }
}

}  // namespace
}  // namespace fp8wb
