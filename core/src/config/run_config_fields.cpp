// The run config's field table (run_config_fields.h): one row per RunConfig member.
// Plain C++, no torch.
#include "fp8wb/core/config/run_config_fields.h"

#include <cmath>
#include <cstdio>

namespace fp8wb {

const std::vector<RunConfigField>& run_config_fields() {
  static const std::vector<RunConfigField> fields = run_config_field_rows();
  return fields;
}

const RunConfigField* find_run_config_field(std::string_view key) {
  for (const RunConfigField& f : run_config_fields()) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

std::string field_names_text(const RunConfigField& f) {
  std::string s;
  for (std::string_view n : f.names) (s += s.empty() ? "" : ", ") += n;
  return s;
}

std::string field_limit_text(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e16) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string field_bounds_text(const RunConfigField& f) {
  if (f.type == FieldType::Text || f.type == FieldType::Name) {
    return f.has_max() && f.names.empty() ? "<= " + field_limit_text(f.max) + " characters"
                                          : std::string();
  }
  if (f.has_min() && f.has_max()) {
    return (f.min_excluded ? "(" : "[") + field_limit_text(f.min) + ", " + field_limit_text(f.max) +
           "]";
  }
  if (f.has_min()) return (f.min_excluded ? "> " : ">= ") + field_limit_text(f.min);
  if (f.has_max()) return "<= " + field_limit_text(f.max);
  return {};
}

}  // namespace fp8wb
