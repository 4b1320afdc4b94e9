// defines: `fp8wb info`: the compute backend (device, LibTorch, FP8 GEMMs, default formats).
// A command of one file: it registers itself (command_registry.h) and nothing else calls it.
#include <ostream>

#include "command_registry.h"
#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/backend/default_formats.h"
#include "fp8wb/core/config/run_config.h"

namespace fp8wb::cli {
namespace {

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

const CommandRegistrar kInfo{
    "info", 30, [](CLI::App& app) -> CommandRunner {
      app.add_subcommand("info", "Show the compute backend: device, LibTorch, FP8 GEMMs");
      return [](const CliContext&, std::ostream& out, std::ostream&) { return run_info(out); };
    }};

}  // namespace
}  // namespace fp8wb::cli
