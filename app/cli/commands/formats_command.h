// defines: FormatsOptions, add_formats_command(): `fp8wb formats VALUE | --table F`.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace fp8wb::cli {

struct FormatsOptions {
  std::vector<std::string> values;
  std::vector<std::string> formats;  // empty: all
  std::string table;                 // a format name: print its code table
  std::string overflow = "saturate";
  bool json = false;
  bool csv = false;
  bool color = false;
};

// Registers the subcommand and its options; run_formats() runs it.
void add_formats_command(CLI::App& app, FormatsOptions& opt);
int run_formats(const FormatsOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
