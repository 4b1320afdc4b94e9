// defines: tuned_scaled_gemm(), GemmChoice, gemm_choices(): tensorwise FP8 GEMMs through
// cuBLASLt with the algorithm measured fastest for each problem (torch translation units
// only).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fp8wb::detail {

// y [M, N] = (a [M, K] * sa) (b [N, K] * sb)^T: a and b K-major FP8 (E4M3FN or E5M2, the
// dtype given), sa and sb fp32 scalars on the device; y in `out` (bf16, fp16 or fp32).
//
// The algorithm: cuBLASLt's heuristic offers several for a problem; at::_scaled_mm takes
// the first, which for the fast-accumulation GEMMs of an MLP on an H200 is 5-13% slower
// than another it offers (docs/performance.md). The first time a problem of at least
// kTuneMinMacs multiply-adds comes, each offered algorithm without split-K is timed (three
// runs back to back, in each of two rounds), and the fastest is kept for the problem if it
// beats the first by 2%; smaller problems, and calls while the stream is being captured,
// take the first. Without split-K each output sums along K in one pass; on an H200 every
// such algorithm gave at::_scaled_mm's bits (tests/gpu/cuda_tests/scaled_gemm_cuda_test.cpp,
// tests/gpu/bench/gemm_algo_bench.cpp). nullopt where cuBLASLt offers nothing for the problem:
// the caller takes at::_scaled_mm.
std::optional<at::Tensor> tuned_scaled_gemm(const at::Tensor& a, const at::Tensor& b,
                                            const at::Tensor& sa, const at::Tensor& sb,
                                            at::ScalarType out, bool fast_accum);
// The same from one-byte codes of any dtype (uint8 included) read as ta and tb, with sa and
// sb fp32 pointers on the device: no views made, for a caller that counts its host time.
std::optional<at::Tensor> tuned_scaled_gemm(const at::Tensor& a, at::ScalarType ta,
                                            const at::Tensor& b, at::ScalarType tb, const float* sa,
                                            const float* sb, at::ScalarType out, bool fast_accum);

inline constexpr double kTuneMinMacs = 1ull << 34;  // 2048^3 * 2

// What was chosen so far, for each problem (tests and benchmarks).
struct GemmChoice {
  std::string problem;  // "MxNxK a*b->out fast|exact"
  int index = 0;        // among the heuristic's offers (0: at::_scaled_mm's)
  int offered = 0;
  double first_ms = 0, chosen_ms = 0;  // 0 where not timed
};
std::vector<GemmChoice> gemm_choices();

}  // namespace fp8wb::detail
