// defines: CommBenchOptions, CommFigure, CommBenchResult, run_comm_bench(): what a
// data-parallel step sends between ranks, measured through this build's process group
// (Gloo for CPU ranks, NCCL for GPU ranks): an all-reduce of fp32 values, and an
// all-gather of a weight matrix as FP8 (E4M3FN codes as uint8 plus one fp32 scale a row)
// against the same matrix as bf16. Plain structs, no torch (core/src/train/comm_bench.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fp8wb/core/train/distributed.h"

namespace fp8wb {

struct CommBenchOptions {
  std::string device = "cpu";  // cpu (Gloo) or cuda (NCCL; rank r on its local GPU)
  int64_t rows = 1024;         // the weight matrix every rank sends
  int64_t cols = 1024;
  int iters = 20;  // timed exchanges of each kind (the median is reported)
  int warmup = 3;  // untimed exchanges before them
  int timeout_s = 60;
  // Rank 0 only, where set: each step of the work as it is done (building every rank's
  // payload, each exchange), for progress on long runs; `what` names the step.
  std::function<void(const std::string& what, int done, int total)> progress;
};

// The largest matrix a rank sends: 2^30 elements (rows x cols).
inline constexpr int64_t kCommBenchMaxElements = int64_t{1} << 30;

// Throws std::invalid_argument naming the option (--rows/--cols, the timed exchanges, the
// device) for what run_comm_bench() would refuse: the launcher checks before any rank
// starts.
void check_comm_bench_options(const CommBenchOptions& opt);

// What a rank holds at its peak (bytes, upper estimates from the buffers
// run_comm_bench() makes): rank 0 rebuilds every rank's payload (fp32 weights, FP8 codes
// and row scales, bf16) to check what comes back, so it holds `world` payloads; every
// rank holds its own and, at once, the all-reduce's copies or the gathered bf16 slots.
// On GPUs the exchanged tensors are in `device` bytes a rank, the payloads in `host`.
struct CommBenchMemory {
  double rank0_host = 0, other_host = 0;
  double device = 0;  // a rank's GPU, where the device is cuda
};
CommBenchMemory estimate_comm_bench_memory(const CommBenchOptions& opt, int world);

struct CommFigure {
  std::string op;              // "all_reduce" or "all_gather"
  std::string payload;         // "fp32", "fp8 codes", "fp8 scales", "bf16"
  std::string dtype;           // as the process group was given it: "float32", "uint8", "bfloat16"
  std::string note;            // why the dtype is not the natural one, where it is not
  std::vector<int64_t> shape;  // of one rank's tensor
  int64_t bytes_per_rank = 0;  // what each rank sends
  int64_t bytes_result = 0;    // what each rank holds afterwards (all_gather: world x)
  double ms = 0;               // median over the timed exchanges, on this rank
  double algbw_gbs = 0;        // bytes_result / ms (all_reduce: bytes_per_rank / ms)
  double busbw_gbs = 0;        // as nccl-tests: all_reduce x 2(n-1)/n, all_gather x (n-1)/n
  // Rank 0: all_gather: every rank's slot holds, byte for byte, what that rank sent
  // (rebuilt here from its rank, not taken from the exchange); all_reduce: the sum equals,
  // bit for bit, the ranks' values added here in rank order.
  bool identical = false;
  double max_abs_error = 0;  // all_reduce: against that sum
};

struct CommBenchResult {
  std::string backend;  // "gloo" or "nccl"
  std::string device;   // rank 0's
  int world = 0;
  std::vector<CommFigure> figures;  // all_reduce fp32, then fp8 codes, fp8 scales, bf16
  // The FP8 weights (codes + scales) against bf16: bytes and time.
  double fp8_bytes_vs_bf16 = 0;
  double fp8_ms_vs_bf16 = 0;
};

// Every rank calls it with its RankInfo (rank 0 listens at master_addr:master_port); all
// return the same figures' layout with their own times; only rank 0 rebuilds the other
// ranks' payloads and checks (`identical`, `max_abs_error`), elsewhere they stay unset. Throws
// std::runtime_error naming the rank and the exchange (a rank that does not answer within the
// timeout, a backend this build lacks), std::invalid_argument for a bad option.
CommBenchResult run_comm_bench(const RankInfo& info, const CommBenchOptions& opt);

}  // namespace fp8wb
