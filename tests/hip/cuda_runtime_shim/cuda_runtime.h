// defines: the CUDA runtime names of tests/gpu, for their HIP build: tests/gpu's sources
// include <cuda_runtime.h>; under FP8WB_HIP this header maps those names to HIP's
// (kernels/src/cuda/gpu_runtime.h), so that the same tests run against fp8wb_kernels_hip.
#pragma once

#if !defined(FP8WB_HIP)
#error "this header stands in for CUDA's only in the HIP build of the GPU tests"
#endif

#include "gpu_runtime.h"
