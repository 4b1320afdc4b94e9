#include "fp8wb/core/formats/value_report.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fp8wb/kernels/codec.h"

namespace fp8wb {
namespace {

std::string bits_of(uint32_t v, int n) {
  std::string s;
  for (int i = n - 1; i >= 0; --i) s.push_back(((v >> i) & 1u) ? '1' : '0');
  return s;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

double strict_strtod(const std::string& s, bool& ok) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  ok = !s.empty() && end == s.c_str() + s.size();
  return v;
}

// Whether finite `value` rounds beyond the format's largest finite value: exactly the
// encoder's overflow decision (a tie between max and the step beyond it goes to the even
// one, or up for E8M0FNU), the one the statistics count as saturated.
bool rounds_beyond_max(double value, const CodecSpec& s) {
  if (!std::isfinite(value)) return false;
  // E8M0FNU gives NaN in ieee mode for a positive finite value only when it overflows.
  if (s.nan == NanRule::AllOnes) return value > 0 && encode_f64(value, s, Overflow::Ieee) == 0xFF;
  uint32_t rounded = 0;
  encode_rne_bits_mag(float_bits(f64_to_f32_odd(value)), s, Overflow::Saturate, rounded);
  return rounded > s.max_mag;
}

}  // namespace

std::string BitFields::joined(char sep) const {
  std::string out = sign;
  for (const std::string* part : {&exponent, &mantissa}) {
    if (part->empty()) continue;
    if (!out.empty()) out.push_back(sep);
    out += *part;
  }
  return out;
}

std::string_view code_kind_name(CodeKind k) {
  switch (k) {
    case CodeKind::Zero: return "zero";
    case CodeKind::Subnormal: return "subnormal";
    case CodeKind::Normal: return "normal";
    case CodeKind::Infinity: return "inf";
    case CodeKind::NaN: return "nan";
  }
  return "?";
}

BitFields split_bits(uint8_t code, Format format) {
  const CodecSpec s = codec_spec(format);
  BitFields b;
  const uint32_t c = code & ((1u << s.bits) - 1u);
  if (s.has_sign) b.sign = bits_of(c >> (s.bits - 1), 1);
  b.exponent = bits_of((c >> s.mbits) & ((1u << s.ebits) - 1u), s.ebits);
  if (s.mbits > 0) b.mantissa = bits_of(c & ((1u << s.mbits) - 1u), s.mbits);
  return b;
}

CodeKind classify_code(uint8_t code, Format format) {
  const CodecSpec s = codec_spec(format);
  const float v = decode(code, s);
  if (std::isnan(v)) return CodeKind::NaN;
  if (std::isinf(v)) return CodeKind::Infinity;
  if (v == 0) return CodeKind::Zero;
  if (s.nan == NanRule::AllOnes) return CodeKind::Normal;  // E8M0: no subnormals
  const uint32_t mag = code & ((1u << (s.bits - 1)) - 1u);
  return (mag >> s.mbits) == 0 ? CodeKind::Subnormal : CodeKind::Normal;
}

std::vector<CodeRow> code_table(Format format) {
  const int n = format_info(format).code_count;
  std::vector<CodeRow> rows;
  rows.reserve(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) {
    const auto code = static_cast<uint8_t>(c);
    rows.push_back({code, split_bits(code, format), classify_code(code, format),
                    static_cast<double>(decode(code, codec_spec(format)))});
  }
  return rows;
}

std::vector<double> representable_values(Format format) {
  std::vector<double> v;
  for (const auto& r : code_table(format)) {
    if (std::isfinite(r.value)) v.push_back(r.value == 0 ? 0.0 : r.value);
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

ValueReport explain_value(double value, Format format, Overflow overflow) {
  const FormatInfo& info = format_info(format);
  const CodecSpec s = info.spec;
  ValueReport r{};
  r.format = format;
  r.overflow = overflow;
  r.input = value;
  r.code = encode_f64(value, s, overflow);
  r.bits = split_bits(r.code, format);
  r.kind = classify_code(r.code, format);
  r.decoded = decode(r.code, s);
  r.is_nan = std::isnan(r.decoded);
  r.subnormal = r.kind == CodeKind::Subnormal;

  const bool finite_in = std::isfinite(value);
  const double mag = std::fabs(value);
  // The value one step beyond max, were the exponent unbounded.
  const double next_up =
      s.nan == NanRule::AllOnes
          ? info.max_finite * 2
          : info.max_finite + std::ldexp(1.0, std::ilogb(info.max_finite) - s.mbits);
  const bool beyond = rounds_beyond_max(value, s);
  // Inf clamped to the largest finite value is saturated too.
  r.saturated = (beyond || std::isinf(value)) && std::isfinite(r.decoded);
  r.overflowed = beyond && !r.saturated;
  r.underflow = finite_in && value != 0 && r.decoded == 0;
  if (std::isnan(value) || std::isnan(r.decoded)) {
    r.abs_error = r.rel_error = std::numeric_limits<double>::quiet_NaN();
  } else if (std::isinf(value) || std::isinf(r.decoded)) {
    r.abs_error = r.rel_error = (value == r.decoded) ? 0.0 : INFINITY;
  } else {
    r.abs_error = std::fabs(r.decoded - value);
    r.rel_error = value == 0 ? (r.abs_error == 0 ? 0.0 : INFINITY) : r.abs_error / mag;
  }
  r.exact = r.decoded == value;

  // The representable values either side of the input, where it lies between two: a
  // tie is exactly midway (they have few bits: the midpoint is exact in fp64).
  std::optional<double> tie_lo, tie_hi;
  bool tie_beyond = false;  // the tie is with the step beyond max, which the format lacks
  const auto vals = representable_values(format);
  if (finite_in && !r.exact && !(s.nan == NanRule::AllOnes && !(value > 0))) {
    const auto up = std::upper_bound(vals.begin(), vals.end(), value);
    if (up != vals.end() && up != vals.begin() && *std::prev(up) < value &&
        (*std::prev(up) + *up) / 2 == value) {
      tie_lo = *std::prev(up);
      tie_hi = *up;
    } else if (mag == (info.max_finite + next_up) / 2) {
      // Midway between max and the step beyond it, which the format cannot hold.
      tie_lo = value < 0 ? -next_up : info.max_finite;
      tie_hi = value < 0 ? -info.max_finite : next_up;
      tie_beyond = true;
    }
  }
  if (!r.is_nan) {
    const double d =
        std::isinf(r.decoded) ? std::copysign(info.max_finite * 2, r.decoded) : r.decoded;
    auto hi = std::upper_bound(vals.begin(), vals.end(), d);
    auto lo = std::lower_bound(vals.begin(), vals.end(), d);
    if (hi != vals.end()) r.above = *hi;
    if (lo != vals.begin()) r.below = *std::prev(lo);
  }

  // "a tie between 1 and 1.125"; where one end is the step beyond max, each end named for
  // what it is, as the format does not hold that step.
  std::string between;
  if (tie_beyond) {
    between = "a tie between " + format_number(std::copysign(info.max_finite, value)) +
              " (the largest finite value) and " + format_number(std::copysign(next_up, value)) +
              " (one step beyond it, which " + std::string(info.name) + " does not have)";
  } else if (tie_lo) {
    between = "a tie between " + format_number(*tie_lo) + " and " + format_number(*tie_hi);
  }
  // Formats without Inf and NaN (the FP6 and FP4 ones) cannot overflow: in ieee mode too
  // they clamp to their largest finite value.
  const bool clamps_in_ieee = overflow == Overflow::Ieee && !s.has_inf && s.nan == NanRule::None;
  const std::string no_inf_nan =
      clamps_in_ieee ? " (" + std::string(info.name) + " has no Inf or NaN: ieee mode clamps too)"
                     : "";
  if (std::isnan(value)) {
    r.note = s.nan == NanRule::None
                 ? std::string(info.name) +
                       " has no NaN: NaN encodes to a zero of the opposite sign (as ml_dtypes does)"
                 : "NaN stays NaN";
  } else if (std::isinf(value)) {
    r.note = s.has_inf && overflow == Overflow::Ieee ? "Inf stays Inf"
             : r.is_nan ? std::string(info.name) + " has no Inf: Inf becomes NaN in ieee mode"
                        : "Inf is clamped to the largest finite value" + no_inf_nan;
  } else if (s.nan == NanRule::AllOnes && !(value > 0)) {
    r.note = "E8M0FNU holds positive powers of two only: zero and negatives encode as NaN";
  } else if (beyond) {
    // A tie that rounds beyond max says so first: the rounded value is the step beyond.
    const std::string tie = !tie_lo ? ""
                            : s.nan == NanRule::AllOnes
                                ? between + ": " + std::string(info.name) +
                                      " rounds a half up, to " +
                                      format_number(std::copysign(next_up, value)) + ", "
                                : between + ": rounds to the even one, " +
                                      format_number(std::copysign(next_up, value)) + ", ";
    r.note = r.overflowed
                 ? tie + "beyond the largest finite value (" + format_number(info.max_finite) +
                       "): " + (std::isinf(r.decoded) ? "overflows to Inf" : "overflows to NaN")
                 : tie + "beyond the largest finite value: clamped to " + format_number(r.decoded) +
                       no_inf_nan;
  } else if (tie_lo) {
    // Exactly midway: nearest-even takes the neighbour whose last mantissa bit is 0 (zero
    // counts as even); E8M0FNU, as ml_dtypes, rounds a half up.
    const std::string half = r.underflow ? "exactly half the smallest subnormal: " : "";
    r.note = s.nan == NanRule::AllOnes
                 ? half + between + ": " + std::string(info.name) + " rounds a half up, to " +
                       format_number(r.decoded)
                 : half + between + ": rounds to the even one, " + format_number(r.decoded) +
                       (r.underflow ? " (flushes to zero)" : "");
  } else if (r.underflow) {
    r.note = "below half the smallest subnormal: flushes to zero";
  } else if (finite_in && mag > info.max_finite && !r.is_nan) {
    r.note = "above the largest finite value but nearer to it than to the step beyond (" +
             format_number(next_up) + "): rounds to it, no " +
             (overflow == Overflow::Ieee && s.nan != NanRule::None ? "overflow" : "saturation");
  }
  if (!s.has_neg_zero && s.has_sign && std::signbit(value) && r.decoded == 0) {
    r.note +=
        std::string(r.note.empty() ? "" : " ") + "(+0: " + std::string(info.name) + " has no -0)";
  }
  return r;
}

namespace {

// A decimal number's digits without leading and trailing zeros, and the power of ten of
// the first ("0.0125" -> "125", -2); "" for zero. `t`: digits, at most one '.', an
// optional exponent after 'e' (as strtod took it).
std::pair<std::string, long> decimal_digits(const std::string& t) {
  std::string digits;
  long point = -1;  // digits before the '.'
  size_t i = 0;
  for (; i < t.size() && t[i] != 'e' && t[i] != 'E'; ++i) {
    if (t[i] == '.') {
      point = static_cast<long>(digits.size());
    } else {
      digits.push_back(t[i]);
    }
  }
  if (point < 0) point = static_cast<long>(digits.size());
  long exp = i < t.size() ? std::strtol(t.c_str() + i + 1, nullptr, 10) : 0;
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return {"", 0};
  digits = digits.substr(first, digits.find_last_not_of('0') - first + 1);
  exp += point - static_cast<long>(first) - 1;
  return {digits, exp};
}

// Whether the decimal text `t` (no sign) says exactly the double `v` (>= 0): its digits
// against v's exact decimal expansion (at most 767 significant digits).
bool decimal_is_exact(const std::string& t, double v) {
  std::vector<char> buf(1100);
  std::snprintf(buf.data(), buf.size(), "%.800e", v);
  return decimal_digits(t) == decimal_digits(buf.data());
}

// A hex number's bits without leading and trailing zeros, and the power of two of the
// first ("0x0.18p4" -> "11", 1); "" for zero. `t`: "0x", hex digits, at most one '.', an
// optional exponent after 'p' (as strtod took it, or as "%a" writes it).
std::pair<std::string, long long> hex_bits(const std::string& t) {
  std::string bits;
  long long point = -1;  // bits before the '.'
  size_t i = 2;
  for (; i < t.size() && t[i] != 'p' && t[i] != 'P'; ++i) {
    if (t[i] == '.') {
      point = static_cast<long long>(bits.size());
      continue;
    }
    const int d = std::isdigit(static_cast<unsigned char>(t[i]))
                      ? t[i] - '0'
                      : std::tolower(static_cast<unsigned char>(t[i])) - 'a' + 10;
    for (int b = 3; b >= 0; --b) bits.push_back((d >> b) & 1 ? '1' : '0');
  }
  if (point < 0) point = static_cast<long long>(bits.size());
  // Far beyond any text's length, so that the sums below cannot overflow.
  constexpr long long kFar = 1LL << 50;
  long long exp = i < t.size() ? std::strtoll(t.c_str() + i + 1, nullptr, 10) : 0;
  exp = std::clamp(exp, -kFar, kFar);
  const size_t first = bits.find('1');
  if (first == std::string::npos) return {"", 0};
  bits = bits.substr(first, bits.find_last_of('1') - first + 1);
  exp += point - static_cast<long long>(first) - 1;
  return {bits, exp};
}

// Whether the hex text `t` (no sign) says exactly the double `v` (>= 0): fp64 holds 53
// bits, and none below 2^-1074, so that longer text is rounded.
bool hex_is_exact(const std::string& t, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return hex_bits(t) == hex_bits(buf);
}

[[noreturn]] void beyond_fp64(const std::string& t, bool too_small) {
  throw std::invalid_argument("'" + t + "' is beyond the range of fp64: " +
                              (too_small
                                   ? "it is nearer zero than fp64's smallest nonzero value (" +
                                         format_number(std::numeric_limits<double>::denorm_min()) +
                                         ") and would read as 0"
                                   : "it is further from zero than fp64's largest value (" +
                                         format_number(std::numeric_limits<double>::max()) + ")"));
}

// A plain number (decimal or hex, inf, nan) as strtod reads it, with its range checked;
// nullopt for text that is no number.
std::optional<ParsedValue> parse_plain(const std::string& t) {
  bool ok = false;
  const double v = strict_strtod(t, ok);
  if (!ok) return std::nullopt;
  std::string body = t;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) body.erase(0, 1);
  const bool word = !body.empty() && std::isalpha(static_cast<unsigned char>(body[0]));
  if (word) return ParsedValue{v, false};  // inf, infinity, nan
  const bool hex = body.size() > 1 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X');
  if (std::isinf(v)) beyond_fp64(t, false);
  // Text that says zero reads as 0; other text that does is beyond fp64's range.
  const bool zero_text = hex ? body.find_first_not_of("0.", 2) == body.find_first_of("pP", 2)
                             : decimal_digits(body).first.empty();
  if (v == 0 && !zero_text) beyond_fp64(t, true);
  // Hex text holds binary digits, which fp64 keeps up to 53 of (longer text is rounded).
  return ParsedValue{
      v, hex ? !hex_is_exact(body, std::fabs(v)) : !decimal_is_exact(body, std::fabs(v))};
}

}  // namespace

ParsedValue parse_value_exactly(std::string_view text) {
  const std::string t = trim(text);
  if (const auto plain = parse_plain(t)) return *plain;
  // 2^-9, -2^10: the way powers are written on a whiteboard.
  const auto caret = t.find('^');
  if (caret != std::string::npos) {
    std::string base = t.substr(0, caret);
    const std::string ex = t.substr(caret + 1);
    // -2^10 is -(2^10), as on paper.
    const bool negative = !base.empty() && base[0] == '-';
    if (negative || (!base.empty() && base[0] == '+')) base.erase(0, 1);
    const auto b =
        base.empty() || base[0] == '-' || base[0] == '+' ? std::nullopt : parse_plain(base);
    const auto e = ex.empty() ? std::nullopt : parse_plain(ex);
    if (b && e && b->value >= 0 && std::isfinite(b->value) && std::isfinite(e->value) &&
        !(b->value == 0 && e->value < 0)) {
      const double v = std::pow(b->value, e->value);
      if (std::isinf(v)) beyond_fp64(t, false);
      if (v == 0 && b->value != 0) beyond_fp64(t, true);
      // Exact where a power of two is raised to a whole power fp64 holds (2^-1074 and up),
      // or a whole number to a whole power below 2^53.
      const bool whole_e = !e->rounded && e->value == std::floor(e->value);
      int k = 0;
      const bool pow2 = std::frexp(b->value, &k) == 0.5;
      const bool exact =
          !b->rounded && whole_e &&
          (b->value == 0 || b->value == 1 || (pow2 && (k - 1) * e->value >= -1074) ||
           (b->value == std::floor(b->value) && e->value >= 0 && v < 9007199254740992.0));
      return {negative ? -v : v, !exact};
    }
  }
  throw std::invalid_argument("'" + t +
                              "' is not a number: type e.g. 0.1, -3e-5, 0x1.8p3, 2^-9, inf or nan");
}

namespace {

// A number's text as an exact decimal: sign, digits without leading and trailing zeros
// and the power of ten of the first (decimal_digits()); nullopt for text that says no
// finite decimal or one this cannot tell (hex, inf, nan, a power such as 3^-1 or 2^0.5).
struct ExactDecimal {
  bool negative = false;
  std::pair<std::string, long> digits;
  bool operator==(const ExactDecimal& o) const {
    return digits == o.digits && (digits.first.empty() || negative == o.negative);
  }
};

// A digit times a 64-bit multiplier plus the carry needs more than 64 bits (GCC and
// Clang's 128-bit integer, marked as the extension it is).
__extension__ typedef unsigned __int128 Wide;

// Digits (most significant first) times m, a whole number.
std::string times(const std::string& digits, uint64_t m) {
  std::string out;
  Wide carry = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    const Wide cur = static_cast<Wide>(*it - '0') * m + carry;
    out.push_back(static_cast<char>('0' + static_cast<int>(cur % 10)));
    carry = cur / 10;
  }
  for (; carry > 0; carry /= 10)
    out.push_back(static_cast<char>('0' + static_cast<int>(carry % 10)));
  std::reverse(out.begin(), out.end());
  return out;
}

std::optional<ExactDecimal> exact_decimal(const std::string& text) {
  std::string t = trim(text);
  ExactDecimal d;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) {
    d.negative = t[0] == '-';
    t.erase(0, 1);
  }
  const auto plain = [](const std::string& p) -> std::optional<std::pair<std::string, long>> {
    bool ok = false;
    strict_strtod(p, ok);
    if (!ok || p.empty() || p[0] == '-' || p[0] == '+' ||
        p.find_first_not_of("0123456789.eE+-") != std::string::npos)
      return std::nullopt;
    return decimal_digits(p);
  };
  const auto caret = t.find('^');
  if (caret == std::string::npos) {
    const auto p = plain(t);
    if (!p) return std::nullopt;
    d.digits = *p;
    return d;
  }
  // b^e with b a decimal and e a whole number: b = m x 10^q (m whole), b^e = m^e x 10^(qe);
  // for e < 0, 1/m is a decimal where m = 2^i 5^j: 5^i 2^j x 10^-(i+j).
  const auto b = plain(t.substr(0, caret));
  std::string e_text = t.substr(caret + 1);
  const bool e_negative = !e_text.empty() && e_text[0] == '-';
  if (!e_text.empty() && (e_text[0] == '-' || e_text[0] == '+')) e_text.erase(0, 1);
  const auto ex = plain(e_text);
  if (!b || !ex || b->first.empty() || b->first.size() > 18) return std::nullopt;
  const long e_len = static_cast<long>(ex->first.size());
  if (ex->second < e_len - 1 || ex->second > 4) return std::nullopt;  // whole, below 10^5
  long n = ex->first.empty() ? 0 : std::stol(ex->first);
  for (long k = e_len - 1; k < ex->second; ++k) n *= 10;
  uint64_t m = std::stoull(b->first);
  long q = b->second - static_cast<long>(b->first.size() - 1);
  if (e_negative) {
    long i = 0, j = 0;
    for (; m % 2 == 0; m /= 2) ++i;
    for (; m % 5 == 0; m /= 5) ++j;
    if (m != 1 || 2.33 * static_cast<double>(i) + static_cast<double>(j) > 62) return std::nullopt;
    m = 1;
    for (long k = 0; k < i; ++k) m *= 5;
    for (long k = 0; k < j; ++k) m *= 2;
    q = -q - i - j;
  }
  std::string digits = "1";
  for (long k = 0; k < n; ++k) {
    digits = times(digits, m);
    if (digits.size() > 2000) return std::nullopt;
  }
  d.digits = decimal_digits(digits + "e" + std::to_string(q * n));
  return d;
}

}  // namespace

bool says_same_number(std::string_view a, std::string_view b) {
  const auto x = exact_decimal(std::string(a)), y = exact_decimal(std::string(b));
  return x && y && *x == *y;
}

double parse_value(std::string_view text) {
  return parse_value_exactly(text).value;
}

ValueReport explain_value(const ParsedValue& value, Format format, Overflow overflow) {
  ValueReport r = explain_value(value.value, format, overflow);
  r.input_rounded = value.rounded;
  r.exact = r.exact && !value.rounded;
  return r;
}

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // The shortest decimal that reads back as the same double.
  char buf[64];
  int prec = 1;
  for (; prec < 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  // Whole numbers up to 15 digits print without an exponent (500, not 5e+02).
  const double mag = std::fabs(v);
  if (mag >= 1 && mag < 1e15) {
    prec = std::max(prec, static_cast<int>(std::floor(std::log10(mag))) + 1);
  }
  std::snprintf(buf, sizeof buf, "%.*g", prec, v);
  return buf;
}

std::string format_short(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace fp8wb
