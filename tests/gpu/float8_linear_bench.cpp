// The MLP block of the performance notes, d -> 4d -> d with GELU, forward and backward,
// bf16 activations and weights: plain bf16 (cuBLAS) against Float8Linear (tensorwise
// current and delayed scaling, rowwise; statistics off and on every step; delayed with
// at::_scaled_mm's GEMM algorithms instead of the tuned ones), in one run.
// Prints a table; --json PATH writes the figures; --trace DIR writes, for each variant
// and shape, the Kineto profiler's events of five steps (every kernel, copy and CPU-side
// operator with its times, clocks as they run), for tests/gpu/trace_summary.py.
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8wb/core/backend_info.h"
#include "fp8wb/core/torch/float8_linear.h"
#include "scaled_gemm_cuda.h"

namespace {

using fp8wb::Float8LinearConfig;
using fp8wb::Float8LinearState;

struct Variant {
  std::string name;
  std::optional<Float8LinearConfig> cfg;  // none: plain bf16
};

Float8LinearConfig base(bool stats) {
  Float8LinearConfig c;  // HYBRID tensorwise, fast accumulation in fprop (as torchao)
  c.stats_interval = stats ? 1 : 0;
  return c;
}

std::vector<Variant> variants() {
  std::vector<Variant> v;
  v.push_back({"bf16", std::nullopt});
  v.push_back({"fp8 tensorwise current", base(false)});
  Float8LinearConfig d = base(false);
  d.delayed = true;
  d.delayed_scaling.window = 16;
  v.push_back({"fp8 tensorwise delayed", d});
  Float8LinearConfig untuned = d;  // every GEMM with at::_scaled_mm's algorithm
  untuned.tune_gemms = false;
  v.push_back({"fp8 tensorwise delayed, untuned", untuned});
  Float8LinearConfig fast = d;  // fast accumulation in dgrad and wgrad too
  fast.dgrad_fast_accum = fast.wgrad_fast_accum = true;
  v.push_back({"fp8 tensorwise delayed, fast accum", fast});
  Float8LinearConfig r = base(false);
  r.input.kind = r.weight.kind = r.grad_output.kind = fp8wb::ScalingKind::Rowwise;
  r.grad_output.format = fp8wb::Format::E4M3FN;  // E4M3 x E4M3 per-row GEMMs
  v.push_back({"fp8 rowwise current", r});
  v.push_back({"fp8 tensorwise current + stats", base(true)});
  d.stats_interval = 1;
  v.push_back({"fp8 tensorwise delayed + stats", d});
  return v;
}

// Median of `reps` timed steps after warm-up, in milliseconds (synchronised per step).
double median_step_ms(const std::function<void()>& step, int reps) {
  for (int i = 0; i < 3; ++i) step();
  torch::cuda::synchronize();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    step();
    torch::cuda::synchronize();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Runs `steps` steps under the Kineto profiler (CPU operators and runtime calls, GPU
// kernels, copies and memsets) and writes its events to `path` as JSON: an array of
// {name, cuda (a GPU operation), start_ns, dur_ns}.
void trace_steps(const std::function<void()>& step, int steps, const std::string& path) {
  namespace prof = torch::profiler::impl;
  const prof::ProfilerConfig cfg(prof::ProfilerState::KINETO);
  const std::set<prof::ActivityType> acts{prof::ActivityType::CPU, prof::ActivityType::CUDA};
  torch::autograd::profiler::prepareProfiler(cfg, acts);
  torch::autograd::profiler::enableProfiler(cfg, acts);
  for (int i = 0; i < steps; ++i) {
    RECORD_USER_SCOPE("fp8wb_step");  // the step's window, up to its synchronisation
    step();
    torch::cuda::synchronize();
  }
  const auto result = torch::autograd::profiler::disableProfiler();
  nlohmann::json events = nlohmann::json::array();
  int64_t gpu = 0;
  for (const auto& e : result->events()) {
    const bool cuda = e.deviceType() == c10::DeviceType::CUDA;
    gpu += cuda;
    events.push_back({{"name", e.name()},
                      {"cuda", cuda},
                      {"start_ns", e.startNs()},
                      {"dur_ns", e.durationNs()}});
  }
  std::ofstream(path) << events.dump() << "\n";
  std::printf("   trace: %zu events, %lld on the GPU -> %s\n", events.size(),
              static_cast<long long>(gpu), path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, only, trace_dir;
  int reps = 20;
  int64_t only_d = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--json") json_path = argv[i + 1];
    if (std::string(argv[i]) == "--reps") reps = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--only") only = argv[i + 1];  // variants containing it, and bf16
    if (std::string(argv[i]) == "--trace") trace_dir = argv[i + 1];
    if (std::string(argv[i]) == "--d") only_d = std::stoll(argv[i + 1]);  // one shape: 16384 x d
  }
  if (!torch::cuda::is_available()) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  const fp8wb::BackendInfo info = fp8wb::probe_backend();
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {16384, 2048}, {16384, 4096}, {32768, 4096}};
  std::vector<Variant> vs;
  for (const Variant& v : variants()) {
    // "--only NAME" keeps variants whose name contains NAME; "--only =NAME" the one named so.
    const bool exact = !only.empty() && only[0] == '=';
    const bool match = exact ? v.name == only.substr(1) : v.name.find(only) != std::string::npos;
    if (only.empty() || !v.cfg || match) vs.push_back(v);
  }
  std::printf("MLP block d -> 4d -> d, GELU, fwd+bwd, bf16; %s; median of %d steps\n",
              info.device_name.c_str(), reps);
  std::printf("%-14s %-32s %9s %9s\n", "tokens x d", "variant", "ms", "vs bf16");
  nlohmann::json js = {{"device", info.device_name},
                       {"torch", info.torch_version},
                       {"rows", nlohmann::json::array()}};
  for (const auto& [m, d] : shapes) {
    if (only_d && (d != only_d || m != 16384)) continue;
    torch::manual_seed(0);
    const auto opt = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
    const torch::Tensor x = torch::randn({m, d}, opt).requires_grad_(true);
    const torch::Tensor w1 =
        (torch::randn({4 * d, d}, opt) / std::sqrt(double(d))).requires_grad_(true);
    const torch::Tensor w2 =
        (torch::randn({d, 4 * d}, opt) / std::sqrt(double(4 * d))).requires_grad_(true);
    const torch::Tensor dy = torch::randn({m, d}, opt);
    double bf16_ms = 0;
    for (const Variant& v : vs) {
      Float8LinearState s1, s2;
      auto step = [&] {
        torch::Tensor y;
        if (v.cfg) {
          y = fp8wb::float8_linear(torch::gelu(fp8wb::float8_linear(x, w1, {}, *v.cfg, &s1)), w2,
                                   {}, *v.cfg, &s2);
        } else {
          y = torch::nn::functional::linear(torch::gelu(torch::nn::functional::linear(x, w1)), w2);
        }
        y.backward(dy);
        x.mutable_grad() = torch::Tensor();
        w1.mutable_grad() = torch::Tensor();
        w2.mutable_grad() = torch::Tensor();
        if (v.cfg) {
          s1.poll();
          s2.poll();
        }
      };
      const double ms = median_step_ms(step, reps);
      if (!v.cfg) bf16_ms = ms;
      const std::string shape = std::to_string(m) + "x" + std::to_string(d);
      std::printf("%-14s %-32s %9.3f %8.2fx\n", shape.c_str(), v.name.c_str(), ms, bf16_ms / ms);
      js["rows"].push_back({{"m", m},
                            {"d", d},
                            {"variant", v.name},
                            {"ms", ms},
                            {"speedup", bf16_ms / ms},
                            {"gemms_real", s1.probe.gemms_real + s2.probe.gemms_real},
                            {"gemms_emulated", s1.probe.gemms_emulated + s2.probe.gemms_emulated}});
      if (!trace_dir.empty()) {
        std::string file = shape + "-" + v.name;
        for (char& c : file) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
        trace_steps(step, 5, trace_dir + "/" + file + ".json");
      }
      if (v.cfg && s1.probe.gemms_emulated + s2.probe.gemms_emulated > 0)
        std::printf("   (%lld GEMMs emulated)\n",
                    static_cast<long long>(s1.probe.gemms_emulated + s2.probe.gemms_emulated));
    }
  }
  // The GEMM algorithms chosen for the tuned variants: index 0 is at::_scaled_mm's.
  nlohmann::json choices = nlohmann::json::array();
  for (const fp8wb::detail::GemmChoice& g : fp8wb::detail::gemm_choices()) {
    if (g.first_ms > 0)
      std::printf("   GEMM %-44s algorithm %d of %d: %.3f ms (first %.3f ms)\n", g.problem.c_str(),
                  g.index, g.offered, g.chosen_ms, g.first_ms);
    choices.push_back({{"problem", g.problem},
                       {"index", g.index},
                       {"offered", g.offered},
                       {"first_ms", g.first_ms},
                       {"chosen_ms", g.chosen_ms}});
  }
  js["gemm_choices"] = choices;
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << js.dump(1) << "\n";
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
