#include "commands/formats_command.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "command_registry.h"
#include "fp8wb/core/formats/value_report.h"

namespace fp8wb::cli {
namespace {

using nlohmann::json;

std::vector<Format> selected_formats(const FormatsOptions& opt) {
  if (opt.formats.empty()) return {kAllFormats.begin(), kAllFormats.end()};
  std::vector<Format> out;
  for (const auto& name : opt.formats) {
    const auto f = parse_format(name);
    if (!f) {
      throw std::invalid_argument("unknown format '" + name + "': known formats are " +
                                  format_names());
    }
    out.push_back(*f);
  }
  return out;
}

// sign red, exponent blue, mantissa green, as on the GUI's bit boxes.
std::string colored_bits(const BitFields& b, bool color) {
  if (!color) return b.joined(' ');
  std::string s;
  if (!b.sign.empty()) s += "\033[31m" + b.sign + "\033[0m ";
  s += "\033[34m" + b.exponent + "\033[0m";
  if (!b.mantissa.empty()) s += " \033[32m" + b.mantissa + "\033[0m";
  return s;
}

std::string flags_of(const ValueReport& r) {
  std::string f;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!f.empty()) f += ",";
    f += name;
  };
  add(r.exact, "exact");
  add(r.subnormal, "subnormal");
  add(r.saturated, "saturated");
  add(r.overflowed, "overflow");
  add(r.underflow, "underflow");
  add(r.is_nan, "nan");
  add(r.kind == CodeKind::Infinity, "inf");
  return f.empty() ? "-" : f;
}

// The text without surrounding spaces.
std::string trim_text(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n\r\f\v") - b + 1);
}

std::string opt_number(const std::optional<double>& v) {
  return v ? format_number(*v) : "-";
}

std::string percent(double rel) {
  if (std::isnan(rel)) return "nan";
  if (std::isinf(rel)) return "inf";
  return fmt::format("{:.3g}%", rel * 100);
}

json report_json(const ValueReport& r) {
  auto num = [](double v) -> json {
    if (std::isfinite(v)) return v;
    return format_number(v);  // JSON has no NaN/Inf: spell them
  };
  json j;
  j["format"] = std::string(format_info(r.format).name);
  j["overflow"] = std::string(overflow_name(r.overflow));
  j["input"] = num(r.input);
  j["input_rounded"] = r.input_rounded;
  j["code"] = fmt::format("0x{:02x}", r.code);
  j["bits"] = {{"sign", r.bits.sign}, {"exponent", r.bits.exponent}, {"mantissa", r.bits.mantissa}};
  j["kind"] = std::string(code_kind_name(r.kind));
  j["decoded"] = num(r.decoded);
  j["abs_error"] = num(r.abs_error);
  j["rel_error"] = num(r.rel_error);
  j["below"] = r.below ? num(*r.below) : json(nullptr);
  j["above"] = r.above ? num(*r.above) : json(nullptr);
  j["flags"] = {{"exact", r.exact},         {"subnormal", r.subnormal}, {"saturated", r.saturated},
                {"overflow", r.overflowed}, {"underflow", r.underflow}, {"nan", r.is_nan}};
  if (!r.note.empty()) j["note"] = r.note;
  return j;
}

int print_values(const FormatsOptions& opt, Overflow ov, std::ostream& out) {
  const auto formats = selected_formats(opt);
  std::vector<ParsedValue> values;
  for (const auto& v : opt.values) values.push_back(parse_value_exactly(v));
  if (opt.json) {
    json all = json::array();
    for (const ParsedValue& v : values) {
      for (Format f : formats) all.push_back(report_json(explain_value(v, f, ov)));
    }
    out << all.dump(2) << "\n";
    return 0;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out << "\n";
    // Text that fp64 rounded to a value shown as another number is named beside it (not
    // 1e-3, which is 0.001 as shown).
    const std::string shown = format_number(values[i].value);
    const std::string typed = trim_text(opt.values[i]);
    out << fmt::format("value {}{} ({} overflow)\n", shown,
                       values[i].rounded && !says_same_number(typed, shown)
                           ? " (fp64's nearest to " + typed + ")"
                           : "",
                       overflow_name(ov));
    out << fmt::format("{:<9} {:<5} {:<12} {:>14} {:>12} {:>9} {:>14} {:>14}  {}\n", "format",
                       "code", "s exp man", "decoded", "abs error", "rel error", "below", "above",
                       "flags");
    for (Format f : formats) {
      const ValueReport r = explain_value(values[i], f, ov);
      const std::string plain = r.bits.joined(' ');
      // Pad on the plain text: escape codes have no width.
      const std::string bits = colored_bits(r.bits, opt.color) +
                               std::string(plain.size() < 12 ? 12 - plain.size() : 0, ' ');
      out << fmt::format("{:<9} 0x{:02x}  {} {:>14} {:>12} {:>9} {:>14} {:>14}  {}\n",
                         format_info(f).name, r.code, bits, format_number(r.decoded),
                         format_short(r.abs_error), percent(r.rel_error), opt_number(r.below),
                         opt_number(r.above), flags_of(r));
      if (!r.note.empty()) out << fmt::format("{:<9} note: {}\n", "", r.note);
    }
  }
  return 0;
}

