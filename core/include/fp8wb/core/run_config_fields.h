// defines: RunConfigField, run_config_fields(), find_run_config_field(), FieldType,
// FieldGroup (kFieldGroups), model_bit(): the one table of RunConfig's fields, a row each
// (key, member, type, label, help, bounds, allowed names, the models it applies to, its
// group). Parsing, the bounds checks, JSON in and out, `fp8wb train --help`, the man page's
// check and the GUI run panel's form all read it: a field is added here (and to RunConfig).
// Plain C++: no torch, no Qt.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fp8wb/core/run_config.h"
#include "fp8wb/kernels/name_table.h"

namespace fp8wb {

// How a field's value is written: text, a whole number, a number, true/false, or one name
// of a fixed list (`names`).
enum class FieldType : uint8_t { Text, Integer, Real, Boolean, Name };

// What a field is about (help texts and the man page list fields by group).
enum class FieldGroup : uint8_t { Run, Model, Optimizer, FP8, Statistics, Ranks };
struct FieldGroupEntry {
  FieldGroup value;
  std::string_view name;  // as help texts title it
};
inline constexpr FieldGroupEntry kFieldGroups[] = {
    {FieldGroup::Run, "The run"},
    {FieldGroup::Model, "The model"},
    {FieldGroup::Optimizer, "The optimizer"},
    {FieldGroup::FP8, "FP8"},
    {FieldGroup::Statistics, "Statistics"},
    {FieldGroup::Ranks, "Ranks"},
};
static_assert(names_cover_enum(kFieldGroups, FieldGroup::Ranks));

// The models a field applies to, a bit per ModelKind.
constexpr uint8_t model_bit(ModelKind m) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(m));
}
inline constexpr uint8_t kMlpOnly = model_bit(ModelKind::Mlp);
inline constexpr uint8_t kLlamaOnly = model_bit(ModelKind::Llama);
inline constexpr uint8_t kDecoders = model_bit(ModelKind::Gpt) | model_bit(ModelKind::Llama);
inline constexpr uint8_t kAllModels = kMlpOnly | kDecoders;

// The RunConfig member a field reads and writes.
using FieldMember =
    std::variant<std::string RunConfig::*, int RunConfig::*, int64_t RunConfig::*,
                 uint64_t RunConfig::*, double RunConfig::*, bool RunConfig::*,
                 ModelKind RunConfig::*, Float8Recipe RunConfig::*, FormatPairing RunConfig::*,
                 ScalingMode RunConfig::*, AmaxAlgo RunConfig::*, OnNonfinite RunConfig::*,
                 ActivationDtype RunConfig::*>;

struct RunConfigField {
  std::string_view key;  // as config files and --set spell it
  FieldMember member;
  FieldType type = FieldType::Text;
  std::string_view label;  // as the GUI's form labels it
  std::string_view help;   // what it means, for tooltips and help texts
  // Numbers: the least value (`min_excluded`: above it, not at it) and the largest, both
  // refused past (core/src/README.md, "Limits"); text: `max` is its length. NaN: no
  // bound beyond the checks of validate_run_config().
  double min = std::numeric_limits<double>::quiet_NaN();
  bool min_excluded = false;
  double max = std::numeric_limits<double>::quiet_NaN();
  // The values it takes, for a Name (from the enum's name table) or text of fixed words.
  std::vector<std::string_view> names;
  uint8_t models = kAllModels;  // model_bit()s
  FieldGroup group = FieldGroup::Run;

  bool applies_to(ModelKind m) const { return (models & model_bit(m)) != 0; }
  bool has_min() const { return !std::isnan(min); }
  bool has_max() const { return !std::isnan(max); }
};

// Every field, in the order config JSON writes them.
const std::vector<RunConfigField>& run_config_fields();
const RunConfigField* find_run_config_field(std::string_view key);

// "a, b, c": a field's allowed names, for messages and help.
std::string field_names_text(const RunConfigField& f);
// 65536, 1e+30: a bound as people write it.
std::string field_limit_text(double v);
// "[1, 65536]", "(0, 10]", ">= 0", "<= 200 characters": a field's bounds, empty where none.
std::string field_bounds_text(const RunConfigField& f);

}  // namespace fp8wb
