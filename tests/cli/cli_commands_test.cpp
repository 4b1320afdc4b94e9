// The subcommands register themselves (app/cli/command_registry.h): every one is in the
// registry, in `fp8wb --help` in today's order, and runs through it. A registrar dropped at
// link (fp8wb_cli built as a static library, whose unused object files the linker leaves
// out) empties the registry and fails these tests.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_run.h"
#include "command_registry.h"

namespace {

using fp8wb::test::Result;
using fp8wb::test::run;

const std::vector<std::string> kCommands = {"formats", "demo",    "info",  "train",  "runs",
                                            "bench",   "inspect", "sweep", "replay", "eval"};

TEST(CliCommands, RegistryHoldsEveryCommandInHelpOrder) {
  std::vector<std::string> names;
  int order = -1;
  for (const fp8wb::cli::RegisteredCommand& c : fp8wb::cli::registered_commands()) {
    names.push_back(c.name);
    EXPECT_GE(c.help_order, order) << c.name;
    order = c.help_order;
  }
  EXPECT_EQ(names, kCommands);
}

// `fp8wb --help` lists every registered command, each on a line of its own, in the
// registry's order.
TEST(CliCommands, HelpListsEveryRegisteredCommand) {
  const Result r = run({"--help"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t list = r.out.find("Subcommands:");
  ASSERT_NE(list, std::string::npos) << r.out;
  size_t at = list;
  ASSERT_FALSE(fp8wb::cli::registered_commands().empty());
  for (const fp8wb::cli::RegisteredCommand& c : fp8wb::cli::registered_commands()) {
    const size_t found = r.out.find("\n  " + c.name + " ", at);
    ASSERT_NE(found, std::string::npos) << c.name << " not listed after the one before in\n"
                                        << r.out;
    at = found + 1;
  }
}

// Each command runs through the registry: its own --help, and `info` itself.
TEST(CliCommands, EachCommandRuns) {
  for (const std::string& name : kCommands) {
    const Result r = run({name, "--help"});
    EXPECT_EQ(r.rc, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find(name), std::string::npos) << r.out;
  }
  const Result info = run({"info"});
  EXPECT_EQ(info.rc, 0) << info.err;
  EXPECT_NE(info.out.find("FP8 GEMM"), std::string::npos) << info.out;
}

}  // namespace
