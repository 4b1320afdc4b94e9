// P8: checkpoint inspection throughput, GB/s of weights analysed. Writes a synthetic
// bf16 checkpoint shaped like a transformer's (attention and MLP weights, a few outlier
// input channels, fp32 norm vectors), opens it memory-mapped as the workbench does, and
// times the full analysis (every recipe x E4M3/E5M2, error maps as the Checkpoint tab
// asks for them) on the CPU and, where there is one, on the GPU.
//
//   fp8wb_inspect_bench [--mb 256] [--d 2048] [--reps 3] [--cpu-only] [--json out.json]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "temp_dir.h"

namespace {

using namespace fp8wb;

// Roughly normal values (the sum of four uniforms), fast enough for hundreds of MB.
struct Rng {
  uint64_t s;
  float uniform() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<float>(s >> 40) * (1.0f / 16777216.0f);
  }
  float normal() { return (uniform() + uniform() + uniform() + uniform() - 2.0f) * 1.7320508f; }
};

TensorToWrite bf16_weight(const std::string& name, int64_t rows, int64_t cols, uint64_t seed) {
  Rng rng{seed * 0x9E3779B97F4A7C15ull + 1};
  TensorToWrite t{name,
                  StDtype::BF16,
                  {rows, cols},
                  std::vector<uint8_t>(static_cast<size_t>(rows * cols * 2))};
  auto* out = reinterpret_cast<uint16_t*>(t.bytes.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float v = rng.normal() * 0.02f;
      if (c % 509 == 7) v *= 40.0f;  // a few outlier input channels
      uint32_t b;
      std::memcpy(&b, &v, 4);
      out[r * cols + c] = static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
    }
  }
  return t;
}

TensorToWrite f32_norm(const std::string& name, int64_t n) {
  TensorToWrite t{name, StDtype::F32, {n}, std::vector<uint8_t>(static_cast<size_t>(n * 4))};
  for (int64_t i = 0; i < n; ++i) {
    const float v = 1.0f + 0.01f * static_cast<float>(i % 17);
    std::memcpy(t.bytes.data() + 4 * i, &v, 4);
  }
  return t;
}

struct Timing {
  double seconds = 0;
  size_t tensors = 0;
};

Timing time_analysis(const Checkpoint& c, const AnalysisOptions& o, int reps) {
  Timing best{1e30, 0};
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = analyze_checkpoint(c, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < best.seconds) best = {s, r.size()};
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  double mb = 256;
  int64_t d = 2048;
  int reps = 3;
  bool cpu_only = false;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mb" && i + 1 < argc)
      mb = std::stod(argv[++i]);
    else if (a == "--d" && i + 1 < argc)
      d = std::stoll(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::stoi(argv[++i]);
    else if (a == "--cpu-only")
      cpu_only = true;
    else if (a == "--json" && i + 1 < argc)
      json = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--mb 256] [--d 2048] [--reps 3] [--cpu-only] [--json FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("fp8wb-inspect-bench-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.safetensors";
  std::vector<TensorToWrite> tensors;
  double bytes = 0;
  for (int layer = 0; bytes < mb * 1e6; ++layer) {
    const std::string p = "layers." + std::to_string(layer) + ".";
    for (const char* n :
         {"attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.o_proj.weight"})
      tensors.push_back(bf16_weight(p + n, d, d, tensors.size()));
    tensors.push_back(bf16_weight(p + "mlp.up_proj.weight", 4 * d, d, tensors.size()));
    tensors.push_back(bf16_weight(p + "mlp.down_proj.weight", d, 4 * d, tensors.size()));
    tensors.push_back(f32_norm(p + "norm.weight", d));
    bytes = 0;
    for (const auto& t : tensors) bytes += static_cast<double>(t.bytes.size());
  }
  write_safetensors(path, tensors);
  tensors.clear();
  const auto ckpt = Checkpoint::open(path);

  AnalysisOptions o;
  o.formats = {Format::E4M3FN, Format::E5M2};  // P8: every recipe x 2 formats
  std::printf("checkpoint: %zu tensors, %.1f MB (bf16 weights, d = %lld)\n", ckpt->tensors().size(),
              bytes / 1e6, static_cast<long long>(d));
  struct Row {
    std::string what;
    double seconds;
  };
  std::vector<Row> rows;
  auto run = [&](const std::string& what, AnalysisOptions opt) {
    const Timing t = time_analysis(*ckpt, opt, reps);
    rows.push_back({what, t.seconds});
    std::printf("%-44s %8.3f s %8.3f GB/s\n", what.c_str(), t.seconds, bytes / 1e9 / t.seconds);
  };
  AnalysisOptions summary = o;
  summary.kinds.clear();  // the value summary alone: what the CPU adds to either device
  summary.device = AnalysisDevice::Cpu;
  run("summary only (CPU, all cores)", summary);
  AnalysisOptions cpu = o;
  cpu.device = AnalysisDevice::Cpu;
  run("all recipes x E4M3/E5M2, maps, CPU", cpu);
  cpu.maps = false;
  run("all recipes x E4M3/E5M2, no maps, CPU", cpu);
  if (!cpu_only && analysis_gpu_available()) {
    AnalysisOptions gpu = o;
    gpu.device = AnalysisDevice::Gpu;
    run("all recipes x E4M3/E5M2, maps, GPU", gpu);
    gpu.maps = false;
    run("all recipes x E4M3/E5M2, no maps, GPU", gpu);
    gpu.maps = true;
    gpu.formats = {Format::E4M3FN, Format::E5M2, Format::E4M3FNUZ, Format::E5M2FNUZ,
                   Format::E2M1FN};
    run("every recipe x format (the default), GPU", gpu);
  } else if (!cpu_only) {
    std::printf("no GPU here: GPU rows skipped\n");
  }
  fp8wb::test::remove_tree(dir);
  if (!json.empty()) {
    nlohmann::json out = {{"mb", bytes / 1e6},
                          {"d", d},
                          {"tensors", ckpt->tensors().size()},
                          {"rows", nlohmann::json::array()}};
    for (const auto& r : rows)
      out["rows"].push_back({{"what", r.what}, {"s", r.seconds}, {"gbs", bytes / 1e9 / r.seconds}});
    std::ofstream f(json);
    f << out.dump(1) << "\n";
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json.c_str());
      return 1;
    }
  }
  return 0;
}
