// The CUDA codecs against the CPU codecs (and the ml_dtypes golden tables), bit for bit.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/codec_cpu.h"
#include "fp8wb/kernels/codec_cuda.h"
#include "golden.h"

namespace fp8wb {
namespace {

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  explicit DeviceBuffer(size_t n) {
    if (cudaMalloc(&ptr, n * sizeof(T) + 64) != cudaSuccess) throw GpuError("cudaMalloc failed");
  }
  ~DeviceBuffer() { cudaFree(ptr); }
};

template <class In>
std::vector<uint8_t> gpu_encode(const std::vector<In>& in, const EncodeOptions& opt,
                                size_t offset = 0) {
  DeviceBuffer<In> d_in(in.size() + offset);
  DeviceBuffer<uint8_t> d_out(in.size() + offset);
  EXPECT_EQ(
      cudaMemcpy(d_in.ptr + offset, in.data(), in.size() * sizeof(In), cudaMemcpyHostToDevice),
      cudaSuccess);
  // Poison the output so that an unwritten element shows.
  EXPECT_EQ(cudaMemset(d_out.ptr, 0xA5, in.size() + offset), cudaSuccess);
  if constexpr (std::is_same_v<In, float>) {
    encode_f32_cuda(d_in.ptr + offset, d_out.ptr + offset, in.size(), opt);
  } else {
    encode_bf16_cuda(d_in.ptr + offset, d_out.ptr + offset, in.size(), opt);
  }
  std::vector<uint8_t> out(in.size());
  EXPECT_EQ(cudaMemcpy(out.data(), d_out.ptr + offset, out.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return out;
}

class CudaCodec : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU codec tests skipped";
  }
  std::string name() const { return std::string(format_info(GetParam()).name); }
};

TEST_P(CudaCodec, GoldenAndRandomInputsMatchCpu) {
  std::vector<float> in;
  for (const auto& r : test::load_golden_encode(name())) in.push_back(bits_float(r.input_bits));
  std::mt19937 rng(11);
  for (int i = 0; i < (1 << 22); ++i) in.push_back(bits_float(static_cast<uint32_t>(rng())));
  for (Overflow ov : {Overflow::Saturate, Overflow::Ieee}) {
    const EncodeOptions opt{GetParam(), ov};
    std::vector<uint8_t> cpu(in.size());
    encode_f32(in.data(), cpu.data(), in.size(), opt);
    EXPECT_EQ(gpu_encode(in, opt), cpu) << name();
    EXPECT_EQ(gpu_encode(in, opt, 1), cpu) << name() << " (unaligned: scalar path)";
  }
}

TEST_P(CudaCodec, GoldenTableDirectly) {
  std::vector<float> in;
  std::vector<uint8_t> want;
  for (const auto& r : test::load_golden_encode(name())) {
    in.push_back(bits_float(r.input_bits));
    want.push_back(r.saturate);
  }
  EXPECT_EQ(gpu_encode(in, {GetParam(), Overflow::Saturate}), want);
}

TEST_P(CudaCodec, EveryBf16Pattern) {
  std::vector<uint16_t> in(65536);
  for (uint32_t i = 0; i < 65536; ++i) in[i] = static_cast<uint16_t>(i);
  for (Overflow ov : {Overflow::Saturate, Overflow::Ieee}) {
    std::vector<uint8_t> cpu(in.size());
    encode_bf16(in.data(), cpu.data(), in.size(), {GetParam(), ov});
    EXPECT_EQ(gpu_encode(in, {GetParam(), ov}), cpu);
  }
}

TEST_P(CudaCodec, StochasticRoundingMatchesCpuForTheSeed) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, static_cast<float>(format_info(GetParam()).max_finite / 8));
  std::vector<float> in(1 << 20);
  for (float& x : in) x = nd(rng);
  const EncodeOptions opt{GetParam(), Overflow::Saturate, Rounding::Stochastic, 1234};
  std::vector<uint8_t> cpu(in.size());
  encode_f32(in.data(), cpu.data(), in.size(), opt);
  EXPECT_EQ(gpu_encode(in, opt), cpu);
}

TEST_P(CudaCodec, DecodeEveryCode) {
  std::vector<uint8_t> codes(256 * 1024);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i);
  DeviceBuffer<uint8_t> d_in(codes.size());
  DeviceBuffer<float> d_out(codes.size());
  ASSERT_EQ(cudaMemcpy(d_in.ptr, codes.data(), codes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  decode_f32_cuda(d_in.ptr, d_out.ptr, codes.size(), GetParam());
  std::vector<float> out(codes.size());
  ASSERT_EQ(cudaMemcpy(out.data(), d_out.ptr, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  const auto& table = decode_table(GetParam());
  for (size_t i = 0; i < codes.size(); ++i) {
    ASSERT_EQ(float_bits(out[i]), float_bits(table[codes[i]]))
        << name() << " code " << int(codes[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, CudaCodec, ::testing::ValuesIn(kAllFormats),
                         [](const auto& p) { return std::string(format_info(p.param).name); });

TEST(CudaCodecEdge, EmptyInputLaunchesNothing) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  encode_f32_cuda(nullptr, nullptr, 0, {});
  decode_f32_cuda(nullptr, nullptr, 0, Format::E5M2);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace fp8wb
