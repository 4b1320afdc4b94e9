// The training engine on a GPU: a GPT with FP8 linears beside its bf16 reference, with
// the per-model peak memory each step records. FP8 layers keep FP8 codes, not the
// high-precision input, for the backward, so the FP8 model's peak must be below the
// reference's; both must count at least their parameters and AdamW state.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <mutex>

#include "fp8wb/core/trainer.h"

namespace fp8wb {
namespace {

struct Collect : MetricConsumer {
  std::mutex m;
  std::vector<StepMetrics> steps;
  RunStatus status = RunStatus::Running;
  std::string message;
  void consume(const MetricBatch& b) override {
    const std::lock_guard<std::mutex> lock(m);
    steps.insert(steps.end(), b.steps.begin(), b.steps.end());
    if (b.final) {
      status = b.status;
      message = b.message;
    }
  }
};

TEST(TrainerCuda, FP8ModelPeaksBelowItsReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: GPU trainer test skipped";
  RunConfig c;
  c.device = "cuda:0";
  c.d_model = 1024;
  c.heads = 16;
  c.layers = 4;
  c.context = 256;
  c.batch = 32;
  c.dtype = "bf16";
  c.reference = true;
  c.steps = 4;
  c.stats_interval = 0;
  c.sqnr_interval = 0;
  auto got = std::make_shared<Collect>();
  auto bus = std::make_shared<MetricBus>();
  bus->add(got);
  Trainer t(c, bus);
  t.run();
  ASSERT_EQ(got->status, RunStatus::Finished) << got->message;
  ASSERT_FALSE(got->steps.empty());
  const StepMetrics& last = got->steps.back();
  ASSERT_TRUE(std::isfinite(last.mem_fp8));
  ASSERT_TRUE(std::isfinite(last.mem_ref));
  // Parameters (fp32) and AdamW's two moments: at least 12 bytes a parameter.
  const double params = 4.0 * 12.0 * c.d_model * c.d_model;  // the blocks' linears alone
  EXPECT_GT(last.mem_fp8, 12.0 * params / 4.0);
  EXPECT_GT(last.mem_ref, 12.0 * params / 4.0);
  EXPECT_LT(last.mem_fp8, last.mem_ref)
      << "FP8 " << last.mem_fp8 / 1e9 << " GB, reference " << last.mem_ref / 1e9 << " GB";
  std::printf("peak memory: FP8 %.3f GB, bf16 reference %.3f GB (%.2fx)\n", last.mem_fp8 / 1e9,
              last.mem_ref / 1e9, last.mem_ref / last.mem_fp8);
  for (const StepMetrics& m : got->steps) EXPECT_TRUE(std::isfinite(m.peak_rss));
}

}  // namespace
}  // namespace fp8wb
