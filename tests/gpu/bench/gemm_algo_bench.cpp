// The six FP8 GEMMs of the MLP block (d -> 4d -> d: forward, dgrad and wgrad of both
// layers, HYBRID formats: E4M3 x E4M3 forward, E5M2 gradients x E4M3), timed as
// at::_scaled_mm runs them (cuBLASLt's first heuristic) and with every algorithm cuBLASLt's
// heuristic offers for the same problem, round-robin: how much a choice of algorithm could
// take off an FP8 step (P1). Prints a table; --json PATH writes the figures.
#include <ATen/cuda/CUDAContext.h>
#include <cublasLt.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"

namespace {

void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed: status " + std::to_string(int(s)));
}

cudaDataType_t lt_type(at::ScalarType t) {
  if (t == at::kFloat8_e4m3fn) return CUDA_R_8F_E4M3;
  if (t == at::kFloat8_e5m2) return CUDA_R_8F_E5M2;
  if (t == at::kBFloat16) return CUDA_R_16BF;
  throw std::invalid_argument("no cuBLASLt type");
}

// One GEMM y [rows, cols] = a [rows, K] * b [cols, K]^T, both K-major, bf16 out, as
// at::_scaled_mm(a, b.t()) hands it to cuBLASLt (column-major: y^T = b a^T).
struct LtGemm {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  at::Tensor a, b, y, sa, sb, ws;

