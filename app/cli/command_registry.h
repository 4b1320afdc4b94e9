// defines: CliContext, CommandRunner, RegisteredCommand, CommandRegistrar, command_with(),
// registered_commands(): fp8wb's subcommands. Each NAME_command.cpp registers its own with a
// static CommandRegistrar; run_cli() adds every registered one to its parser, in help order,
// and runs the one given. app/CMakeLists.txt finds the commands by a glob of
// cli/*_command.cpp and builds fp8wb_cli as an OBJECT library, so that no registrar is left
// out at link (from a static library the linker takes only object files something calls).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

namespace fp8wb::cli {

// What run_cli() knows of its streams, for the commands that ask.
struct CliContext {
  bool color = false;         // `out` is a terminal that takes ANSI colours
  bool err_terminal = false;  // `err` is a terminal: progress is redrawn in place
};

// Runs a parsed subcommand: its exit status.
using CommandRunner = std::function<int(const CliContext&, std::ostream& out, std::ostream& err)>;
// Adds a subcommand and its options to `app`; returns what runs it once parsed.
using CommandAdder = std::function<CommandRunner(CLI::App& app)>;

struct RegisteredCommand {
  std::string name;  // `fp8wb NAME`: the subcommand's name in CLI11
  int help_order;    // its place in `fp8wb --help`, lowest first (formats 10, ..., eval 100)
  CommandAdder add;
};

// Every registered command, in help order; throws std::logic_error where two commands
// registered one name.
const std::vector<RegisteredCommand>& registered_commands();

// At namespace scope in NAME_command.cpp: `const CommandRegistrar kCommand{"NAME", 110, ...};`
struct CommandRegistrar {
  CommandRegistrar(std::string name, int help_order, CommandAdder add);
};

// The adder of a command whose options are a struct: add(app, opt) declares the subcommand
// and its options, run(opt, out, err), or run(opt, context, out, err), runs it.
template <class Options, class Add, class Run>
CommandAdder command_with(Add add, Run run) {
  return [add, run](CLI::App& app) -> CommandRunner {
    auto opt = std::make_shared<Options>();
    add(app, *opt);
    return [opt, run](const CliContext& ctx, std::ostream& out, std::ostream& err) -> int {
      if constexpr (std::is_invocable_v<Run, Options&, const CliContext&, std::ostream&,
                                        std::ostream&>) {
        return run(*opt, ctx, out, err);
      } else {
        return run(*opt, out, err);
      }
    };
  };
}

}  // namespace fp8wb::cli
