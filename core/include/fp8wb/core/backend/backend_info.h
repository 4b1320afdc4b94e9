// defines: BackendInfo, probe_backend(), init_compute_threads(), version strings: what
// computes here (CPU emulation or a GPU with real FP8 GEMMs; NVIDIA or AMD), for status
// bars, logs and the default formats (default_formats.h).
#pragma once

#include <string>
#include <vector>

namespace fp8wb {

struct BackendInfo {
  std::string workbench_version;
  std::string torch_version;
  bool torch_cuda_build = false;    // this LibTorch was built with CUDA (or ROCm)
  bool rocm = false;                // its GPU backend is ROCm: AMD GPUs through HIP
  bool torch_float8 = false;        // this LibTorch has float8 dtypes (>= 2.1)
  int cuda_devices = 0;             // GPUs LibTorch can use
  std::string device_name;          // "NVIDIA H200" or "CPU (16 threads)"
  int sm = 0;                       // compute capability * 10 of device 0 (90 for Hopper)
  std::string gpu_arch;             // device 0's architecture: "sm_90", "gfx942" (ROCm)
  bool cuda_kernels_built = false;  // the project's CUDA kernels are linked in
  bool fp8_gemm_real = false;       // FP8 GEMMs run on FP8 tensor cores (cuBLAS)
  std::string fp8_gemm;             // one line for users: "real (cuBLAS FP8 on sm_90)" ...
  int cpu_threads = 0;              // threads LibTorch uses on the CPU
  std::vector<std::string> cuda_device_names;  // by index: "NVIDIA H200", ...
};

BackendInfo probe_backend();

// LibTorch's intra-op thread count (Debian's build defaults to 1). threads <= 0: the
// OMP_NUM_THREADS environment variable where it is a positive count, else one per
// hardware thread. Returns the count in force.
int init_compute_threads(int threads = 0);

// How many threads of this process may compute on the CPU at once: OpenBLAS (the BLAS of
// Debian's LibTorch) keeps its buffers in a table of 2 x the MAX_THREADS it was built with
// (openblas_get_config() says it: 64 on Debian), one a thread inside a BLAS call and one
// for each of its own threads, and crashes when more are wanted at once ("precompiled
// NUM_THREADS exceeded", then SIGSEGV). Its MAX_THREADS, which leaves half of the table
// to OpenBLAS's threads, where the BLAS linked in is OpenBLAS; 0 where no limit is known.
int blas_thread_limit();

std::string workbench_version();

}  // namespace fp8wb
