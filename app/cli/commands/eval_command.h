// defines: EvalOptions (CLI), add_eval_command(), run_eval(): `fp8wb eval --hf DIR --data
// TOKENS`: what FP8 does to a checkpoint's loss (core: evaluate_checkpoint()).
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace fp8wb::cli {

struct EvalCommandOptions {
  std::string hf, data;
  std::vector<std::string> overrides;  // --set: recipe (a comma-separated list), formats, ...
  int64_t context = 0, windows = 0;
  std::string dtype;
  std::string device = "cpu";
  int batch = 8;
  bool json = false;
};

CLI::App* add_eval_command(CLI::App& app, EvalCommandOptions& opt);
int run_eval(const EvalCommandOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
