// defines: FP8WB_BENCH_CHECK, median_ms(), BenchRow, json_path_arg(), report(): timing and
// reporting shared by the GPU benchmark programs (CUDA events, median of repeats).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#define FP8WB_BENCH_CHECK(x)                                               \
  do {                                                                     \
    cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_)); \
      throw std::runtime_error("CUDA error");                              \
    }                                                                      \
  } while (0)

namespace fp8wb::bench {

// Warm-up, then the median of `reps` timed runs, in milliseconds. `ahead`, where given,
// puts work on the GPU before each run's first event (a long memset, say), so that the
// run's launches are all queued before the GPU reaches them: the time is then the GPU's
// alone, without the host's time to launch (which a training step, its launches queued
// ahead of the GPU, does not wait for either).
inline double median_ms(const std::function<void()>& fn, int reps = 25,
                        const std::function<void()>& ahead = {}) {
  cudaEvent_t a, b;
  FP8WB_BENCH_CHECK(cudaEventCreate(&a));
  FP8WB_BENCH_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    if (ahead) ahead();
    FP8WB_BENCH_CHECK(cudaEventRecord(a));
    fn();
    FP8WB_BENCH_CHECK(cudaEventRecord(b));
    FP8WB_BENCH_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    FP8WB_BENCH_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[t.size() / 2];
}

struct BenchRow {
  std::string what;
  double bytes;  // read once + written once
  double ms;
  double queued_ms = 0;  // median_ms with the launches queued ahead (0: not measured)
};

inline std::string json_path_arg(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--json") return argv[i + 1];
  }
  return {};
}

// Prints a table with each row's throughput as a share of the first row's (the copy),
// and writes `extra` with "device" and "rows" added when json_path is not empty.
inline void report(const std::string& title, const std::string& device,
                   const std::vector<BenchRow>& rows, const std::string& json_path,
                   nlohmann::json extra) {
  const double copy_gbs = rows.front().bytes / rows.front().ms / 1e6;
  const bool queued = rows.front().queued_ms > 0;
  const double copy_queued_gbs = queued ? rows.front().bytes / rows.front().queued_ms / 1e6 : 0;
  std::printf("%s\n%-44s %9s %9s %8s", title.c_str(), "what", "ms", "GB/s", "of copy");
  if (queued) std::printf(" %9s %8s", "queued ms", "of copy");
  std::printf("\n");
  for (const BenchRow& r : rows) {
    const double gbs = r.bytes / r.ms / 1e6;
    std::printf("%-44s %9.3f %9.1f %7.1f%%", r.what.c_str(), r.ms, gbs, 100 * gbs / copy_gbs);
    if (queued && r.queued_ms > 0) {
      std::printf(" %9.3f %7.1f%%", r.queued_ms,
                  100 * r.bytes / r.queued_ms / 1e6 / copy_queued_gbs);
    }
    std::printf("\n");
  }
  if (queued) {
    std::printf(
        "(queued: the launches queued behind a memset, so that the time is the GPU's "
        "alone)\n");
  }
  if (json_path.empty()) return;
  extra["device"] = device;
  extra["rows"] = nlohmann::json::array();
  for (const BenchRow& r : rows) {
    const double gbs = r.bytes / r.ms / 1e6;
    nlohmann::json row = {
        {"what", r.what}, {"ms", r.ms}, {"gbs", gbs}, {"of_copy", gbs / copy_gbs}};
    if (queued && r.queued_ms > 0) {
      row["queued_ms"] = r.queued_ms;
      row["queued_of_copy"] = r.bytes / r.queued_ms / 1e6 / copy_queued_gbs;
    }
    extra["rows"].push_back(row);
  }
  std::ofstream js(json_path);
  js << extra.dump(1) << "\n";
  if (!js) std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
}

}  // namespace fp8wb::bench
