// defines: TrainOptions, add_train_command(), run_train(), default_run_name(): `fp8wb train`.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace fp8wb {
struct RunConfig;
}

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

// The name of a run whose config file and --set give none: its model, recipe and scaling
// ("gpt tensorwise delayed"; "mlp, no FP8"), then the --set fields given, with the values
// the config holds, in the order given: "gpt tensorwise delayed: margin=2, window=1024"
// (four at most, then how many more).
std::string default_run_name(const RunConfig& cfg, const std::vector<std::string>& overrides);

}  // namespace fp8wb::cli
