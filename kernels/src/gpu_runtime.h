// defines: the CUDA runtime names used by the kernels, mapped to HIP when compiled as HIP,
// and FP8WB_GPU_CHECK, which turns a failed call into fp8wb::GpuError.
#pragma once

#if defined(FP8WB_HIP)
#include <hip/hip_runtime.h>
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaStream_t hipStream_t
#else
#include <cuda_runtime.h>
#endif

#include <string>

#include "fp8wb/kernels/codec_cuda.h"

#define FP8WB_GPU_CHECK(call)                                                                     \
  do {                                                                                            \
    const cudaError_t fp8wb_err_ = (call);                                                        \
    if (fp8wb_err_ != cudaSuccess) {                                                              \
      throw ::fp8wb::GpuError(std::string(#call) + " failed: " + cudaGetErrorString(fp8wb_err_)); \
    }                                                                                             \
  } while (0)
