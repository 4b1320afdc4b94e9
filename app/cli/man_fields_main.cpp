// fp8wb_man_fields: prints the manual page's list of config fields (roff, from the field
// table), which the build writes into fp8wb.1 (packaging/man/generate_man_page.cmake).
// A build tool, not installed.
#include <iostream>

#include "config_field_text.h"

int main() {
  std::cout << fp8wb::cli::config_fields_roff();
  return std::cout.good() ? 0 : 1;
}
