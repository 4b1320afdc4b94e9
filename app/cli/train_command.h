// defines: TrainOptions, RunsOptions, BenchOptions and their add_/run_ functions:
// `fp8wb train`, `fp8wb runs list|show|export|delete`, `fp8wb bench`.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace fp8wb::cli {

struct TrainOptions {
  std::string config_file;
  std::vector<std::string> overrides;  // key=value
  std::string db;
  std::string device;
  std::string weights;
  bool quiet = false;
  bool json = false;
};

struct RunsOptions {
  std::string action;  // list, show, export, delete
  std::string db;
  int64_t id = 0;
  std::string format = "csv";
  std::string out_file;
  bool json = false;
  bool yes = false;
};

struct BenchOptions {
  std::string device = "cpu";
  int steps = 30;
  std::string model = "gpt";
  std::vector<std::string> overrides;
  bool json = false;
  bool store_only = false;
  bool train_only = false;
};

CLI::App* add_train_command(CLI::App& app, TrainOptions& opt);
CLI::App* add_runs_command(CLI::App& app, RunsOptions& opt);
CLI::App* add_bench_command(CLI::App& app, BenchOptions& opt);
int run_train(const TrainOptions& opt, std::ostream& out, std::ostream& err);
int run_runs(const RunsOptions& opt, std::ostream& out, std::ostream& err);
int run_bench(const BenchOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
