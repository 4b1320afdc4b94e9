// The hardware conversion checked against the software codec on the GPU, over every fp32
// bit pattern (check_conversion_cuda()).
#include "quantize_cuda_stats.cuh"

namespace fp8wb {
namespace {

using namespace qgpu;

// Every fp32 bit pattern (as y, scale 1) through quantize4's hardware step and through
// the software codec's element step; counts where the code, the saturation flag, the
// flags read off the code, the dequantized value (times scale_inv), or the histogram bin
// of a finite value (hist_row() against hist_bin()) differ.
template <Format F>
__global__ void conversion_check_kernel(float scale_inv, unsigned long long* mismatches,
                                        uint32_t* first) {
  constexpr CodecSpec s = codec_spec(F);
  const auto decoded = [](uint8_t c) { return decode(c, codec_spec(F)); };
  for (uint64_t base = (uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) * 4; base < (1ull << 32);
       base += uint64_t{gridDim.x} * blockDim.x * 4) {
    float v[4], y[4], dq[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = __uint_as_float(static_cast<uint32_t>(base + k));
    const uint32_t word =
        quantize4<F, true, true>(v, 1.0f, scale_inv, Overflow::Saturate, nullptr, y, dq);
    unsigned bad = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const QuantizedElement q =
          quantize_element(v[k], 1.0f, scale_inv, s, Overflow::Saturate, decoded);
      const uint8_t c = static_cast<uint8_t>(word >> (8 * k));
      const uint32_t a = float_bits(v[k]) & 0x7FFFFFFFu;
      const bool fin = a < 0x7F800000u;
      const uint32_t m = c & 0x7Fu;
      const bool sat = fin && (float_bits(y[k]) & 0x7FFFFFFFu) >= saturating_bits<F>();
      const bool same_dq =
          float_bits(dq[k]) == float_bits(q.dequant) || (isnan(dq[k]) && isnan(q.dequant));
      const bool ok = c == q.code && sat == q.saturated && same_dq &&
                      (fin && a != 0 && m == 0) == (q.finite && a != 0 && q.dequant == 0.0f) &&
                      (m - 1u < (1u << s.mbits) - 1u) == is_subnormal_code(q.code, s) &&
                      (!fin || hist_row(y[k]) == hist_bin(y[k]));
      if (!ok) {
        ++bad;
        atomicMin(first, static_cast<uint32_t>(base + k));
      }
    }
    if (bad) atomicAdd(mismatches, static_cast<unsigned long long>(bad));
  }
}

}  // namespace

ConversionCheck check_conversion_cuda(Format format, float scale_inv) {
  ConversionCheck r;
  int dev = 0, major = 0, minor = 0;
  FP8WB_GPU_CHECK(cudaGetDevice(&dev));
  FP8WB_GPU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  FP8WB_GPU_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
#if defined(FP8WB_HIP)
  r.hardware = false;
#else
  r.hardware = major * 10 + minor >= 89;
#endif
  DeviceArray<unsigned long long> count(1);
  DeviceArray<uint32_t> first(1);
  FP8WB_GPU_CHECK(cudaMemset(count.p, 0, sizeof(unsigned long long)));
  FP8WB_GPU_CHECK(cudaMemset(first.p, 0xFF, sizeof(uint32_t)));
  const unsigned grid = static_cast<unsigned>(sm_count()) * 16;
  if (format == Format::E4M3FN) {
    conversion_check_kernel<Format::E4M3FN><<<grid, kThreads>>>(scale_inv, count.p, first.p);
  } else if (format == Format::E5M2) {
    conversion_check_kernel<Format::E5M2><<<grid, kThreads>>>(scale_inv, count.p, first.p);
  } else {
    throw std::invalid_argument("check_conversion_cuda: E4M3FN or E5M2 only");
  }
  FP8WB_GPU_CHECK(cudaGetLastError());
  unsigned long long n = 0;
  FP8WB_GPU_CHECK(cudaMemcpy(&n, count.p, sizeof n, cudaMemcpyDeviceToHost));
  FP8WB_GPU_CHECK(cudaMemcpy(&r.first_bits, first.p, sizeof r.first_bits, cudaMemcpyDeviceToHost));
  r.mismatches = n;
  return r;
}

}  // namespace fp8wb
