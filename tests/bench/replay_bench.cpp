// The replay of delayed scaling (replay.h) at the size the docs promise: a run of 100k steps
// with 64 FP8 tensors replayed over a 4 x 4 x 2 grid (margins 0-3, windows 1, 16, 128,
// 1024, max and most_recent) on one core, with 256 sampled steps' histograms for the
// estimates (what `fp8wb replay` takes); and what the per-step amax costs in a run
// database (rows written through the run store, file size per 100k steps).
//
//   fp8wb_replay_bench [--steps 100000] [--tensors 64] [--reps 3] [--no-store] [--json out.json]
#include <time.h>
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

#include "fp8wb/core/replay/replay.h"
#include "fp8wb/core/store/run_store.h"

namespace {

using namespace fp8wb;

struct Rng {
  uint64_t s;
  float uniform() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<float>(s >> 40) * (1.0f / 16777216.0f);
  }
};

// Amax trajectories like a training run's: a slow drift per tensor, noise, rare spikes.
ReplayInput synthetic(size_t steps, size_t tensors) {
  ReplayInput in;
  for (size_t t = 0; t < tensors; ++t) {
    in.tensors.push_back({"blocks." + std::to_string(t / 3) + ".fc", kRoles[t % 3].value,
                          t % 3 == 2 ? Format::E5M2 : Format::E4M3FN});
  }
  in.steps.resize(steps);
  in.amax.resize(steps * tensors);
  Rng rng{0x9E3779B97F4A7C15ull};
  for (size_t i = 0; i < steps; ++i) {
    in.steps[i] = static_cast<int64_t>(i);
    for (size_t t = 0; t < tensors; ++t) {
      const float base =
          (t % 3 == 2 ? 1e-3f : 1.0f) *
          (1.0f + 0.5f * std::sin(1e-4f * static_cast<float>(i) + static_cast<float>(t)));
      float a = base * (0.8f + 0.4f * rng.uniform());
      if (rng.uniform() < 1e-4f) a *= 30.0f;
      in.amax[i * tensors + t] = a;
    }
  }
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  size_t steps = 100000, tensors = 64;
  int reps = 3;
  bool store = true;
  std::string json_out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc)
      steps = std::stoul(argv[++i]);
    else if (a == "--tensors" && i + 1 < argc)
      tensors = std::stoul(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::stoi(argv[++i]);
    else if (a == "--no-store")
      store = false;
    else if (a == "--json" && i + 1 < argc)
      json_out = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: fp8wb_replay_bench [--steps N] [--tensors N] [--reps N] "
                   "[--no-store] [--json out.json]\n");
      return 2;
    }
  }
  const ReplayInput in = synthetic(steps, tensors);
  ReplayGrid g;
  g.margins = {0, 1, 2, 3};
  g.windows = {1, 16, 128, 1024};
  g.algos = {AmaxAlgo::Max, AmaxAlgo::MostRecent};
  ReplayOptions opt;
  opt.run.config = {16, 0, AmaxAlgo::Max, InitialScale::One};
  Rng rng{42};
  for (size_t k = 0; k < 256; ++k) {
    for (size_t t = 0; t < tensors; ++t) {
      ReplaySample s;
      s.step = static_cast<int64_t>(k * (steps / 256));
      s.tensor = t;
      s.scale = 100.0f;
      for (int b = 0; b < kHistExpBins; ++b)
        s.hist[b] = static_cast<uint64_t>(1000 * rng.uniform());
      opt.samples.push_back(s);
    }
  }
  // Wall-clock time and the thread's own CPU time (which a busy machine does not inflate
  // as much): one thread, one core.
  const auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  double best = 1e300, best_cpu = 1e300;
  int64_t saturating = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    const ReplayResult res = replay_amax(in, g, opt);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
    best_cpu = std::min(best_cpu, cpu_now() - c0);
    saturating = res.cells[res.ranking.front()].all.saturating_steps;
  }
  std::printf(
      "replay: %zu steps x %zu tensors over %zu cells: %.3f s wall, %.3f s CPU (best of "
      "%d), best cell saturates %lld steps\n",
      steps, tensors, g.cell_count(), best, best_cpu, reps, static_cast<long long>(saturating));
  nlohmann::json j = {{"steps", steps},
                      {"tensors", tensors},
                      {"cells", g.cell_count()},
                      {"replay_s", best},
                      {"replay_cpu_s", best_cpu}};

  if (store) {
    // The per-step amax as a run writes it: one batch a step through the run store.
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("fp8wb-replay-bench-" + std::to_string(getpid()) + ".sqlite"))
                                 .string();
    {
      auto st = RunStore::open(path);
      const int64_t id = st->create_run("bench", fp8wb::RunKind::Train, "{}", "cpu");
      MetricBatch first;
      first.run_id = id;
      first.amax_tensors = in.tensors;
      st->write(std::move(first));
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < steps; ++i) {
        MetricBatch b;
        b.run_id = id;
        b.step_amax.push_back(
            {static_cast<int64_t>(i),
             std::vector<float>(in.amax.begin() + static_cast<long>(i * tensors),
                                in.amax.begin() + static_cast<long>((i + 1) * tensors))});
        st->write(std::move(b));
      }
      st->flush();
      const double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const auto r0 = std::chrono::steady_clock::now();
      const StepAmaxTable back = st->step_amax(id);
      const double rd =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
      if (back.amax != in.amax) {
        std::fprintf(stderr, "the amax read back differs from what was written\n");
        return 1;
      }
      std::printf("store: %zu rows written in %.2f s, read back in %.3f s\n", steps, w, rd);
      j["store_write_s"] = w;
      j["store_read_s"] = rd;
    }
    const double bytes = static_cast<double>(std::filesystem::file_size(path));
    const double per_100k = bytes * 100000.0 / static_cast<double>(steps);
    std::printf(
        "store: %.1f MB for the run (%.1f MB per 100k steps of %zu tensors; the raw "
        "floats are %.1f MB)\n",
        bytes / 1e6, per_100k / 1e6, tensors, 4.0 * static_cast<double>(tensors) * 100000 / 1e6);
    j["store_bytes_per_100k_steps"] = per_100k;
    for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
  }
  if (!json_out.empty()) std::ofstream(json_out) << j.dump(2) << "\n";
  return 0;
}
