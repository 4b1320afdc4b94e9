#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli.h"

int main(int argc, char** argv) {
  const bool color = isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr;
  return fp8wb::cli::run_cli(argc, argv, std::cout, std::cerr, color, isatty(STDERR_FILENO) != 0);
}
