// defines: TrainOptions, add_train_command(), run_train(): `fp8wb train`.
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
  std::string run_uuid;  // the run's identity (a sweep's trial on a cluster), else a new one
  bool quiet = false;
  bool json = false;
  // Whether the error stream is a terminal: then the progress is one line redrawn in
  // place (a bar); otherwise (a file, a pipe, a job's log) plain lines now and then.
  bool terminal = false;
  int nproc = 1;        // ranks to start on this machine (data-parallel)
  int master_port = 0;  // their rendezvous port (0: MASTER_PORT, else a free one)
};

CLI::App* add_train_command(CLI::App& app, TrainOptions& opt);
int run_train(const TrainOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
