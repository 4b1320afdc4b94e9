// defines: InspectOptions, add_inspect_command(), run_inspect(): `fp8wb inspect CKPT`.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

namespace fp8wb::cli {

struct InspectOptions {
  std::string path;
  std::string format;  // only this format's results (e.g. E4M3FN)
  std::string recipe;  // only this scaling (tensorwise, rowwise, 1x128, 128x128, mx, nvfp4)
  std::string device = "auto";  // auto, cpu or gpu
  bool json = false;
  bool wide = false;        // tensor names whole, however long (else cut in the middle past 72)
  std::string export_path;  // write an FP8 (128x128 blocks) copy here
  bool terminal = false;    // stderr is a terminal: progress redrawn on one line
};

CLI::App* add_inspect_command(CLI::App& app, InspectOptions& opt);
int run_inspect(const InspectOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
