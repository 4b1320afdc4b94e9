// defines: default_format_pairing(), default_element_format(): the FP8 formats a new run
// and a checkpoint's recommendation use unless told otherwise, from what computes here.
#pragma once

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/config/run_config.h"

namespace fp8wb {

// hybrid_fnuz (E4M3FNUZ forward, E5M2FNUZ gradients) on an AMD GPU through ROCm, as
// ROCm's PyTorch does: the fnuz formats are what AMD's FP8 hardware (MI300: gfx940 to
// gfx942) computes in. hybrid (E4M3FN, E5M2) on NVIDIA GPUs, on the CPU, and on the AMD
// architectures known to compute in the OCP formats instead (gfx950, gfx12xx).
FormatPairing default_format_pairing(const BackendInfo& backend);

// The element format of weights and activations in that pairing (E4M3FNUZ or E4M3FN).
Format default_element_format(const BackendInfo& backend);

// The formats of a run whose config names none: default_format_pairing() for a run on a
// GPU (device other than "cpu") whose recipe takes the fnuz formats (MX is defined for the
// OCP formats only), else the config's own.
FormatPairing default_run_formats(const BackendInfo& backend, const RunConfig& config);

}  // namespace fp8wb
