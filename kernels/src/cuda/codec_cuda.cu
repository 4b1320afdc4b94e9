// The GPU codecs, with the same inline encode_bits()/decode() as the CPU.
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

// Each thread turns 16 inputs into one 16-byte store of codes: fp32 comes in as four
// 16-byte loads, bf16 as two, all issued before the first use.
constexpr size_t kVec = 16;

template <Format F, Overflow O, Rounding R>
__global__ void encode_f32_vec_kernel(const float4* __restrict__ in, uint4* __restrict__ out,
                                      size_t nvec, uint64_t seed) {
  for (size_t v = blockIdx.x * size_t{blockDim.x} + threadIdx.x; v < nvec;
       v += size_t{gridDim.x} * blockDim.x) {
    float4 x[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) x[k] = in[v * 4 + k];
    uint32_t words[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const size_t i = v * kVec + k * 4;
      words[k] = uint32_t{encode_one<F, O, R>(float_bits(x[k].x), seed, i)} |
                 uint32_t{encode_one<F, O, R>(float_bits(x[k].y), seed, i + 1)} << 8 |
                 uint32_t{encode_one<F, O, R>(float_bits(x[k].z), seed, i + 2)} << 16 |
                 uint32_t{encode_one<F, O, R>(float_bits(x[k].w), seed, i + 3)} << 24;
    }
    out[v] = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

template <Format F, Overflow O, Rounding R>
__global__ void encode_bf16_vec_kernel(const uint4* __restrict__ in, uint4* __restrict__ out,
                                       size_t nvec, uint64_t seed) {
  for (size_t v = blockIdx.x * size_t{blockDim.x} + threadIdx.x; v < nvec;
       v += size_t{gridDim.x} * blockDim.x) {
    const uint4 a = in[v * 2], b = in[v * 2 + 1];
    const uint32_t pairs[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    uint32_t words[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const size_t i = v * kVec + k * 4;
      const uint32_t lo = pairs[2 * k], hi = pairs[2 * k + 1];
      words[k] = uint32_t{encode_one<F, O, R>(lo << 16, seed, i)} |
                 uint32_t{encode_one<F, O, R>(lo & 0xFFFF0000u, seed, i + 1)} << 8 |
                 uint32_t{encode_one<F, O, R>(hi << 16, seed, i + 2)} << 16 |
                 uint32_t{encode_one<F, O, R>(hi & 0xFFFF0000u, seed, i + 3)} << 24;
    }
    out[v] = make_uint4(words[0], words[1], words[2], words[3]);
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

// Four codes in one 4-byte load, one 16-byte store of fp32 (coalesced both ways); the
// values come from a 256-entry table each block builds in shared memory.
__global__ void decode_vec_kernel(const uchar4* __restrict__ in, float4* __restrict__ out,
                                  size_t nvec, CodecSpec s) {
  __shared__ float table[256];
  for (int c = threadIdx.x; c < 256; c += blockDim.x) table[c] = decode(static_cast<uint8_t>(c), s);
  __syncthreads();
  for (size_t v = blockIdx.x * size_t{blockDim.x} + threadIdx.x; v < nvec;
       v += size_t{gridDim.x} * blockDim.x) {
    const uchar4 c = in[v];
    out[v] = make_float4(table[c.x], table[c.y], table[c.z], table[c.w]);
  }
}

__global__ void decode_kernel(const uint8_t* __restrict__ in, float* __restrict__ out, size_t begin,
                              size_t n, CodecSpec s) {
  for (size_t i = begin + blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = decode(in[i], s);
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

unsigned grid_for(size_t work) {
  const size_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<size_t>(blocks, 1, 65535u * 8));
}

void check_launch() {
  FP8WB_GPU_CHECK(cudaGetLastError());
}

template <class In, Format F, Overflow O, Rounding R>
void launch_encode(const In* in, uint8_t* out, size_t n, uint64_t seed, cudaStream_t st) {
  size_t done = 0;
  if (aligned16(in) && aligned16(out)) {
    const size_t nvec = n / kVec;
    if (nvec > 0) {
      if constexpr (std::is_same_v<In, float>) {
        encode_f32_vec_kernel<F, O, R><<<grid_for(nvec), kThreads, 0, st>>>(
            reinterpret_cast<const float4*>(in), reinterpret_cast<uint4*>(out), nvec, seed);
      } else {
        encode_bf16_vec_kernel<F, O, R><<<grid_for(nvec), kThreads, 0, st>>>(
            reinterpret_cast<const uint4*>(in), reinterpret_cast<uint4*>(out), nvec, seed);
      }
      check_launch();
    }
    done = nvec * kVec;
  }
  if (done < n) {
    encode_scalar_kernel<In, F, O, R>
        <<<grid_for(n - done), kThreads, 0, st>>>(in, out, done, n, seed);
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
  dispatch_format(
      o.format, [&](auto tag) { dispatch_overflow<In, decltype(tag)::value>(in, out, n, o, st); });
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
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  size_t done = 0;
  if (reinterpret_cast<uintptr_t>(in) % 4 == 0 && aligned16(out)) {
    const size_t nvec = n / 4;
    if (nvec > 0) {
      decode_vec_kernel<<<grid_for(nvec), kThreads, 0, st>>>(reinterpret_cast<const uchar4*>(in),
                                                             reinterpret_cast<float4*>(out), nvec,
                                                             codec_spec(format));
      check_launch();
    }
    done = nvec * 4;
  }
  if (done < n) {
    decode_kernel<<<grid_for(n - done), kThreads, 0, st>>>(in, out, done, n, codec_spec(format));
    check_launch();
  }
}

}  // namespace fp8wb
