// CPU: an MLP block (d -> 4d -> d, GELU) forward + backward with emulated FP8 linears
// next to the same block in fp32, in one run (target P5: the FP8 step <= 1.3x fp32).
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <thread>

#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/torch/float8_linear.h"

namespace {

void BM_MlpBlock(benchmark::State& s) {
  const bool fp8 = s.range(0) != 0;
  const bool stats = s.range(1) != 0;
  const int64_t tokens = 2048, d = 256;
  fp8wb::init_compute_threads();
  torch::manual_seed(0);
  fp8wb::LinearLayer up(d, 4 * d), down(4 * d, d);
  fp8wb::Float8LinearConfig cfg;
  cfg.stats_interval = stats ? 1 : 0;
  if (fp8) {
    up->to_float8(cfg);
    down->to_float8(cfg);
  }
  const torch::Tensor x = torch::randn({tokens, d});
  for (auto _ : s) {
    const torch::Tensor y = down->forward(torch::gelu(up->forward(x.requires_grad_(false))));
    y.pow(2).mean().backward();
    benchmark::DoNotOptimize(up->weight.grad().data_ptr());
    up->weight.mutable_grad().reset();
    down->weight.mutable_grad().reset();
  }
  s.SetLabel(fp8 ? (stats ? "FP8 emulated, all statistics" : "FP8 emulated, no statistics")
                 : "fp32");
  s.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens),
                                              benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_MlpBlock)
    ->Args({0, 0})
    ->Args({1, 1})
    ->Args({1, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
