#include "fp8wb/kernels/format.h"

#include <cctype>
#include <cmath>
#include <stdexcept>

#include "fp8wb/kernels/codec.h"

namespace fp8wb {
namespace {

FormatInfo make_info(Format f, std::string_view desc) {
  const CodecSpec s = codec_spec(f);
  const FormatNameEntry& names = table_entry(kFormatNames, f);
  FormatInfo info{f, names.name, names.ml_dtypes, desc, s, 0, 0, 0, 0, 0, 1 << s.bits};
  info.max_finite = decode(s.max_mag, s);
  if (s.nan == NanRule::AllOnes) {
    info.min_normal = decode(0, s);
    info.min_subnormal = 0;
    info.epsilon = 1.0;  // neighbours of 1.0 are 1.0 and 2.0
  } else {
    info.min_normal = decode(static_cast<uint8_t>(1u << s.mbits), s);
    info.min_subnormal = s.mbits > 0 ? decode(1, s) : 0.0;
    info.epsilon = std::ldexp(1.0, -s.mbits);
  }
  info.emax = static_cast<int>(std::floor(std::log2(info.max_finite)));
  return info;
}

const std::array<FormatInfo, kFormatCount>& table() {
  static const std::array<FormatInfo, kFormatCount> t = {
      make_info(Format::E4M3FN, "OCP FP8 E4M3: more precision, range +-448; no Inf"),
      make_info(Format::E5M2, "OCP FP8 E5M2: more range (+-57344), IEEE-style Inf and NaN"),
      make_info(Format::E4M3FNUZ, "AMD MI300 FP8 E4M3: range +-240, no -0, NaN is 0x80"),
      make_info(Format::E5M2FNUZ, "AMD MI300 FP8 E5M2: range +-57344, no -0, NaN is 0x80"),
      make_info(Format::E8M0FNU,
                "OCP MX block scale: powers of two 2^-127..2^127, no sign, no zero"),
      make_info(Format::E2M1FN, "OCP MX FP4: 0, 0.5, 1, 1.5, 2, 3, 4, 6; no Inf, no NaN"),
      make_info(Format::E3M2FN, "OCP MX FP6 E3M2: range +-28"),
      make_info(Format::E2M3FN, "OCP MX FP6 E2M3: range +-7.5"),
  };
  return t;
}

std::string lower(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '-' || c == ' ') c = '_';
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

}  // namespace

const FormatInfo& format_info(Format f) {
  const auto i = static_cast<size_t>(f);
  if (i >= kFormatCount) throw std::out_of_range("unknown format index");
  return table()[i];
}

std::optional<Format> parse_format(std::string_view name) {
  std::string n = lower(name);
  for (const char* prefix : {"float8_", "float6_", "float4_", "fp8_", "fp6_", "fp4_", "mxfp8_",
                             "mxfp6_", "mxfp4_", "mx"}) {
    const std::string p(prefix);
    if (n.size() > p.size() && n.compare(0, p.size(), p) == 0) {
      n = n.substr(p.size());
      break;
    }
  }
  struct Alias {
    const char* name;
    Format format;
  };
  static const Alias aliases[] = {
      {"e4m3fn", Format::E4M3FN},      {"e4m3", Format::E4M3FN},
      {"e5m2", Format::E5M2},          {"e4m3fnuz", Format::E4M3FNUZ},
      {"e4m3_fnuz", Format::E4M3FNUZ}, {"e5m2fnuz", Format::E5M2FNUZ},
      {"e5m2_fnuz", Format::E5M2FNUZ}, {"e8m0fnu", Format::E8M0FNU},
      {"e8m0", Format::E8M0FNU},       {"e2m1fn", Format::E2M1FN},
      {"e2m1", Format::E2M1FN},        {"fp4", Format::E2M1FN},
      {"e3m2fn", Format::E3M2FN},      {"e3m2", Format::E3M2FN},
      {"e2m3fn", Format::E2M3FN},      {"e2m3", Format::E2M3FN},
  };
  for (const auto& a : aliases) {
    if (n == a.name) return a.format;
  }
  return std::nullopt;
}

std::string format_names() {
  return table_names(kFormatNames);
}

std::string_view overflow_name(Overflow o) {
  return o == Overflow::Saturate ? "saturate" : "ieee";
}

std::optional<Overflow> parse_overflow(std::string_view name) {
  const std::string n = lower(name);
  if (n == "saturate" || n == "sat" || n == "satfinite") return Overflow::Saturate;
  if (n == "ieee" || n == "nonsaturating" || n == "inf") return Overflow::Ieee;
  return std::nullopt;
}

}  // namespace fp8wb
