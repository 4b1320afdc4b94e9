// Torch translation unit: tensorwise FP8 GEMMs through cuBLASLt, as at::_scaled_mm hands
// them to it (C[M, N] = A[M, K] B[N, K]^T, both K-major; cuBLASLt, column-major, computes
// C^T = B A^T with B "transposed"), with the algorithm measured fastest for each problem.
#include "scaled_gemm_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>

namespace fp8wb::detail {
namespace {

cudaDataType_t lt_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat8_e4m3fn: return CUDA_R_8F_E4M3;
    case at::kFloat8_e5m2: return CUDA_R_8F_E5M2;
    case at::kBFloat16: return CUDA_R_16BF;
    case at::kHalf: return CUDA_R_16F;
    case at::kFloat: return CUDA_R_32F;
    default: throw std::invalid_argument("no cuBLASLt type for " + std::string(c10::toString(t)));
  }
}

// cuBLASLt's descriptors of one problem, freed with it.
struct Problem {
  struct Free {
    void operator()(cublasLtMatmulDescOpaque_t* p) const { cublasLtMatmulDescDestroy(p); }
    void operator()(cublasLtMatrixLayoutOpaque_t* p) const { cublasLtMatrixLayoutDestroy(p); }
    void operator()(cublasLtMatmulPreferenceOpaque_t* p) const {
      cublasLtMatmulPreferenceDestroy(p);
    }
  };
  std::unique_ptr<cublasLtMatmulDescOpaque_t, Free> op;
  std::unique_ptr<cublasLtMatrixLayoutOpaque_t, Free> la, lb, lc;
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, Free> pref;
  bool ok = false;  // every descriptor was made and set

  template <class T>
  bool set(cublasLtMatmulDescAttributes_t what, const T& v) {
    return cublasLtMatmulDescSetAttribute(op.get(), what, &v, sizeof(v)) == CUBLAS_STATUS_SUCCESS;
  }

  Problem(int64_t m, int64_t n, int64_t k, cudaDataType_t ta, cudaDataType_t tb, cudaDataType_t tc,
          bool fast, size_t workspace) {
    cublasLtMatmulDesc_t d = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t p = nullptr;
    if (cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
      return;
    op.reset(d);
    // cuBLASLt's A is our B ([N, K] row-major: K x N column-major, transposed), its B our A.
    if (cublasLtMatrixLayoutCreate(&a, tb, k, n, k) != CUBLAS_STATUS_SUCCESS) return;
    la.reset(a);
    if (cublasLtMatrixLayoutCreate(&b, ta, k, m, k) != CUBLAS_STATUS_SUCCESS) return;
    lb.reset(b);
    if (cublasLtMatrixLayoutCreate(&c, tc, n, m, n) != CUBLAS_STATUS_SUCCESS) return;
    lc.reset(c);
    if (cublasLtMatmulPreferenceCreate(&p) != CUBLAS_STATUS_SUCCESS) return;
    pref.reset(p);
    const int8_t fast_mode = fast ? 1 : 0;
    ok = set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T) &&
         set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N) &&
         set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast_mode) &&
         cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &workspace,
                                              sizeof(workspace)) == CUBLAS_STATUS_SUCCESS;
  }

  // The scales of a call (device pointers: this call's sa and sb).
  bool scales(const void* sa, const void* sb) {
    return set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, sb) &&
           set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, sa);
  }

  std::vector<cublasLtMatmulHeuristicResult_t> offers(int want) const {
    std::vector<cublasLtMatmulHeuristicResult_t> r(static_cast<size_t>(want));
    int got = 0;
    if (cublasLtMatmulAlgoGetHeuristic(at::cuda::getCurrentCUDABlasLtHandle(), op.get(), la.get(),
                                       lb.get(), lc.get(), lc.get(), pref.get(), want, r.data(),
                                       &got) != CUBLAS_STATUS_SUCCESS)
      got = 0;
    r.resize(static_cast<size_t>(got));
    return r;
  }

  bool run(const cublasLtMatmulHeuristicResult_t& h, const at::Tensor& a, const at::Tensor& b,
           at::Tensor& y) const {
    const float one = 1, zero = 0;
    at::Tensor ws;
    if (h.workspaceSize > 0)
      ws = at::empty({static_cast<int64_t>(h.workspaceSize)}, a.options().dtype(at::kByte));
    return cublasLtMatmul(at::cuda::getCurrentCUDABlasLtHandle(), op.get(), &one, b.data_ptr(),
                          la.get(), a.data_ptr(), lb.get(), &zero, y.data_ptr(), lc.get(),
                          y.data_ptr(), lc.get(), &h.algo, ws.defined() ? ws.data_ptr() : nullptr,
                          h.workspaceSize,
                          at::cuda::getCurrentCUDAStream().stream()) == CUBLAS_STATUS_SUCCESS;
  }
};