  LtGemm(const at::Tensor& a_, const at::Tensor& b_, bool fast, size_t ws_bytes) : a(a_), b(b_) {
    const int64_t rows = a.size(0), k = a.size(1), cols = b.size(0);
    y = torch::empty({rows, cols}, a.options().dtype(at::kBFloat16));
    sa = torch::ones({}, a.options().dtype(at::kFloat));
    sb = torch::ones({}, a.options().dtype(at::kFloat));
    ws = torch::empty({static_cast<int64_t>(ws_bytes)}, a.options().dtype(at::kByte));
    lt_check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)), "ta");
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)), "tb");
    const void* pa = sb.data_ptr();  // cuBLASLt's A is b
    const void* pb = sa.data_ptr();
    lt_check(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof(pa)),
        "sa");
    lt_check(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof(pb)),
        "sb");
    const int8_t f = fast ? 1 : 0;
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &f, sizeof(f)),
             "fast");
    lt_check(cublasLtMatrixLayoutCreate(&la, lt_type(b.scalar_type()), k, cols, k), "la");
    lt_check(cublasLtMatrixLayoutCreate(&lb, lt_type(a.scalar_type()), k, rows, k), "lb");
    lt_check(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, cols, rows, cols), "lc");
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "pref");
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws_bytes, sizeof(ws_bytes)),
             "ws");
  }
  ~LtGemm() {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(op);
  }
  std::vector<cublasLtMatmulHeuristicResult_t> algos(int want) const {
    std::vector<cublasLtMatmulHeuristicResult_t> r(want);
    int got = 0;
    lt_check(cublasLtMatmulAlgoGetHeuristic(at::cuda::getCurrentCUDABlasLtHandle(), op, la, lb, lc,
                                            lc, pref, want, r.data(), &got),
             "heuristic");
    r.resize(got);
    return r;
  }
  void run(const cublasLtMatmulAlgo_t& algo) {
    const float one = 1, zero = 0;
    lt_check(cublasLtMatmul(at::cuda::getCurrentCUDABlasLtHandle(), op, &one, b.data_ptr(), la,
                            a.data_ptr(), lb, &zero, y.data_ptr(), lc, y.data_ptr(), lc, &algo,
                            ws.data_ptr(), ws.numel(), at::cuda::getCurrentCUDAStream()),
             "matmul");
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int want = 24;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--json") json_path = argv[i + 1];
    if (std::string(argv[i]) == "--algos") want = std::stoi(argv[i + 1]);
  }
  if (!torch::cuda::is_available()) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  nlohmann::json js = {{"rows", nlohmann::json::array()}};
  std::printf("%-12s %-18s %9s %9s %9s %6s %5s\n", "tokens x d", "GEMM", "_scaled", "heur0", "best",
              "index", "algos");
  for (const auto& [m, d] :
       std::vector<std::pair<int64_t, int64_t>>{{16384, 2048}, {16384, 4096}, {32768, 4096}}) {
    const int64_t h = 4 * d;
    struct G {
      const char* name;
      int64_t rows, k, cols;
      bool grad_a, fast;
    };
    // (rows, contraction, cols); the gradient (E5M2) is the first operand in dgrad and wgrad.
    const G gs[] = {{"fprop1", m, d, h, false, true}, {"fprop2", m, h, d, false, true},
                    {"dgrad2", m, d, h, true, false}, {"dgrad1", m, h, d, true, false},
                    {"wgrad2", d, m, h, true, false}, {"wgrad1", h, m, d, true, false}};
    double sum_mm = 0, sum_h0 = 0, sum_best = 0;
    for (const G& g : gs) {
      torch::manual_seed(0);
      const auto opt = torch::TensorOptions().device(torch::kCUDA);
      const at::Tensor a =
          torch::randn({g.rows, g.k}, opt).to(g.grad_a ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn);
      const at::Tensor b = torch::randn({g.cols, g.k}, opt).to(at::kFloat8_e4m3fn);
      const at::Tensor one = torch::ones({}, opt);
      LtGemm lt(a, b, g.fast, size_t{32} << 20);
      const auto algos = lt.algos(want);
      // Candidate 0: at::_scaled_mm; then each algorithm. Timed round-robin (a round times
      // every candidate once: clock drift falls on all alike), four calls back to back per
      // timing (the host's cost of a call hides behind the GPU's queue, as in a step).
      std::vector<std::function<void()>> cands;
      cands.push_back([&] {
        (void)at::_scaled_mm(a, b.t(), one, one, std::nullopt, std::nullopt, at::kBFloat16, g.fast);
      });
      for (const auto& r : algos) cands.push_back([&lt, algo = r.algo] { lt.run(algo); });
      std::vector<std::vector<double>> ts(cands.size());
      std::vector<bool> ok(cands.size(), true);
      for (size_t c = 0; c < cands.size(); ++c) {  // warm-up; an algorithm that fails is out
        try {
          cands[c]();
        } catch (const std::exception&) {
          ok[c] = false;
        }
      }
      cudaEvent_t e0, e1;
      FP8WB_BENCH_CHECK(cudaEventCreate(&e0));
      FP8WB_BENCH_CHECK(cudaEventCreate(&e1));
      for (int round = 0; round < 8; ++round) {
        for (size_t c = 0; c < cands.size(); ++c) {
          if (!ok[c]) continue;
          FP8WB_BENCH_CHECK(cudaEventRecord(e0, at::cuda::getCurrentCUDAStream()));
          for (int i = 0; i < 4; ++i) cands[c]();
          FP8WB_BENCH_CHECK(cudaEventRecord(e1, at::cuda::getCurrentCUDAStream()));
          FP8WB_BENCH_CHECK(cudaEventSynchronize(e1));
          float ms = 0;
          FP8WB_BENCH_CHECK(cudaEventElapsedTime(&ms, e0, e1));
          ts[c].push_back(ms / 4);
        }
      }
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      std::vector<double> t;  // per algorithm
      for (size_t c = 1; c < cands.size(); ++c) {
        std::sort(ts[c].begin(), ts[c].end());
        t.push_back(ok[c] && !ts[c].empty() ? ts[c][ts[c].size() / 2] : 1e30);
      }
      std::sort(ts[0].begin(), ts[0].end());
      const double t_mm = ts[0][ts[0].size() / 2];
      const size_t best = std::min_element(t.begin(), t.end()) - t.begin();
      // Which algorithms give heuristic 0's bits (at::_scaled_mm's too), and which give the
      // same bits twice; each algorithm's split-K count and tile, from its configuration.
      std::vector<int> same, repeat, splitk, tile;
      at::Tensor ref;
      if (!algos.empty()) {
        lt.run(algos[0].algo);
        ref = lt.y.clone();
      }
      const bool mm_same =
          ref.defined() && torch::equal(at::_scaled_mm(a, b.t(), one, one, std::nullopt,
                                                       std::nullopt, at::kBFloat16, g.fast),
                                        ref);
      for (size_t i = 0; i < algos.size(); ++i) {
        if (!ok[i + 1]) {
          same.push_back(-1);
          repeat.push_back(-1);
        } else {
          lt.run(algos[i].algo);
          const at::Tensor y1 = lt.y.clone();
          lt.run(algos[i].algo);
          same.push_back(torch::equal(y1, ref));
          repeat.push_back(torch::equal(y1, lt.y));
        }
        uint32_t v = 0;
        size_t got = 0;
        cublasLtMatmulAlgoConfigGetAttribute(&algos[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &v,
                                             sizeof(v), &got);
        splitk.push_back(static_cast<int>(v));
        v = 0;
        cublasLtMatmulAlgoConfigGetAttribute(&algos[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &v,
                                             sizeof(v), &got);
        tile.push_back(static_cast<int>(v));
      }
      std::string bits;
      for (size_t i = 0; i < same.size(); ++i)
        bits += (same[i] == 1   ? '='
                 : same[i] == 0 ? 'x'
                                : '-') +
                std::string(repeat[i] == 1 ? "" : "!");
      const std::string shape = std::to_string(m) + "x" + std::to_string(d);
      std::printf("%-12s %-18s %9.3f %9.3f %9.3f %6zu %5zu  mm%s %s\n", shape.c_str(), g.name, t_mm,
                  t.empty() ? 0 : t[0], t.empty() ? 0 : t[best], best, t.size(),
                  mm_same ? "=" : "x", bits.c_str());
      sum_mm += t_mm;
      sum_h0 += t.empty() ? 0 : t[0];
      sum_best += t.empty() ? 0 : t[best];
      js["rows"].push_back({{"m", m},
                            {"d", d},
                            {"gemm", g.name},
                            {"scaled_mm_ms", t_mm},
                            {"algo_ms", t},
                            {"best", best},
                            {"scaled_mm_bits_as_heuristic0", mm_same},
                            {"bits_as_heuristic0", same},
                            {"same_bits_twice", repeat},
                            {"splitk", splitk},
                            {"tile_id", tile}});
    }
    std::printf("%-12s %-18s %9.3f %9.3f %9.3f  (best over heuristic 0: %.3fx)\n",
                (std::to_string(m) + "x" + std::to_string(d)).c_str(), "six GEMMs", sum_mm, sum_h0,
                sum_best, sum_h0 / sum_best);
  }
  if (!json_path.empty()) std::ofstream(json_path) << js.dump(1) << "\n";
  return 0;
}
