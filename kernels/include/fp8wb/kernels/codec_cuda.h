// defines: encode_f32_cuda(), encode_bf16_cuda(), decode_f32_cuda(), gpu_device_count():
// the GPU codecs over device pointers, on a stream. Errors throw fp8wb::GpuError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fp8wb/kernels/codec_cpu.h"

// The runtime's own spelling of a stream, so that callers need no CUDA/HIP headers.
#if defined(FP8WB_HIP)
typedef struct ihipStream_t* fp8wb_stream_t;
#else
typedef struct CUstream_st* fp8wb_stream_t;
#endif

namespace fp8wb {

class GpuError : public std::runtime_error {
 public:
  explicit GpuError(const std::string& what) : std::runtime_error(what) {}
};

// Number of usable GPUs; 0 (never an exception) when there is no driver or device.
int gpu_device_count();

// Same codes as encode_f32()/encode_bf16() on the CPU, bit for bit, including
// stochastic rounding for the same seed.
void encode_f32_cuda(const float* in, uint8_t* out, size_t n, const EncodeOptions& opt,
                     fp8wb_stream_t stream = nullptr);
void encode_bf16_cuda(const uint16_t* in, uint8_t* out, size_t n, const EncodeOptions& opt,
                      fp8wb_stream_t stream = nullptr);
void decode_f32_cuda(const uint8_t* in, float* out, size_t n, Format format,
                     fp8wb_stream_t stream = nullptr);

}  // namespace fp8wb
