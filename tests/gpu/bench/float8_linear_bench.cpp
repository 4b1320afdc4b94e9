// The MLP block of the performance notes, d -> 4d -> d with GELU, forward and backward,
// bf16 activations and weights: plain bf16 (cuBLAS, torch::gelu) against Float8Linear
// with the models' fp8wb::gelu (tensorwise current and delayed scaling, rowwise;
// statistics off and on every step; delayed with at::_scaled_mm's GEMM algorithms instead
// of the tuned ones, or with torch::gelu), and bf16 with fp8wb::gelu, in one run;
// --interleave times the variants' steps in turn, round after round (see main()).
// Prints a table; --json PATH writes the figures; --trace DIR (made if missing) writes,
// for each variant and shape, the Kineto profiler's events of five steps (every kernel,
// copy and CPU-side operator with its times, clocks as they run), for
// tests/gpu/trace_summary.py.
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "float8/scaled_gemm_cuda.h"
#include "fp8wb/core/backend/backend_info.h"
#include "fp8wb/core/torch/float8_linear.h"
#include "fp8wb/core/torch/layers.h"

namespace {

using fp8wb::Float8LinearConfig;
using fp8wb::Float8LinearState;

struct Variant {
  std::string name;
  std::optional<Float8LinearConfig> cfg;  // none: plain bf16
  bool torch_gelu = false;                // torch::gelu, not fp8wb::gelu (the models' own)
};

Float8LinearConfig base(bool stats) {
  Float8LinearConfig c;  // HYBRID tensorwise, fast accumulation in fprop (as torchao)
  c.stats_interval = stats ? 1 : 0;
  return c;
}

std::vector<Variant> variants() {
  std::vector<Variant> v;
  v.push_back({"bf16", std::nullopt, true});  // plain PyTorch: the reference of every ratio
  v.push_back({"bf16, table GELU", std::nullopt});
  v.push_back({"fp8 tensorwise current", base(false)});
  Float8LinearConfig d = base(false);
  d.delayed = true;
  d.delayed_scaling.window = 16;
  v.push_back({"fp8 tensorwise delayed", d});
  v.push_back({"fp8 tensorwise delayed, torch GELU", d, true});
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
  // DeepSeek-V3's recipe: activations and gradients in 1x128 blocks, weights in 128x128
  // tiles, E4M3 throughout, block-scaled GEMMs.
  Float8LinearConfig bl = base(false);
  bl.input.kind = bl.grad_output.kind = fp8wb::ScalingKind::Block1x128;
  bl.weight.kind = fp8wb::ScalingKind::Block128x128;
  bl.grad_output.format = fp8wb::Format::E4M3FN;
  v.push_back({"fp8 1x128 x 128x128 current", bl});
  v.push_back({"fp8 tensorwise current + stats", base(true)});
  d.stats_interval = 1;
  v.push_back({"fp8 tensorwise delayed + stats", d});
  return v;
}

// One timed step, in milliseconds (synchronised before and after).
double timed_step_ms(const std::function<void()>& step) {
  torch::cuda::synchronize();
  const auto a = std::chrono::steady_clock::now();
  step();
  torch::cuda::synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
}

// Wall-clock time in milliseconds since the Unix epoch (to match samples of other tools,
// such as nvidia-smi's clocks and power, to a variant's timed steps).
double unix_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
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
  std::ofstream f(path);
  f << events.dump() << "\n";
  if (!f.flush()) throw std::runtime_error("cannot write the trace " + path);
  std::printf("   trace: %zu events, %lld on the GPU -> %s\n", events.size(),
              static_cast<long long>(gpu), path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, only, trace_dir;
  int reps = 20;
  bool interleave = false;
  int64_t only_d = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--interleave") interleave = true;
  }
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--json") json_path = argv[i + 1];
    if (std::string(argv[i]) == "--reps") reps = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--only") only = argv[i + 1];  // variants containing it, and bf16
    if (std::string(argv[i]) == "--trace") trace_dir = argv[i + 1];
    if (std::string(argv[i]) == "--d") only_d = std::stoll(argv[i + 1]);  // one shape: 16384 x d
  }
  if (!trace_dir.empty()) std::filesystem::create_directories(trace_dir);
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
    if (only.empty() || v.name == "bf16" || match) vs.push_back(v);
  }
  std::printf("MLP block d -> 4d -> d, GELU, fwd+bwd, bf16; %s; %s\n", info.device_name.c_str(),
              (std::to_string(reps) + (interleave ? " rounds, the variants in turn"
                                                  : " steps a variant, back to back, median"))
                  .c_str());
  std::printf("%-14s %-36s %9s %9s  %9s %9s\n", "tokens x d", "variant", "ms", "vs bf16",
              interleave ? "" : "no sync", interleave ? "" : "vs bf16");
  nlohmann::json js = {{"device", info.device_name},
                       {"interleave", interleave},
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
    // Each variant takes 3 untimed steps, then `reps` timed steps back to back (sustained
    // training: the GPU's clocks settle to the variant's own power draw), and a speed-up is
    // the ratio of the medians. --interleave instead takes `reps` rounds in which each
    // variant takes one timed step in turn, and a speed-up is the median over the rounds of
    // the ratio within a round: drift during the run falls on every variant alike, but a
    // step then runs at the clocks its predecessor (another variant) left.
    std::vector<std::unique_ptr<Float8LinearState>> s1(vs.size()), s2(vs.size());
    std::vector<std::function<void()>> steps;
    for (size_t i = 0; i < vs.size(); ++i) {
      s1[i] = std::make_unique<Float8LinearState>();
      s2[i] = std::make_unique<Float8LinearState>();
      const std::optional<Float8LinearConfig> cfg = vs[i].cfg;
      const bool torch_gelu = vs[i].torch_gelu;
      Float8LinearState* a = s1[i].get();
      Float8LinearState* b = s2[i].get();
      steps.push_back([&x, &w1, &w2, &dy, cfg, torch_gelu, a, b] {
        const auto gelu = [torch_gelu](const torch::Tensor& h) {
          return torch_gelu ? torch::gelu(h) : fp8wb::gelu(h);
        };
        torch::Tensor y;
        if (cfg) {
          y = fp8wb::float8_linear(gelu(fp8wb::float8_linear(x, w1, {}, *cfg, a)), w2, {}, *cfg, b);
        } else {
          y = torch::nn::functional::linear(gelu(torch::nn::functional::linear(x, w1)), w2);
        }
        y.backward(dy);
        x.mutable_grad() = torch::Tensor();
        w1.mutable_grad() = torch::Tensor();
        w2.mutable_grad() = torch::Tensor();
        if (cfg) {
          a->poll();
          b->poll();
        }
      });
    }
    std::vector<std::vector<double>> ms(vs.size());
    std::vector<std::pair<double, double>> window(vs.size());  // the timed steps, Unix ms
    std::vector<double> pipelined(vs.size(), 0.0);             // back to back, mean ms
    if (interleave) {
      for (const auto& step : steps) {
        for (int i = 0; i < 3; ++i) step();  // warm-up: allocations, GEMM tuning, histories
      }
      for (int r = 0; r < reps; ++r) {
        for (size_t i = 0; i < vs.size(); ++i) ms[i].push_back(timed_step_ms(steps[i]));
      }
    } else {
      for (size_t i = 0; i < vs.size(); ++i) {
        for (int k = 0; k < 3; ++k) steps[i]();
        window[i].first = unix_ms();
        for (int r = 0; r < reps; ++r) ms[i].push_back(timed_step_ms(steps[i]));
        window[i].second = unix_ms();
        // The same steps with no synchronisation between them (the host runs ahead, as in
        // a training loop that does not wait for each step): the mean.
        torch::cuda::synchronize();
        const auto a = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) steps[i]();
        torch::cuda::synchronize();
        pipelined[i] =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a)
                .count() /
            reps;
      }
    }
    size_t base_i = 0;  // "bf16": always kept (see --only)
    while (base_i < vs.size() && vs[base_i].name != "bf16") ++base_i;
    for (size_t i = 0; i < vs.size(); ++i) {
      const Variant& v = vs[i];
      std::vector<double> ratio;
      for (int r = 0; r < reps; ++r) ratio.push_back(ms[base_i][r] / ms[i][r]);
      const double med_ms = median(ms[i]);
      const double speedup = interleave ? median(ratio) : median(ms[base_i]) / med_ms;
      const std::string shape = std::to_string(m) + "x" + std::to_string(d);
      std::printf("%-14s %-36s %9.3f %8.2fx", shape.c_str(), v.name.c_str(), med_ms, speedup);
      if (pipelined[i] > 0)
        std::printf("  %9.3f %8.2fx", pipelined[i], pipelined[base_i] / pipelined[i]);
      std::printf("\n");
      const int64_t real = s1[i]->probe.gemms_real + s2[i]->probe.gemms_real;
      const int64_t emulated = s1[i]->probe.gemms_emulated + s2[i]->probe.gemms_emulated;
      js["rows"].push_back({{"m", m},
                            {"d", d},
                            {"variant", v.name},
                            {"ms", med_ms},
                            {"speedup", speedup},
                            {"speedup_of_medians", median(ms[base_i]) / med_ms},
                            {"gemms_real", real},
                            {"gemms_emulated", emulated},
                            {"unix_ms", {window[i].first, window[i].second}},
                            {"pipelined_ms", pipelined[i]}});
      if (!trace_dir.empty()) {
        std::string file = shape + "-" + v.name;
        for (char& c : file) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
        trace_steps(steps[i], 5, trace_dir + "/" + file + ".json");
      }
      if (v.cfg && emulated > 0)
        std::printf("   (%lld GEMMs emulated)\n", static_cast<long long>(emulated));
    }
    // What statistics every step add to a variant, round by round (P3).
    for (size_t i = 0; i < vs.size(); ++i) {
      const std::string suffix = " + stats";
      const std::string& name = vs[i].name;
      if (name.size() <= suffix.size() ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const std::string plain = name.substr(0, name.size() - suffix.size());
      for (size_t j = 0; j < vs.size(); ++j) {
        if (vs[j].name != plain) continue;
        std::vector<double> extra;
        for (int r = 0; r < reps; ++r) extra.push_back(ms[i][r] / ms[j][r] - 1);
        const double e = interleave ? median(extra) : median(ms[i]) / median(ms[j]) - 1;
        std::printf("%-14s statistics every step over %s: %+.1f%%\n",
                    (std::to_string(m) + "x" + std::to_string(d)).c_str(), plain.c_str(), 100 * e);
        js["stats_overhead"].push_back({{"m", m}, {"d", d}, {"variant", plain}, {"extra", e}});
      }
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
