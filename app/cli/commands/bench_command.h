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
  // Every variant runs this many times, the variants in turn (1 2 3 1 2 3 ...): a machine
  // whose speed drifts moves every variant's figures alike. The figures take every round's
  // timed steps.
  int rounds = 1;
  std::string model = "gpt";
  std::vector<std::string> overrides;
  bool json = false;
  bool store_only = false;
  bool train_only = false;
  // --comm: the ranks' exchanges instead (all-reduce fp32, all-gather FP8 against bf16).
  bool comm = false;
  int nproc = 1;
  int master_port = 0;
  int64_t rows = 1024;
  int64_t cols = 1024;
  // The options given that only --comm reads (--nproc, --rows, ...), as typed.
  std::vector<std::string> comm_only_given;
};

CLI::App* add_bench_command(CLI::App& app, BenchOptions& opt);
int run_bench(const BenchOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
