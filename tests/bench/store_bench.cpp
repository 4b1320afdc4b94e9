// What a run that samples statistics every step asks of the run store: N sampled steps of
// T tensors (a 12-layer GPT: 48 linear layers x 3 roles = 144), each tensor's statistics
// row with its exponent histogram and its 64 x 64 error map (16 KB), written through the
// run store as the trainer writes them (one batch a step), timed until the writer has
// committed them; then read back as a follower reads them (the tensors of each new step).
//
//   fp8wb_store_bench [--steps 200] [--tensors 144] [--cells 64] [--dir DIR]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fp8wb/core/store/run_store.h"

int main(int argc, char** argv) {
  using namespace fp8wb;
  long steps = 200, tensors = 144, cells = 64;
  std::string dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--steps" && more) {
      steps = std::atol(argv[++i]);
    } else if (a == "--tensors" && more) {
      tensors = std::atol(argv[++i]);
    } else if (a == "--cells" && more) {
      cells = std::atol(argv[++i]);
    } else if (a == "--dir" && more) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: fp8wb_store_bench [--steps N] [--tensors N] [--cells N] [--dir DIR]\n");
      return 2;
    }
  }
  if (steps < 1 || tensors < 1 || cells < 1 || cells > 1024) {
    std::fprintf(stderr, "steps and tensors at least 1, cells 1 to 1024\n");
    return 2;
  }
  const std::string path = dir + "/fp8wb-store-bench-" + std::to_string(getpid()) + ".sqlite";
  // One sampled step's statistics, as add_role() fills them (values vary by tensor).
  std::vector<TensorMetrics> step_rows(static_cast<size_t>(tensors));
  for (long t = 0; t < tensors; ++t) {
    TensorMetrics& m = step_rows[static_cast<size_t>(t)];
    m.layer = "blocks." + std::to_string(t / 12) + ".layer" + std::to_string(t / 3 % 4);
    m.role = kRoles[static_cast<size_t>(t % 3)].value;
    m.amax = 1.0f + static_cast<float>(t);
    m.scale = 448.0f / m.amax;
    m.raw.numel = 8192 * 768;
    m.raw.sq_err = 1e-3 * static_cast<double>(t + 1);
    m.raw.sq_sum = 1e3;
    for (int b = 20; b < 50; ++b) m.raw.hist[b] = static_cast<uint64_t>(1000 + b * t);
    m.map_grid.rows = m.map_grid.cols = cells;
    m.map_rel_error.resize(static_cast<size_t>(cells * cells));
    for (size_t c = 0; c < m.map_rel_error.size(); ++c) {
      m.map_rel_error[c] = 1e-3f * static_cast<float>((c * 7 + static_cast<size_t>(t)) % 1000);
    }
    m.amax_history.assign(16, m.amax);
  }
  double write_s = 0, read_s = 0;
  size_t read_rows = 0;
  {
    auto st = RunStore::open(path);
    // One sampled step of a run, as the trainer hands it over.
    const auto write_step = [&](int64_t run, long step) {
      MetricBatch b;
      b.run_id = run;
      b.tensors = step_rows;
      for (TensorMetrics& m : b.tensors) m.step = step;
      st->write(std::move(b));
    };
    const int64_t id = st->create_run("bench", RunKind::Train, "{}", "cpu");
    const auto t0 = std::chrono::steady_clock::now();
    for (long s = 0; s < steps; ++s) write_step(id, s);
    st->flush();
    write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // A follower of a second run: every 10 steps committed, what came since its cursor.
    const int64_t followed = st->create_run("followed", RunKind::Train, "{}", "cpu");
    RunCursor cursor;
    for (long s = 0; s < steps; s += 10) {
      for (long k = s; k < std::min(steps, s + 10); ++k) write_step(followed, k);
      st->flush();
      const auto r0 = std::chrono::steady_clock::now();
      read_rows += st->read_new(followed, cursor).tensors.size();
      read_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
    }
  }
  const double mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  std::printf(
      "store: %ld sampled steps x %ld tensors (%ld x %ld error maps): %.2f ms a step to commit "
      "(%.0f MB/s of error maps), file %.0f MB; a follower of another run read its %zu rows "
      "in %.3f s (every 10 steps)\n",
      steps, tensors, cells, cells, 1e3 * write_s / static_cast<double>(steps),
      static_cast<double>(steps * tensors * cells * cells * 4) / 1e6 / write_s, mb, read_rows,
      read_s);
  return 0;
}
