// defines: BenchOptions, add_bench_command(), run_bench(): `fp8wb bench`.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace fp8wb::cli {

struct BenchOptions {
  std::string device = "cpu";
  int steps = 30;
  std::string model = "gpt";
  std::vector<std::string> overrides;
  bool json = false;
  bool store_only = false;
  bool train_only = false;
};

CLI::App* add_bench_command(CLI::App& app, BenchOptions& opt);
int run_bench(const BenchOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
