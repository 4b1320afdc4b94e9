// defines: the CUDA runtime names used by the kernels, mapped to HIP when compiled as HIP,
// FP8WB_GPU_CHECK, which turns a failed call into fp8wb::GpuError, and DeviceArray, a
// device allocation freed with its scope.
#pragma once

#if defined(FP8WB_HIP)
#include <hip/hip_runtime.h>
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaStream_t hipStream_t
#define cudaMalloc hipMalloc
#define cudaFree hipFree
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

namespace fp8wb {

// n elements of device memory (none for n == 0), freed at the end of the scope.
template <class T>
struct DeviceArray {
  T* p = nullptr;
  explicit DeviceArray(size_t n) {
    if (n) FP8WB_GPU_CHECK(cudaMalloc(&p, n * sizeof(T)));
  }
  ~DeviceArray() {
    if (p) cudaFree(p);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

}  // namespace fp8wb
