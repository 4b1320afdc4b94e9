// The HIP build's host code, run here without an AMD GPU: the library compiled by hipcc
// and linked with libamdhip64 counts no device, refuses bad arguments before it touches
// the GPU, and reports the missing GPU as a GpuError that says so. On a machine with an
// AMD GPU the no-GPU tests skip (tests/gpu runs the kernels there).
#include <gtest/gtest.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "fp8wb/kernels/codec_cuda.h"
#include "fp8wb/kernels/quantize_cuda.h"

namespace fp8wb {
namespace {

// ROCm's kernel driver: without it the HIP runtime can see no GPU.
bool rocm_driver_present() {
  return access("/dev/kfd", F_OK) == 0;
}

std::string message_of(const std::exception& e) {
  return e.what();
}

TEST(HipHost, CountsNoDeviceWithoutTheRocmDriver) {
  if (rocm_driver_present()) GTEST_SKIP() << "/dev/kfd is here: an AMD GPU may be present";
  EXPECT_EQ(gpu_device_count(), 0);
  EXPECT_EQ(gpu_device_count(), 0);  // asked again: no error left behind by the first call
}

class HipNoGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_device_count() > 0) GTEST_SKIP() << "an AMD GPU is present";
  }
  std::vector<float> x_ = std::vector<float>(128 * 256, 0.5f);
  TensorRef t_ = TensorRef::of(x_.data(), 128, 256);
};

TEST_F(HipNoGpu, QuantizeSaysThereIsNoGpu) {
  try {
    quantize_current_cuda(t_, QuantRecipe{ScalingKind::Tensorwise, Format::E4M3FNUZ}, false);
    FAIL() << "no GpuError";
  } catch (const GpuError& e) {
    const std::string m = message_of(e);
    EXPECT_NE(m.find("no GPU"), std::string::npos) << m;
    EXPECT_NE(m.find("HIP"), std::string::npos) << m;
  }
}

TEST_F(HipNoGpu, RecipeStatisticsSayThereIsNoGpu) {
  const std::vector<QuantRecipe> recipes = {{ScalingKind::Tensorwise, Format::E4M3FNUZ},
                                            {ScalingKind::Block128x128, Format::E5M2FNUZ}};
  try {
    quantization_stats_cuda(t_, recipes);
    FAIL() << "no GpuError";
  } catch (const GpuError& e) {
    EXPECT_NE(message_of(e).find("no GPU"), std::string::npos) << e.what();
  }
}

TEST_F(HipNoGpu, CodecLaunchFailureIsAGpuError) {
  // Device pointers cannot exist without a device: the launch itself must fail, as a
  // GpuError rather than a crash or a silent return.
  EXPECT_THROW(encode_f32_cuda(nullptr, nullptr, 1024, EncodeOptions{}), GpuError);
  EXPECT_THROW(decode_f32_cuda(nullptr, nullptr, 1024, Format::E4M3FNUZ), GpuError);
}

// Argument errors are found before any GPU call, so they read the same with or without a
// GPU: an invalid_argument naming the problem, never a GpuError.
TEST(HipHost, BadRecipeIsRefusedBeforeTheGpu) {
  std::vector<float> x(16, 1.0f);
  const TensorRef t = TensorRef::of(x.data(), 4, 4);
  try {
    quantize_current_cuda(t, QuantRecipe{ScalingKind::MX, Format::E4M3FNUZ}, false);
    FAIL() << "accepted MX with an fnuz format";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(message_of(e).find("MX scaling"), std::string::npos) << e.what();
  }
  EXPECT_THROW(quantization_stats_cuda(t, {{ScalingKind::Tensorwise, Format::E8M0FNU}}),
               std::invalid_argument);
}

TEST(HipHost, TensorWithoutDataIsRefusedBeforeTheGpu) {
  const TensorRef no_data{nullptr, nullptr, 8, 8};
  try {
    quantize_current_cuda(no_data, QuantRecipe{ScalingKind::Tensorwise, Format::E4M3FNUZ}, false);
    FAIL() << "accepted a tensor without data";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(message_of(e).find("8x8 tensor has no data"), std::string::npos) << e.what();
  }
  std::vector<float> f(4);
  std::vector<uint16_t> b(4);
  const TensorRef both{f.data(), b.data(), 2, 2};
  EXPECT_THROW(quantization_stats_cuda(both, {{ScalingKind::Tensorwise, Format::E4M3FN}}),
               std::invalid_argument);
  const TensorRef huge{f.data(), nullptr, int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_THROW(quantize_current_cuda(huge, QuantRecipe{}, false), std::invalid_argument);
}

}  // namespace
}  // namespace fp8wb
