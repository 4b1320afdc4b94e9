// defines: RunConfigField, run_config_fields(), find_run_config_field(), FieldType,
// FieldGroup (kFieldGroups), model_bit(): the one table of RunConfig's fields, a row each
// (key, member, type, label, help, bounds, allowed names, the models it applies to, its
// group). Parsing, the bounds checks, JSON in and out, `fp8wb train --help`, the man page's
// check and the GUI run panel's form all read it. A field is its RunConfig member and its
// row, both in run_config.h (run_config_field_rows()).
// Plain C++: no torch, no Qt.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/kernels/name_table.h"

namespace fp8wb {

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
