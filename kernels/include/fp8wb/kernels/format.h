// defines: Format, Overflow, Rounding, NanRule, CodecSpec, codec_spec() (the one table of
// format layouts), FormatInfo and format lookup by name (host only).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "fp8wb/kernels/host_device.h"
#include "fp8wb/kernels/name_table.h"

namespace fp8wb {

// Every small float format the workbench knows. Codes of formats narrower than 8 bits
// live in the low bits of a byte (sign at bit ebits + mbits), as ml_dtypes stores them.
enum class Format : uint8_t {
  E4M3FN,    // OCP FP8, no Inf, NaN = S.1111.111
  E5M2,      // OCP FP8, IEEE-like Inf/NaN
  E4M3FNUZ,  // AMD MI300 FP8: no Inf, no -0, NaN = 0x80
  E5M2FNUZ,  // AMD MI300 FP8: no Inf, no -0, NaN = 0x80
  E8M0FNU,   // OCP MX scale: powers of two, no sign, no zero, NaN = 0xFF
  E2M1FN,    // OCP MX FP4
  E3M2FN,    // OCP MX FP6
  E2M3FN,    // OCP MX FP6
};
inline constexpr int kFormatCount = 8;
inline constexpr std::array<Format, kFormatCount> kAllFormats = {
    Format::E4M3FN,  Format::E5M2,   Format::E4M3FNUZ, Format::E5M2FNUZ,
    Format::E8M0FNU, Format::E2M1FN, Format::E3M2FN,   Format::E2M3FN};
// The formats' names (name_table.h): as the workbench writes them, and ml_dtypes' names.
struct FormatNameEntry {
  Format value;
  std::string_view name;       // "E4M3FN"
  std::string_view ml_dtypes;  // "float8_e4m3fn"
};
inline constexpr FormatNameEntry kFormatNames[] = {
    {Format::E4M3FN, "E4M3FN", "float8_e4m3fn"},
    {Format::E5M2, "E5M2", "float8_e5m2"},
    {Format::E4M3FNUZ, "E4M3FNUZ", "float8_e4m3fnuz"},
    {Format::E5M2FNUZ, "E5M2FNUZ", "float8_e5m2fnuz"},
    {Format::E8M0FNU, "E8M0FNU", "float8_e8m0fnu"},
    {Format::E2M1FN, "E2M1FN", "float4_e2m1fn"},
    {Format::E3M2FN, "E3M2FN", "float6_e3m2fn"},
    {Format::E2M3FN, "E2M3FN", "float6_e2m3fn"},
};
static_assert(names_cover_enum(kFormatNames, Format::E2M3FN));

// What happens to finite values beyond the largest finite value (and to +-Inf).
enum class Overflow : uint8_t {
  Saturate,  // clamp to +-max (what scaled training uses; Inf -> +-max as cvt.satfinite)
  Ieee,      // E5M2 -> +-Inf, formats with NaN -> NaN, formats without -> +-max (ml_dtypes)
};

enum class Rounding : uint8_t {
  NearestEven,  // round to nearest, ties to even
  Stochastic,   // round up with probability (distance to the lower neighbour) / spacing
};

// How NaN is spelled in a format.
enum class NanRule : uint8_t {
  None,             // no NaN: NaN encodes to a zero of the opposite sign (as ml_dtypes does)
  MantissaAllOnes,  // S.1111.111 (E4M3FN)
  Ieee,             // exponent all ones, mantissa != 0 (E5M2); Inf has mantissa 0
  NegativeZero,     // the code 0x80 (the fnuz formats)
  AllOnes,          // 0xFF (E8M0FNU)
};

// The layout of one format: the single table that encode, decode and every derived
// figure (max, min normal, epsilon...) come from.
struct CodecSpec {
  uint8_t bits;       // total width
  uint8_t ebits;      // exponent bits
  uint8_t mbits;      // mantissa bits
  int8_t bias;        // exponent bias (a biased exponent field e > 0 means 2^(e - bias))
  bool has_sign;      // false only for E8M0FNU
  bool has_inf;       // E5M2 only
  bool has_neg_zero;  // false for the fnuz formats (and E8M0FNU, which has no zero)
  NanRule nan;
  uint8_t max_mag;   // magnitude code (sign bit clear) of the largest finite value
  uint8_t nan_code;  // the code a positive NaN encodes to
};

FP8WB_INLINE constexpr CodecSpec codec_spec(Format f) {
  switch (f) {
    case Format::E4M3FN:
      return {8, 4, 3, 7, true, false, true, NanRule::MantissaAllOnes, 0x7E, 0x7F};
    case Format::E5M2: return {8, 5, 2, 15, true, true, true, NanRule::Ieee, 0x7B, 0x7E};
    case Format::E4M3FNUZ:
      return {8, 4, 3, 8, true, false, false, NanRule::NegativeZero, 0x7F, 0x80};
    case Format::E5M2FNUZ:
      return {8, 5, 2, 16, true, false, false, NanRule::NegativeZero, 0x7F, 0x80};
    case Format::E8M0FNU: return {8, 8, 0, 127, false, false, false, NanRule::AllOnes, 0xFE, 0xFF};
    case Format::E2M1FN: return {4, 2, 1, 1, true, false, true, NanRule::None, 0x07, 0x08};
    case Format::E3M2FN: return {6, 3, 2, 3, true, false, true, NanRule::None, 0x1F, 0x20};
    case Format::E2M3FN: return {6, 2, 3, 1, true, false, true, NanRule::None, 0x1F, 0x20};
  }
  return {8, 4, 3, 7, true, false, true, NanRule::MantissaAllOnes, 0x7E, 0x7F};
}

template <Format F>
using FormatTag = std::integral_constant<Format, F>;

// Calls fn(FormatTag<F>{}) with the runtime format as a compile-time one, so that kernels
// are instantiated per format. dispatch_element_format() leaves out E8M0FNU, which holds
// scales, not elements, and throws std::invalid_argument for it.
template <class Fn>
decltype(auto) dispatch_element_format(Format f, Fn&& fn) {
  switch (f) {
    case Format::E4M3FN: return fn(FormatTag<Format::E4M3FN>{});
    case Format::E5M2: return fn(FormatTag<Format::E5M2>{});
    case Format::E4M3FNUZ: return fn(FormatTag<Format::E4M3FNUZ>{});
    case Format::E5M2FNUZ: return fn(FormatTag<Format::E5M2FNUZ>{});
    case Format::E2M1FN: return fn(FormatTag<Format::E2M1FN>{});
    case Format::E3M2FN: return fn(FormatTag<Format::E3M2FN>{});
    case Format::E2M3FN: return fn(FormatTag<Format::E2M3FN>{});
    case Format::E8M0FNU: break;
  }
  throw std::invalid_argument("E8M0FNU holds scales, not elements: choose an element format");
}

template <class Fn>
decltype(auto) dispatch_format(Format f, Fn&& fn) {
  if (f == Format::E8M0FNU) return fn(FormatTag<Format::E8M0FNU>{});
  return dispatch_element_format(f, std::forward<Fn>(fn));
}

// Host-side description of a format: names and the figures users read.
struct FormatInfo {
  Format format;
  std::string_view name;       // "E4M3FN"
  std::string_view ml_dtypes;  // "float8_e4m3fn"
  std::string_view description;
  CodecSpec spec;
  double max_finite;
  double min_normal;
  double min_subnormal;  // 0 where the format has no subnormals (E8M0FNU)
  double epsilon;        // spacing just above 1.0
  int emax;              // floor(log2(max_finite)), the MX "emax_elem"
  int code_count;        // 2^bits
};

const FormatInfo& format_info(Format f);

// Accepts the canonical names and common aliases, case-insensitively: "e4m3", "fp8_e4m3",
// "float8_e4m3fn", "e5m2", "fp4", "e2m1", "mxfp6_e3m2", "e8m0"...
std::optional<Format> parse_format(std::string_view name);
// "E4M3FN, E5M2, ..." for error messages.
std::string format_names();
std::string_view overflow_name(Overflow o);
std::optional<Overflow> parse_overflow(std::string_view name);

}  // namespace fp8wb
