// defines: Result, run(): fp8wb's command line run in-process, for the CLI tests.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "cli.h"

namespace fp8wb::test {

struct Result {
  int rc;
  std::string out, err;
};

inline Result run(std::vector<std::string> args) {
  args.insert(args.begin(), "fp8wb");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int rc = fp8wb::cli::run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {rc, out.str(), err.str()};
}

}  // namespace fp8wb::test
