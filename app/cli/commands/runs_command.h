// defines: RunsOptions, add_runs_command(), run_runs(): `fp8wb runs
// list|show|export|delete|import`.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <ostream>
#include <string>

namespace fp8wb::cli {

struct RunsOptions {
  std::string action;  // list, show, export, delete, import
  std::string db;
  // As typed: the run's id, a positive number (show, export, delete), or the database file
  // to import from (import).
  std::string target;
  std::string format = "csv";
  std::string out_file;
  bool json = false;
  bool yes = false;
};

CLI::App* add_runs_command(CLI::App& app, RunsOptions& opt);
int run_runs(const RunsOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
