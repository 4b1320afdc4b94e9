// The default FP8 formats from a description of the backend: AMD's fnuz formats on an AMD
// GPU through ROCm (as ROCm's PyTorch does), the OCP formats on NVIDIA GPUs and the CPU;
// and a checkpoint's recommendation made in the format asked for.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/backend/default_formats.h"
#include "fp8wb/core/checkpoint/checkpoint_analysis.h"

namespace fp8wb {
namespace {

BackendInfo cpu_only() {
  BackendInfo b;
  b.device_name = "CPU (16 threads)";
  return b;
}

BackendInfo nvidia(int sm) {
  BackendInfo b;
  b.torch_cuda_build = true;
  b.cuda_devices = 1;
  b.sm = sm;
  b.gpu_arch = "sm_" + std::to_string(sm);
  return b;
}

BackendInfo amd(const std::string& arch, int devices = 8) {
  BackendInfo b;
  b.torch_cuda_build = true;
  b.rocm = true;
  b.cuda_devices = devices;
  b.gpu_arch = arch;
  return b;
}

TEST(DefaultFormats, OcpFormatsOnTheCpuAndOnNvidia) {
  for (const BackendInfo& b : {cpu_only(), nvidia(90), nvidia(89), nvidia(80)}) {
    EXPECT_EQ(default_format_pairing(b), FormatPairing::Hybrid) << b.gpu_arch;
    EXPECT_EQ(default_element_format(b), Format::E4M3FN) << b.gpu_arch;
  }
}

TEST(DefaultFormats, FnuzFormatsOnAmdGpus) {
  for (const char* arch : {"gfx942", "gfx940", "gfx941", "gfx90a", ""}) {
    const BackendInfo b = amd(arch);
    EXPECT_EQ(default_format_pairing(b), FormatPairing::HybridFnuz) << arch;
    EXPECT_EQ(default_element_format(b), Format::E4M3FNUZ) << arch;
    // The pairing's formats themselves: E4M3FNUZ forward, E5M2FNUZ for gradients.
    const auto& e = table_entry(kFormatPairings, default_format_pairing(b));
    EXPECT_EQ(e.input, Format::E4M3FNUZ);
    EXPECT_EQ(e.weight, Format::E4M3FNUZ);
    EXPECT_EQ(e.grad_output, Format::E5M2FNUZ);
  }
}

TEST(DefaultFormats, OcpFormatsOnAmdGpusThatComputeInThem) {
  for (const char* arch : {"gfx950", "gfx1200", "gfx1201"}) {
    EXPECT_EQ(default_format_pairing(amd(arch)), FormatPairing::Hybrid) << arch;
  }
}

TEST(DefaultFormats, RocmBuildWithoutAGpuComputesOnTheCpu) {
  EXPECT_EQ(default_format_pairing(amd("", 0)), FormatPairing::Hybrid);
}

TEST(DefaultFormats, RunsOnAnAmdGpuTakeFnuzUnlessTheRecipeIsMx) {
  RunConfig c;
  c.device = "cuda:0";
  EXPECT_EQ(default_run_formats(amd("gfx942"), c), FormatPairing::HybridFnuz);
  EXPECT_EQ(default_run_formats(nvidia(90), c), FormatPairing::Hybrid);
  c.device = "cuda";
  EXPECT_EQ(default_run_formats(amd("gfx90a"), c), FormatPairing::HybridFnuz);
  // MX is defined for the OCP formats: the config's own stays, and the result validates.
  c.recipe = Float8Recipe::MX;
  c.formats = FormatPairing::E4M3;
  EXPECT_EQ(default_run_formats(amd("gfx942"), c), FormatPairing::E4M3);
  RunConfig fnuz;
  fnuz.device = "cuda";
  fnuz.formats = default_run_formats(amd("gfx942"), fnuz);
  EXPECT_NO_THROW(validate_run_config(fnuz));
  // On the CPU of an AMD machine a run emulates: the config's formats.
  RunConfig cpu;
  cpu.device = "cpu";
  EXPECT_EQ(default_run_formats(amd("gfx942"), cpu), FormatPairing::Hybrid);
}

TEST(DefaultFormats, ThisMachinesLibTorchIsNoRocmBuild) {
  // Debian's LibTorch is a CPU build: no ROCm, no GPU, the OCP formats.
  const BackendInfo b = probe_backend();
  if (b.torch_cuda_build) GTEST_SKIP() << "a GPU LibTorch";
  EXPECT_FALSE(b.rocm);
  EXPECT_EQ(default_format_pairing(b), FormatPairing::Hybrid);
}

TEST(DefaultFormats, RecommendationIsMadeInTheFormatAskedFor) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> v(256 * 256);
  for (float& x : v) x = n(rng);
  AnalysisOptions o;
  o.maps = false;
  o.device = AnalysisDevice::Cpu;
  const TensorAnalysis fn = analyze_values("w", "F32", {256, 256}, v, o);
  ASSERT_FALSE(fn.recommended.empty());
  EXPECT_EQ(fn.recommended.rfind("E4M3FN ", 0), 0u) << fn.recommended;
  o.recommend_format = Format::E4M3FNUZ;
  const TensorAnalysis fnuz = analyze_values("w", "F32", {256, 256}, v, o);
  ASSERT_FALSE(fnuz.recommended.empty());
  EXPECT_EQ(fnuz.recommended.rfind("E4M3FNUZ ", 0), 0u) << fnuz.recommended;
  // The recommended recipe is one of the fnuz results, the best within 1 dB.
  double best = -INFINITY, picked = NAN;
  for (const RecipeResult& r : fnuz.recipes) {
    if (r.recipe.format != Format::E4M3FNUZ) continue;
    best = std::max(best, r.sqnr_db);
    if (r.name == fnuz.recommended) picked = r.sqnr_db;
  }
  EXPECT_GE(picked, best - 1.0);
}

}  // namespace
}  // namespace fp8wb
