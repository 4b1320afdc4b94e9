// defines: run_cli(): the whole fp8wb command line, writing to the given streams so that
// tests can run it in-process. main() is a thin wrapper around it.
#pragma once

#include <ostream>

namespace fp8wb::cli {

// color: bit fields in ANSI colours (main() passes true on a terminal without NO_COLOR).
// err_terminal: `err` is a terminal (main() passes isatty(stderr)): progress is then
// redrawn in place; elsewhere it is plain lines.
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
            bool color = false, bool err_terminal = false);

}  // namespace fp8wb::cli