int print_table(const FormatsOptions& opt, std::ostream& out) {
  const auto f = parse_format(opt.table);
  if (!f) {
    throw std::invalid_argument("unknown format '" + opt.table + "': known formats are " +
                                format_names());
  }
  const auto rows = code_table(*f);
  if (opt.json) {
    json all = json::array();
    for (const auto& r : rows) {
      all.push_back(
          {{"code", fmt::format("0x{:02x}", r.code)},
           {"bits", r.bits.joined(' ')},
           {"kind", std::string(code_kind_name(r.kind))},
           {"value", std::isfinite(r.value) ? json(r.value) : json(format_number(r.value))}});
    }
    out << all.dump(2) << "\n";
    return 0;
  }
  if (opt.csv) {
    out << "code,bits,kind,value\n";
    for (const auto& r : rows) {
      out << fmt::format("0x{:02x},{},{},{}\n", r.code, r.bits.joined(' '), code_kind_name(r.kind),
                         format_number(r.value));
    }
    return 0;
  }
  const FormatInfo& info = format_info(*f);
  // E8M0FNU has no subnormals (min_subnormal 0): said as "none", not as a value 0.
  out << fmt::format("{}: {} codes, bias {}, max {}, min normal {}, min subnormal {}\n", info.name,
                     info.code_count, static_cast<int>(info.spec.bias),
                     format_number(info.max_finite), format_number(info.min_normal),
                     info.min_subnormal > 0 ? format_number(info.min_subnormal) : "none");
  out << fmt::format("{:<6} {:<12} {:<10} {}\n", "code", "s exp man", "kind", "value");
  for (const auto& r : rows) {
    const std::string plain = r.bits.joined(' ');
    out << fmt::format("0x{:02x}   {}{} {:<10} {}\n", r.code, colored_bits(r.bits, opt.color),
                       std::string(plain.size() < 12 ? 12 - plain.size() : 0, ' '),
                       code_kind_name(r.kind), format_number(r.value));
  }
  return 0;
}

}  // namespace

void add_formats_command(CLI::App& app, FormatsOptions& opt) {
  auto* cmd = app.add_subcommand(
      "formats", "Show how values encode in every FP8/FP6/FP4 format, or a format's code table");
  cmd->add_option("values", opt.values, "Values to explain: 0.1, -3e-5, 0x1.8p3, 2^-9, inf, nan");
  cmd->add_option("-f,--format", opt.formats,
                  "Only these formats (repeatable): E4M3FN, E5M2, E4M3FNUZ, E5M2FNUZ, E8M0FNU, "
                  "E2M1FN, E3M2FN, E2M3FN, or aliases such as e4m3, fp4")
      ->allow_extra_args(false);  // one format an -f: `-f e4m3 -- -inf` leaves -inf a value
  cmd->add_option("-t,--table", opt.table, "Print all codes of this format (without values)");
  cmd->add_option("-o,--overflow", opt.overflow, "Overflow mode: saturate (default) or ieee");
  cmd->add_flag("--json", opt.json, "Machine-readable output");
  cmd->add_flag("--csv", opt.csv, "CSV output (with --table)");
}

int run_formats(const FormatsOptions& opt, std::ostream& out, std::ostream& err) {
  try {
    const auto ov = parse_overflow(opt.overflow);
    if (!ov) {
      throw std::invalid_argument("unknown overflow mode '" + opt.overflow +
                                  "': use saturate or ieee");
    }
    if (opt.csv && opt.table.empty()) {
      throw std::invalid_argument("--csv is for a code table: give --table FORMAT (or --json)");
    }
    if (!opt.table.empty() && !opt.values.empty()) {
      // The command explains values or lists a code table, not both: a value given with
      // --table would be left out without a word.
      const std::string& v = opt.values.front();
      throw std::invalid_argument("give values or --table, not both: `fp8wb formats " + v + " -f " +
                                  opt.table + "` explains " + v + " in " + opt.table +
                                  ", `fp8wb formats --table " + opt.table + "` lists its codes");
    }
    if (!opt.table.empty()) return print_table(opt, out);
    if (opt.values.empty()) {
      throw std::invalid_argument("give a value (e.g. fp8wb formats 0.1) or --table FORMAT");
    }
    return print_values(opt, *ov, out);
  } catch (const std::invalid_argument& e) {
    err << "fp8wb formats: " << e.what() << "\n";
    return 2;
  }
}

namespace {
const CommandRegistrar kCommand{
    "formats", 10,
    command_with<FormatsOptions>(add_formats_command, [](FormatsOptions& opt, const CliContext& ctx,
                                                         std::ostream& out, std::ostream& err) {
      opt.color = ctx.color;
      return run_formats(opt, out, err);
    })};
}  // namespace

}  // namespace fp8wb::cli
