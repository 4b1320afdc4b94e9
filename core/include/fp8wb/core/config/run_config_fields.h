// defines: run_config_fields(), find_run_config_field(), field_names_text(),
// field_bounds_text(): lookups over RunConfig's one field table. The table's types
// (RunConfigField, FieldType, FieldGroup, model_bit()) and its rows
// (run_config_field_rows(), a row beside each member) are in run_config.h. Parsing, the
// bounds checks, JSON in and out, `fp8wb train --help` and the GUI run panel's form all
// read it. Plain C++: no torch, no Qt.
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
