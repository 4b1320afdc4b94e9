// Torch translation unit: backend discovery.
#include "fp8wb/core/backend/backend_info.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "fp8wb/core/version.h"

#if defined(FP8WB_WITH_CUDA_KERNELS)
#include "fp8wb/kernels/codec_cuda.h"
#endif
#if defined(FP8WB_TORCH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#endif

namespace fp8wb {

std::string workbench_version() {
  return FP8WB_VERSION;
}

int init_compute_threads(int threads) {
  // OMP_NUM_THREADS, where set to a positive count, chooses as it does for OpenMP programs.
  if (threads <= 0) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    char* end = nullptr;
    const long n = env ? std::strtol(env, &end, 10) : 0;
    if (env && end != env && *end == '\0' && n > 0 && n <= 4096) threads = static_cast<int>(n);
  }
  if (threads <= 0) {
    const unsigned h = std::thread::hardware_concurrency();
    threads = h == 0 ? 1 : static_cast<int>(h);
  }
  at::set_num_threads(threads);
  return at::get_num_threads();
}

int blas_thread_limit() {
  // Looked up at run time: a LibTorch on another BLAS (MKL) has no such function.
  using Config = const char* (*)();
  const auto config = reinterpret_cast<Config>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  const char* text = config ? config() : nullptr;
  if (!text) return 0;
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"
  const char* at = std::strstr(text, "MAX_THREADS=");
  if (!at) return 0;
  const long n = std::strtol(at + std::strlen("MAX_THREADS="), nullptr, 10);
  return n > 0 && n <= 1 << 20 ? static_cast<int>(n) : 0;
}

BackendInfo probe_backend() {
  BackendInfo b;
  b.workbench_version = FP8WB_VERSION;
  b.torch_version = TORCH_VERSION;
  b.torch_float8 =
      TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1);
  b.cpu_threads = at::get_num_threads();
#if defined(FP8WB_TORCH_CUDA)
  b.torch_cuda_build = true;
  // A ROCm LibTorch serves AMD GPUs under torch::cuda's names; its hooks say which it is.
  b.rocm = at::detail::getCUDAHooks().hasROCM();
  b.cuda_devices = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
#endif
#if defined(FP8WB_WITH_CUDA_KERNELS)
  b.cuda_kernels_built = true;
#endif
  if (b.cuda_devices > 0) {
#if defined(FP8WB_TORCH_CUDA)
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(0);
    b.device_name = p->name;
    b.sm = p->major * 10 + p->minor;
    if (!b.rocm) b.gpu_arch = "sm_" + std::to_string(b.sm);
#if defined(USE_ROCM)  // where the ROCm LibTorch's headers say so (its device properties)
    b.gpu_arch = p->gcnArchName;  // "gfx942:sramecc+:xnack-": the name before the features
    b.gpu_arch = b.gpu_arch.substr(0, b.gpu_arch.find(':'));
#endif
    for (int i = 0; i < b.cuda_devices; ++i)
      b.cuda_device_names.emplace_back(at::cuda::getDeviceProperties(i)->name);
#endif
  } else {
    b.device_name = "CPU (" + std::to_string(b.cpu_threads) + " threads)";
  }
  // FP8 tensor cores start with Ada (sm_89) and Hopper (sm_90); AMD GPUs report their own
  // numbering here, and their FP8 GEMMs are not taken as real.
  b.fp8_gemm_real = b.cuda_devices > 0 && !b.rocm && b.torch_float8 && b.sm >= 89;
  if (b.fp8_gemm_real) {
    b.fp8_gemm = "real (FP8 tensor cores through cuBLAS, sm_" + std::to_string(b.sm) + ")";
  } else if (b.cuda_devices > 0) {
    b.fp8_gemm = "emulated (this GPU or LibTorch has no FP8 GEMM)";
  } else {
    b.fp8_gemm = "emulated on the CPU (bit-exact: FP8 codes -> fp32, fp32 GEMM)";
  }
  return b;
}

}  // namespace fp8wb