// The problems this thread has multiplied, their descriptors made once (making and freeing
// them at every call cost more host time than the GEMM's launch), each with the algorithm
// chosen for it. Per thread: a call sets its own scales in the descriptor.
struct Made {
  std::unique_ptr<Problem> problem;
  std::optional<cublasLtMatmulHeuristicResult_t> algo;
  bool picked = false;  // algo holds the problem's choice (none: cuBLASLt offered nothing)
};

bool without_split_k(const cublasLtMatmulAlgo_t& algo) {
  uint32_t split = 0;
  size_t got = 0;
  return cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split,
                                              sizeof(split), &got) == CUBLAS_STATUS_SUCCESS &&
         split <= 1;
}

// The chosen algorithm of each problem (device, M, N, K, types, fast); none: cuBLASLt
// offered nothing.
using Key = std::tuple<int, int64_t, int64_t, int64_t, int, int, int, bool>;
struct Chosen {
  std::optional<cublasLtMatmulHeuristicResult_t> algo;
  GemmChoice report;
};
std::mutex g_mu;
std::map<Key, Chosen>& chosen() {
  static std::map<Key, Chosen> m;
  return m;
}

// Milliseconds of three runs of `h` back to back, after one (the GPU's queue hides the
// host's cost of a call, as in a step); +inf where a run fails.
double time_three(const Problem& p, const cublasLtMatmulHeuristicResult_t& h, const at::Tensor& a,
                  const at::Tensor& b, at::Tensor& y) {
  if (!p.run(h, a, b, y)) return INFINITY;
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  const auto stream = at::cuda::getCurrentCUDAStream();
  start.record(stream);
  for (int i = 0; i < 3; ++i) {
    if (!p.run(h, a, b, y)) return INFINITY;
  }
  stop.record(stream);
  stop.synchronize();
  return start.elapsed_time(stop) / 3.0;
}

std::string problem_name(int64_t m, int64_t n, int64_t k, at::ScalarType ta, at::ScalarType tb,
                         at::ScalarType out, bool fast) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " +
         c10::toString(ta) + "*" + c10::toString(tb) + "->" + c10::toString(out) +
         (fast ? " fast" : " exact");
}

}  // namespace

