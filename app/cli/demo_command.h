// defines: DemoOptions, add_demo_command(), run_demo(): `fp8wb demo outliers|gradients`.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace fp8wb::cli {

struct DemoOptions {
  std::string which;  // "outliers" or "gradients"
  std::string format = "E4M3FN";
  std::vector<double> factors;  // outliers: override the outlier factors
  double gradient_scale = 1.0;
  unsigned seed = 0;
  bool json = false;
};

void add_demo_command(CLI::App& app, DemoOptions& opt);
int run_demo(const DemoOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
