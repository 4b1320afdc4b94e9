// defines: BitFields, ValueReport, explain_value(), CodeRow, code_table(),
// representable_values(), parse_value(): the logic behind the format explorer, shared by
// the CLI (fp8wb formats) and the GUI's Formats tab. Plain structs, no torch, no Qt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8wb/kernels/format.h"

namespace fp8wb {

// A code split into its fields, each as a string of '0' and '1' (sign is empty where the
// format has none, mantissa is empty for E8M0FNU).
struct BitFields {
  std::string sign;
  std::string exponent;
  std::string mantissa;
  std::string joined(char sep = ' ') const;
};

enum class CodeKind : uint8_t { Zero, Subnormal, Normal, Infinity, NaN };
std::string_view code_kind_name(CodeKind k);

struct ValueReport {
  Format format;
  Overflow overflow;
  double input = 0;  // the value asked about (fp64)
  uint8_t code = 0;
  BitFields bits;
  CodeKind kind = CodeKind::Zero;
  double decoded = 0;
  double abs_error = 0;  // |decoded - input|; NaN where either is NaN, Inf on overflow
  double rel_error = 0;  // abs_error / |input|; 0 for an exact zero
  // The representable finite values next to the decoded value, below and above it.
  std::optional<double> below;
  std::optional<double> above;
  bool exact = false;          // decoded == input (and the input is what was typed)
  bool input_rounded = false;  // the typed text is not an fp64 value: input is its nearest
  bool subnormal = false;      // the code is a subnormal
  bool saturated = false;      // input rounds beyond max finite and was clamped to +-max
  bool overflowed = false;     // input rounds beyond max finite: Inf or NaN (ieee mode)
  bool underflow = false;      // input finite and != 0, result +-0
  bool is_nan = false;         // the code is a NaN
  std::string note;            // one sentence for the unusual cases (NaN, Inf, no zero...)
};

ValueReport explain_value(double value, Format format, Overflow overflow = Overflow::Saturate);

struct CodeRow {
  uint8_t code;
  BitFields bits;
  CodeKind kind;
  double value;
};
// All 2^bits codes of a format, in code order.
std::vector<CodeRow> code_table(Format format);

BitFields split_bits(uint8_t code, Format format);
CodeKind classify_code(uint8_t code, Format format);

// Every finite value of a format, ascending, without duplicates (+0 and -0 are one).
std::vector<double> representable_values(Format format);

// Parses what a user types: decimal or hex floats (0x1.8p3), "inf", "-inf", "nan", and
// powers written 2^-9. Throws std::invalid_argument with a message for the user, for text
// that is no number and for a finite value beyond fp64's range ("1e400 is beyond the
// range of fp64", as are 1e-400, which fp64 would read as 0, and 2^99999).
double parse_value(std::string_view text);

// parse_value()'s value, and whether it differs from what the text says (0.1, 1e-310,
// 10^-1, 0x1.00000000000001p0: fp64's nearest), so that a result equal to it is not called
// exact.
struct ParsedValue {
  double value = 0;
  bool rounded = false;
};
ParsedValue parse_value_exactly(std::string_view text);
// Whether two texts say exactly the same number, however written: 0.001, 1e-3, 1E-03,
// 0.0010 and 10^-3 do; 0.001 and 0.0010000000000000000001 do not. Decimal text and powers
// of a decimal to a whole exponent are compared by their exact values; text whose value
// this cannot write as a decimal (hex, 3^-1, 2^0.5, inf, nan) says the same as nothing.
bool says_same_number(std::string_view a, std::string_view b);
// explain_value() for a typed value: one that fp64 rounded is never exact (its errors are
// against fp64's nearest value).
ValueReport explain_value(const ParsedValue& value, Format format,
                          Overflow overflow = Overflow::Saturate);

// The shortest decimal that reads back as the same double ("inf", "nan" for those).
std::string format_number(double v);
// Four significant digits, for errors and percentages.
std::string format_short(double v);

}  // namespace fp8wb
