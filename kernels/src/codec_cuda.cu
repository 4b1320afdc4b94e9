// The GPU codecs: one thread encodes four values (16-byte loads of fp32, 4-byte stores
// of codes), with the same inline encode_bits() as the CPU.
#include <algorithm>

#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/codec_cuda.h"
#include "gpu_runtime.h"

namespace fp8wb {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t load_bits(const float* in, size_t i) {
  return float_bits(in[i]);
}
__device__ __forceinline__ uint32_t load_bits(const uint16_t* in, size_t i) {
  return static_cast<uint32_t>(in[i]) << 16;
}

template <Format F, Overflow O, Rounding R>
__device__ __forceinline__ uint8_t encode_one(uint32_t u, uint64_t seed, size_t i) {
  constexpr CodecSpec s = codec_spec(F);
  return encode_bits(u, s, O, R, R == Rounding::Stochastic ? sr_bits(seed, i) : 0u);
}

template <Format F, Overflow O, Rounding R>
__global__ void encode_f32_vec4_kernel(const float4* __restrict__ in, uchar4* __restrict__ out,
                                       size_t n4, uint64_t seed) {
  for (size_t v = blockIdx.x * size_t{blockDim.x} + threadIdx.x; v < n4;
       v += size_t{gridDim.x} * blockDim.x) {
    const float4 x = in[v];
    const size_t i = v * 4;
    uchar4 c;
    c.x = encode_one<F, O, R>(float_bits(x.x), seed, i);
    c.y = encode_one<F, O, R>(float_bits(x.y), seed, i + 1);
    c.z = encode_one<F, O, R>(float_bits(x.z), seed, i + 2);
    c.w = encode_one<F, O, R>(float_bits(x.w), seed, i + 3);
    out[v] = c;
  }
}

template <class In, Format F, Overflow O, Rounding R>
__global__ void encode_scalar_kernel(const In* __restrict__ in, uint8_t* __restrict__ out,
                                     size_t begin, size_t n, uint64_t seed) {
  for (size_t i = begin + blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = encode_one<F, O, R>(load_bits(in, i), seed, i);
  }
}

__global__ void decode_kernel(const uint8_t* __restrict__ in, float* __restrict__ out, size_t n,
                              CodecSpec s) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = decode(in[i], s);
  }
}

unsigned grid_for(size_t work) {
  const size_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<size_t>(blocks, 1, 65535u * 8));
}

void check_launch() { FP8WB_GPU_CHECK(cudaGetLastError()); }

template <class In, Format F, Overflow O, Rounding R>
void launch_encode(const In* in, uint8_t* out, size_t n, uint64_t seed, cudaStream_t st) {
  size_t done = 0;
  if constexpr (std::is_same_v<In, float>) {
    // The vector path needs 16-byte aligned input and 4-byte aligned output.
    if (reinterpret_cast<uintptr_t>(in) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 4 == 0) {
      const size_t n4 = n / 4;
      if (n4 > 0) {
        encode_f32_vec4_kernel<F, O, R><<<grid_for(n4), kThreads, 0, st>>>(
            reinterpret_cast<const float4*>(in), reinterpret_cast<uchar4*>(out), n4, seed);
        check_launch();
      }
      done = n4 * 4;
    }
  }
  if (done < n) {
    encode_scalar_kernel<In, F, O, R><<<grid_for(n - done), kThreads, 0, st>>>(in, out, done, n,
                                                                               seed);
    check_launch();
  }
}

template <class In, Format F, Overflow O>
void dispatch_rounding(const In* in, uint8_t* out, size_t n, const EncodeOptions& o,
                       cudaStream_t st) {
  if (o.rounding == Rounding::Stochastic) {
    launch_encode<In, F, O, Rounding::Stochastic>(in, out, n, o.seed, st);
  } else {
    launch_encode<In, F, O, Rounding::NearestEven>(in, out, n, o.seed, st);
  }
}

template <class In, Format F>
void dispatch_overflow(const In* in, uint8_t* out, size_t n, const EncodeOptions& o,
                       cudaStream_t st) {
  if (o.overflow == Overflow::Saturate) {
    dispatch_rounding<In, F, Overflow::Saturate>(in, out, n, o, st);
  } else {
    dispatch_rounding<In, F, Overflow::Ieee>(in, out, n, o, st);
  }
}

template <class In>
void encode_any(const In* in, uint8_t* out, size_t n, const EncodeOptions& o, cudaStream_t st) {
  if (n == 0) return;
  switch (o.format) {
    case Format::E4M3FN: return dispatch_overflow<In, Format::E4M3FN>(in, out, n, o, st);
    case Format::E5M2: return dispatch_overflow<In, Format::E5M2>(in, out, n, o, st);
    case Format::E4M3FNUZ: return dispatch_overflow<In, Format::E4M3FNUZ>(in, out, n, o, st);
    case Format::E5M2FNUZ: return dispatch_overflow<In, Format::E5M2FNUZ>(in, out, n, o, st);
    case Format::E8M0FNU: return dispatch_overflow<In, Format::E8M0FNU>(in, out, n, o, st);
    case Format::E2M1FN: return dispatch_overflow<In, Format::E2M1FN>(in, out, n, o, st);
    case Format::E3M2FN: return dispatch_overflow<In, Format::E3M2FN>(in, out, n, o, st);
    case Format::E2M3FN: return dispatch_overflow<In, Format::E2M3FN>(in, out, n, o, st);
  }
}

}  // namespace

int gpu_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

void encode_f32_cuda(const float* in, uint8_t* out, size_t n, const EncodeOptions& opt,
                     fp8wb_stream_t stream) {
  encode_any(in, out, n, opt, reinterpret_cast<cudaStream_t>(stream));
}

void encode_bf16_cuda(const uint16_t* in, uint8_t* out, size_t n, const EncodeOptions& opt,
                      fp8wb_stream_t stream) {
  encode_any(in, out, n, opt, reinterpret_cast<cudaStream_t>(stream));
}

void decode_f32_cuda(const uint8_t* in, float* out, size_t n, Format format,
                     fp8wb_stream_t stream) {
  if (n == 0) return;
  decode_kernel<<<grid_for(n), kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
      in, out, n, codec_spec(format));
  check_launch();
}

}  // namespace fp8wb
