#include "fp8wb/core/backend/default_formats.h"

#include <string_view>

namespace fp8wb {
namespace {

// AMD architectures whose FP8 is OCP's E4M3FN/E5M2 rather than fnuz.
bool amd_arch_has_ocp_fp8(std::string_view arch) {
  return arch.rfind("gfx950", 0) == 0 || arch.rfind("gfx12", 0) == 0;
}

}  // namespace

FormatPairing default_format_pairing(const BackendInfo& backend) {
  const bool amd_gpu = backend.rocm && backend.cuda_devices > 0;
  return amd_gpu && !amd_arch_has_ocp_fp8(backend.gpu_arch) ? FormatPairing::HybridFnuz
                                                            : FormatPairing::Hybrid;
}

Format default_element_format(const BackendInfo& backend) {
  return table_entry(kFormatPairings, default_format_pairing(backend)).input;
}

FormatPairing default_run_formats(const BackendInfo& backend, const RunConfig& config) {
  if (config.device == "cpu" || config.recipe == Float8Recipe::MX) return config.formats;
  return default_format_pairing(backend);
}

}  // namespace fp8wb
