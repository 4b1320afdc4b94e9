// defines: CommBenchOptions, CommFigure, CommBenchResult, run_comm_bench(): what a
// data-parallel step sends between ranks, measured through this build's process group
// (Gloo for CPU ranks, NCCL for GPU ranks): an all-reduce of fp32 values, and an
// all-gather of a weight matrix as FP8 (E4M3FN codes as uint8 plus one fp32 scale a row)
// against the same matrix as bf16. Plain structs, no torch (core/src/comm_bench.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8wb/core/distributed.h"

namespace fp8wb {

struct CommBenchOptions {
  std::string device = "cpu";  // cpu (Gloo) or cuda (NCCL; rank r on its local GPU)
  int64_t rows = 1024;         // the weight matrix every rank sends
  int64_t cols = 1024;
  int iters = 20;  // timed exchanges of each kind (the median is reported)
  int warmup = 3;  // untimed exchanges before them
  int timeout_s = 60;
};

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
