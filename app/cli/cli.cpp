#include "cli.h"

#include <CLI/CLI.hpp>
#include <exception>
#include <string>
#include <vector>

#include "bench_command.h"
#include "bounded_words.h"
#include "demo_command.h"
#include "eval_command.h"
#include "formats_command.h"
#include "fp8wb/core/backend_info.h"
#include "fp8wb/core/default_formats.h"
#include "fp8wb/core/run_config.h"
#include "fp8wb/core/value_report.h"
#include "inspect_command.h"
#include "replay_command.h"
#include "runs_command.h"
#include "sweep_command.h"
#include "train_command.h"

namespace fp8wb::cli {

namespace {

std::string version_text() {
  const BackendInfo b = probe_backend();
  return "fp8wb " + b.workbench_version + " (LibTorch " + b.torch_version + "; " + b.device_name +
         "; FP8 GEMM " + b.fp8_gemm + ")";
}

int run_info(std::ostream& out) {
  const BackendInfo b = probe_backend();
  out << "workbench     " << b.workbench_version << "\n"
      << "LibTorch      " << b.torch_version
      << (b.rocm               ? " (ROCm build)"
          : b.torch_cuda_build ? " (CUDA build)"
                               : " (CPU build)")
      << (b.torch_float8 ? ", float8 dtypes" : ", no float8 dtypes") << "\n"
      << "device        " << b.device_name << "\n"
      << "CUDA devices  " << b.cuda_devices << "\n"
      << "CUDA kernels  " << (b.cuda_kernels_built ? "built" : "not built") << "\n"
      << "CPU threads   " << b.cpu_threads << "\n"
      << "FP8 GEMM      " << b.fp8_gemm << "\n";
  const FormatPairingEntry& f = table_entry(kFormatPairings, default_format_pairing(b));
  out << "FP8 formats   " << f.name << " (" << format_info(f.input).name << ", "
      << format_info(f.grad_output).name << ") by default\n";
  return 0;
}

// `formats`' arguments, with each negative value that the parser would take for an option
// (-inf, -.5, -nan, -2^-9: a '-' before anything but a digit) given a leading space, which
// keeps it a value and which the value's parser ignores. The others, and everything after
// `--`, as they are.
std::vector<std::string> with_negative_values(int argc, const char* const* argv) {
  std::vector<std::string> args(argv, argv + argc);
  size_t i = 1;
  while (i < args.size() && !args[i].empty() && args[i][0] == '-') ++i;  // fp8wb's own options
  if (i >= args.size() || args[i] != "formats") return args;
  for (++i; i < args.size() && args[i] != "--"; ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9')) continue;
    try {
      parse_value(a);
    } catch (const std::exception&) {
      continue;  // an option (or a mistake the parser names)
    }
    args[i] = " " + a;
  }
  return args;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err_to, bool color,
            bool err_terminal) {
  // Every message goes through BoundedWords: a long input quoted back is cut.
  BoundedWords bounded(err_to.rdbuf());
  std::ostream err(&bounded);
  CLI::App app{"FP8 Workbench, headless: see what FP8 does to numbers"};
  app.name("fp8wb");
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("-V,--version", version, "Print the version and the compute backend");
  FormatsOptions formats;
  add_formats_command(app, formats);
  DemoOptions demo;
  add_demo_command(app, demo);
  auto* info = app.add_subcommand("info", "Show the compute backend: device, LibTorch, FP8 GEMMs");
  TrainOptions train;
  auto* train_cmd = add_train_command(app, train);
  RunsOptions runs;
  auto* runs_cmd = add_runs_command(app, runs);
  BenchOptions bench;
  auto* bench_cmd = add_bench_command(app, bench);
  InspectOptions inspect;
  auto* inspect_cmd = add_inspect_command(app, inspect);
  SweepOptions sweep;
  auto* sweep_cmd = add_sweep_command(app, sweep);
  ReplayCliOptions replay;
  auto* replay_cmd = add_replay_command(app, replay);
  EvalCommandOptions eval;
  auto* eval_cmd = add_eval_command(app, eval);
  try {
    const std::vector<std::string> args = with_negative_values(argc, argv);
    std::vector<const char*> arg_ptrs;
    for (const std::string& a : args) arg_ptrs.push_back(a.c_str());
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version end here with 0; every usage error (an unknown option, a
    // missing or malformed value) with 2, as the commands' own usage errors do, CLI11's
    // message said.
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }
  try {
    init_compute_threads();
    if (version) {
      out << version_text() << "\n";
      return 0;
    }
    if (app.got_subcommand("formats")) {
      formats.color = color;
      return run_formats(formats, out, err);
    }
    if (info->parsed()) return run_info(out);
    if (app.got_subcommand("demo")) return run_demo(demo, out, err);
    if (train_cmd->parsed()) {
      train.terminal = err_terminal;
      return run_train(train, out, err);
    }
    if (runs_cmd->parsed()) return run_runs(runs, out, err);
    if (bench_cmd->parsed()) return run_bench(bench, out, err);
    if (inspect_cmd->parsed()) {
      inspect.terminal = err_terminal;
      return run_inspect(inspect, out, err);
    }
    if (sweep_cmd->parsed()) return run_sweep(sweep, out, err);
    if (replay_cmd->parsed()) return run_replay(replay, out, err);
    if (eval_cmd->parsed()) return run_eval(eval, out, err);
    out << app.help();
    return 0;
  } catch (const std::exception& e) {
    err << "fp8wb: " << without_backtrace(e.what()) << "\n";
    return 1;
  }
}

}  // namespace fp8wb::cli