std::optional<at::Tensor> tuned_scaled_gemm(const at::Tensor& a, at::ScalarType ta,
                                            const at::Tensor& b, at::ScalarType tb, const float* sa,
                                            const float* sb, at::ScalarType out, bool fast_accum) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(0);
  // cuBLASLt's heuristic assumes 256-byte aligned matrices (its preferences' default).
  auto aligned = [](const at::Tensor& t) {
    return reinterpret_cast<uintptr_t>(t.data_ptr()) % 256 == 0;
  };
  if (!a.is_contiguous() || !b.is_contiguous() || b.size(1) != k || !aligned(a) || !aligned(b) ||
      a.element_size() != 1 || b.element_size() != 1)
    return std::nullopt;
  const Key key{a.get_device(),        m,         n, k, static_cast<int>(ta), static_cast<int>(tb),
                static_cast<int>(out), fast_accum};
  thread_local std::map<Key, Made> made;
  auto it = made.find(key);
  const bool fresh = it == made.end();
  if (fresh) {
    auto problem = std::make_unique<Problem>(m, n, k, lt_type(ta), lt_type(tb), lt_type(out),
                                             fast_accum, at::cuda::getCUDABlasLtWorkspaceSize());
    it = made.emplace(key, Made{std::move(problem), std::nullopt, false}).first;
  }
  Made& mine = it->second;
  Problem& p = *mine.problem;
  if (!p.ok || !p.scales(sa, sb)) return std::nullopt;
  at::Tensor y = at::empty({m, n}, a.options().dtype(out));
  if (!aligned(y)) return std::nullopt;
  if (!mine.picked) {
    // The algorithm chosen for this problem by any thread before, else chosen now.
    bool known = false;
    {
      const std::lock_guard<std::mutex> lock(g_mu);
      if (const auto c = chosen().find(key); c != chosen().end()) {
        mine.algo = c->second.algo;
        known = true;
      }
    }
    if (!known) {
      Chosen c;
      c.report.problem = problem_name(m, n, k, ta, tb, out, fast_accum);
      std::vector<cublasLtMatmulHeuristicResult_t> offers = p.offers(8);
      c.report.offered = static_cast<int>(offers.size());
      if (!offers.empty()) c.algo = offers[0];
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      const bool capturing = cudaStreamIsCapturing(at::cuda::getCurrentCUDAStream().stream(),
                                                   &capture) != cudaSuccess ||
                             capture != cudaStreamCaptureStatusNone;
      if (offers.size() > 1 && !capturing &&
          static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >=
              kTuneMinMacs) {
        // Two rounds, each timing every candidate once (clock drift falls on all alike); a
        // candidate's time is its faster round.
        std::vector<double> t(offers.size(), INFINITY);
        for (int round = 0; round < 2; ++round) {
          for (size_t i = 0; i < offers.size(); ++i) {
            if (i > 0 && !without_split_k(offers[i].algo)) continue;
            t[i] = std::min(t[i], time_three(p, offers[i], a, b, y));
          }
        }
        const double first = t[0];
        c.report.index = static_cast<int>(std::min_element(t.begin(), t.end()) - t.begin());
        const double best = t[static_cast<size_t>(c.report.index)];
        if (!(best < 0.98 * first)) c.report.index = 0;
        c.algo = offers[static_cast<size_t>(c.report.index)];
        c.report.first_ms = std::isfinite(first) ? first : 0;
        c.report.chosen_ms = c.report.index == 0 ? c.report.first_ms : best;
      }
      mine.algo = c.algo;
      const std::lock_guard<std::mutex> lock(g_mu);
      chosen().emplace(key, c);
    }
    mine.picked = true;
  }
  if (!mine.algo || !p.run(*mine.algo, a, b, y)) return std::nullopt;
  return y;
}

std::optional<at::Tensor> tuned_scaled_gemm(const at::Tensor& a, const at::Tensor& b,
                                            const at::Tensor& sa, const at::Tensor& sb,
                                            at::ScalarType out, bool fast_accum) {
  if (sa.scalar_type() != at::kFloat || sb.scalar_type() != at::kFloat) return std::nullopt;
  return tuned_scaled_gemm(a, a.scalar_type(), b, b.scalar_type(), sa.data_ptr<float>(),
                           sb.data_ptr<float>(), out, fast_accum);
}

std::vector<GemmChoice> gemm_choices() {
  const std::lock_guard<std::mutex> lock(g_mu);
  std::vector<GemmChoice> r;
  for (const auto& [key, c] : chosen()) r.push_back(c.report);
  return r;
}

}  // namespace fp8wb::detail
