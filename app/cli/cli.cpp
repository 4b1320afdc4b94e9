#include "cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bounded_words.h"
#include "command_registry.h"
#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/formats/value_report.h"

namespace fp8wb::cli {

namespace {

std::string version_text() {
  const BackendInfo b = probe_backend();
  return "fp8wb " + b.workbench_version + " (LibTorch " + b.torch_version + "; " + b.device_name +
         "; FP8 GEMM " + b.fp8_gemm + ")";
}

// The registry: filled by the commands' registrars before main(), whatever the order in
// which their files' statics are made (a function's static is made at its first use).
struct Registry {
  std::vector<RegisteredCommand> commands;  // in help order
  std::string duplicate;                    // a name registered twice, if any
};

Registry& registry() {
  static Registry r;
  return r;
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

CommandRegistrar::CommandRegistrar(std::string name, int help_order, CommandAdder add) {
  Registry& r = registry();
  for (const RegisteredCommand& c : r.commands) {
    if (c.name == name) r.duplicate = name;
  }
  // After those of a lower or equal help order: commands of one order in the order registered.
  const auto at =
      std::upper_bound(r.commands.begin(), r.commands.end(), help_order,
                       [](int order, const RegisteredCommand& c) { return order < c.help_order; });
  r.commands.insert(at, RegisteredCommand{std::move(name), help_order, std::move(add)});
}

const std::vector<RegisteredCommand>& registered_commands() {
  const Registry& r = registry();
  if (!r.duplicate.empty()) {
    throw std::logic_error("two fp8wb commands are registered as '" + r.duplicate +
                           "': give each NAME_command.cpp's CommandRegistrar a name of its own");
  }
  return r.commands;
}

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
  // Every registered command, each with its subcommand and what runs it.
  std::vector<std::pair<CLI::App*, CommandRunner>> commands;
  try {
    for (const RegisteredCommand& c : registered_commands()) {
      CommandRunner runner = c.add(app);
      CLI::App* sub = nullptr;
      try {
        sub = app.get_subcommand(c.name);
      } catch (const CLI::OptionNotFound&) {
        throw std::logic_error("the fp8wb command registered as '" + c.name +
                               "' added no subcommand of that name");
      }
      commands.emplace_back(sub, std::move(runner));
    }
  } catch (const std::exception& e) {
    err << "fp8wb: " << e.what() << "\n";
    return 1;
  }
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
    const CliContext context{color, err_terminal};
    for (const auto& [sub, runner] : commands) {
      if (sub->parsed()) return runner(context, out, err);
    }
    out << app.help();
    return 0;
  } catch (const std::exception& e) {
    err << "fp8wb: " << without_backtrace(e.what()) << "\n";
    return 1;
  }
}

}  // namespace fp8wb::cli
