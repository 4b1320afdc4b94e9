// defines: field_takes_text(), config_fields_roff(): RunConfig's fields as fp8wb writes
// them for people, from the one field table (run_config.h): `fp8wb train --help`'s list and
// the manual page's CONFIG FIELDS list, which the build writes into fp8wb.1
// (packaging/man/generate_man_page.cmake runs fp8wb_man_fields, which prints it).
#pragma once

#include <string>

namespace fp8wb {
struct RunConfigField;
}

namespace fp8wb::cli {

// What a field takes: "(delayed|current)", "(true|false)", "[1, 65536]", "<= 200
// characters"; empty where nothing is said.
std::string field_takes_text(const RunConfigField& f);

// The manual page's list of fields in roff (man(7)): a .SS per group, in the order and
// grouping of `fp8wb train --help`, then a .TP per field: its key in bold and what it
// takes, its help and the models it applies to.
std::string config_fields_roff();

}  // namespace fp8wb::cli
