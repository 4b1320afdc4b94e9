// defines: Role, kRoles, role_name(), parse_role(), role_names(): the three operands of a
// linear layer that are quantized (input x, weight w, output gradient dy), named by one
// table. Plain enum, no torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fp8wb/kernels/name_table.h"

namespace fp8wb {

enum class Role : uint8_t {
  Input,       // x, quantized in the forward
  Weight,      // w, quantized in the forward
  GradOutput,  // dy, quantized in the backward
};

struct RoleEntry {
  Role value;
  std::string_view name;  // as stored in the run database and shown to users
};
inline constexpr RoleEntry kRoles[] = {
    {Role::Input, "input"},
    {Role::Weight, "weight"},
    {Role::GradOutput, "grad_output"},
};
static_assert(names_cover_enum(kRoles, Role::GradOutput));
inline constexpr size_t kRoleCount = sizeof(kRoles) / sizeof(kRoles[0]);

inline std::string_view role_name(Role r) {
  return table_name(kRoles, r);
}
inline std::optional<Role> parse_role(std::string_view name) {
  return parse_table_name(kRoles, name);
}
inline std::string role_names() {
  return table_names(kRoles);
}
inline size_t role_index(Role r) {
  return static_cast<size_t>(r);
}

}  // namespace fp8wb
