// defines: ReplayOptions (CLI), add_replay_command(), run_replay(): `fp8wb replay RUN
// --grid margin=... --grid window=... --grid amax_algo=... [--tensor NAME] [--json]`: a
// run's recorded amax replayed under other delayed-scaling settings (core/replay/replay.h).
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace fp8wb::cli {

struct ReplayCliOptions {
  std::string run;  // as typed: a positive id
  std::string db;
  std::vector<std::string> grid;  // AXIS=V1,V2,...
  std::string tensor;             // LAYER or LAYER/ROLE; empty: all
  bool json = false;
  bool sampled = false;  // a run without per-step amax: replay its sampled steps
};

CLI::App* add_replay_command(CLI::App& app, ReplayCliOptions& opt);
int run_replay(const ReplayCliOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
