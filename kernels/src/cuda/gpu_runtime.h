// defines: the CUDA runtime names used by the kernels, mapped to HIP when compiled as HIP,
// kGpuRuntime ("CUDA" or "HIP"), FP8WB_GPU_CHECK, which turns a failed call into
// fp8wb::GpuError, require_gpu(), and DeviceArray, a device allocation freed with its
// scope.
#pragma once

#if defined(FP8WB_HIP)
#include <hip/hip_runtime.h>
// Errors
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaGetLastError hipGetLastError
#define cudaPeekAtLastError hipPeekAtLastError
// Devices and their attributes
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDevice hipGetDevice
#define cudaSetDevice hipSetDevice
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaDevAttrMaxSharedMemoryPerBlock hipDeviceAttributeMaxSharedMemoryPerBlock
#define cudaDevAttrWarpSize hipDeviceAttributeWarpSize
#define cudaDevAttrComputeCapabilityMajor hipDeviceAttributeComputeCapabilityMajor
#define cudaDevAttrComputeCapabilityMinor hipDeviceAttributeComputeCapabilityMinor
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDeviceProperties hipGetDeviceProperties
// Kernels
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
// Streams and events
#define cudaStream_t hipStream_t
#define cudaStreamCreate hipStreamCreate
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventQuery hipEventQuery
#define cudaErrorNotReady hipErrorNotReady
#define cudaEventElapsedTime hipEventElapsedTime
// Memory
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocHost hipHostMalloc
#define cudaFreeHost hipHostFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemset hipMemset
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyDefault hipMemcpyDefault
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

#if defined(FP8WB_HIP)
inline constexpr const char* kGpuRuntime = "HIP";
#else
inline constexpr const char* kGpuRuntime = "CUDA";
#endif

// Throws GpuError saying there is no GPU where the runtime finds none (no driver, no
// device), before any allocation or launch would fail with a less telling error.
inline void require_gpu() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err == cudaSuccess && n > 0) return;
  (void)cudaGetLastError();  // clear the sticky error
  std::string why = std::string("no GPU: the ") + kGpuRuntime + " runtime finds no device";
  if (err != cudaSuccess) why += std::string(" (") + cudaGetErrorString(err) + ")";
  throw GpuError(why);
}

// n elements of device memory (none for n == 0), freed at the end of the scope.
template <class T>
struct DeviceArray {
  T* p = nullptr;
  explicit DeviceArray(size_t n) {
    if (n) FP8WB_GPU_CHECK(cudaMalloc(&p, n * sizeof(T)));
  }
  ~DeviceArray() {
    if (p) (void)cudaFree(p);  // a destructor cannot report it; a later call will
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

}  // namespace fp8wb
