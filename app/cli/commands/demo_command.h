// defines: DemoOptions, add_demo_command(), run_demo():
// `fp8wb demo outliers|gradients|master-weights|loss-scaling`.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace fp8wb::cli {

struct DemoOptions {
  std::string which;  // "outliers", "gradients", "master-weights" or "loss-scaling"
  std::string format = "E4M3FN";
  std::vector<double> factors;  // outliers: override the outlier factors
  double gradient_scale = 1.0;
  double update = 1e-3;         // master-weights: the update added every step
  int steps = 1000;             // master-weights, loss-scaling
  int seeds = 32;               // master-weights: stochastic rounding runs
  double init_scale = 65536.0;  // loss-scaling
  int growth_interval = 50;     // loss-scaling
  unsigned seed = 0;
  bool json = false;
};

void add_demo_command(CLI::App& app, DemoOptions& opt);
int run_demo(const DemoOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
