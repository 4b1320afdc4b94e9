// Torch translation unit: Float8Linear's FP8 GEMMs on CUDA tensors: at::_scaled_mm (or
// the tuned cuBLASLt call of scaled_gemm_cuda.cpp) where this LibTorch and GPU take the
// formats and scaling pair, else emulated on the GPU with a notice.
#include "fp8_gemm_cuda.h"

#include <atomic>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "fp8wb/core/backend/notices.h"
#include "scaled_gemm_cuda.h"

namespace fp8wb::detail {
namespace {

// The float8 dtype FP8 tensor cores take for a format (none: emulated, with a notice).
std::optional<at::ScalarType> fp8_dtype(Format f) {
  switch (f) {
    case Format::E4M3FN: return at::kFloat8_e4m3fn;
    case Format::E5M2: return at::kFloat8_e5m2;
    case Format::E4M3FNUZ:
    case Format::E5M2FNUZ:
    case Format::E8M0FNU:
    case Format::E2M1FN:
    case Format::E3M2FN:
    case Format::E2M3FN: return std::nullopt;
  }
  throw std::invalid_argument("FP8 GEMM: unknown format " + std::to_string(static_cast<int>(f)));
}

// _scaled_mm's scale for a K-major operand: A [M, K] as it is, B [N, K] as its transpose.
std::optional<at::Tensor> scale_arg(const Operand& o, bool is_b) {
  const at::Tensor& s = o.scale_inv;  // [group_rows, group_cols]
  switch (o.recipe.kind) {
    case ScalingKind::Tensorwise: return s.reshape({});
    case ScalingKind::Rowwise: return is_b ? s.reshape({1, -1}) : s.reshape({-1, 1});
    case ScalingKind::Block1x128:  // A: [M, K/128] outer-dim-major; B: [K/128, N]
      return is_b ? s.t().contiguous() : s.t().contiguous().t();
    case ScalingKind::Block128x128:  // A: [M/128, K/128]; B: [K/128, N/128]
      return is_b ? s.t() : s;
    case ScalingKind::MX:  // E8M0 block scales: not a scaling pair scaling_pair_ok() takes
    case ScalingKind::NVFP4: return std::nullopt;
  }
  throw std::invalid_argument("FP8 GEMM: unknown scaling kind " +
                              std::to_string(static_cast<int>(o.recipe.kind)));
}

bool scaling_pair_ok(ScalingKind a, ScalingKind b) {
  using K = ScalingKind;
  if (a == K::Tensorwise || a == K::Rowwise) return a == b;
  return (a == K::Block1x128 && (b == K::Block128x128 || b == K::Block1x128)) ||
         (a == K::Block128x128 && b == K::Block1x128);
}

// The GEMM on FP8 tensor cores, or nothing (with a notice, once per kind of GEMM) where
// this LibTorch or GPU cannot take it.
std::optional<at::Tensor> scaled_mm(const Operand& a, const Operand& b, at::ScalarType out,
                                    bool fast_accum, bool tune) {
  // Names are made only where a GEMM is refused: this runs at every linear layer's call.
  const auto combo = [&] { return recipe_name(a.recipe) + " x " + recipe_name(b.recipe); };
  auto refuse = [&](const std::string& why) -> std::optional<at::Tensor> {
    const std::string c = combo();
    notice_once("fp8-gemm " + c + " " + why,
                "FP8 GEMM " + c + ": " + why +
                    "; emulated on the GPU instead (FP8 codes -> fp32, fp32 GEMM)");
    return std::nullopt;
  };
  const auto da = fp8_dtype(a.recipe.format), db = fp8_dtype(b.recipe.format);
  if (!da || !db) return refuse("FP8 tensor cores here take E4M3FN and E5M2 only");
  if (a.recipe.format == Format::E5M2 && b.recipe.format == Format::E5M2)
    return refuse("FP8 tensor cores do not multiply E5M2 by E5M2");
  if (!scaling_pair_ok(a.recipe.kind, b.recipe.kind))
    return refuse("at::_scaled_mm has no such scaling pair");
  const int64_t m = a.codes.size(0), k = a.codes.size(1), n = b.codes.size(0);
  if (k % 16 != 0 || n % 16 != 0) return refuse("K and N must be multiples of 16");
  // PyTorch 2.11's block-scaled FP8 GEMM on an H200 returns wrong values when the
  // contraction is shorter than 512 (K = 128 and 256 measured wrong, 512 and 1024 right:
  // tests/gpu/scaled_mm_support.py); those GEMMs are emulated.
  const bool blocks =
      a.recipe.kind == ScalingKind::Block1x128 || a.recipe.kind == ScalingKind::Block128x128;
  if (blocks && k < 512) return refuse("block-scaled FP8 GEMMs need K >= 512 here");
  // What cuBLAS refused once (per recipes, shape and output type) is not tried again.
  const auto key = [&] {
    return combo() + " " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
           " " + c10::toString(out);
  };
  static std::mutex mu;
  static std::set<std::string> failed;
  static std::atomic<bool> any_failed{false};
  if (any_failed.load(std::memory_order_acquire)) {
    const std::lock_guard<std::mutex> lock(mu);
    if (failed.count(key())) return std::nullopt;
  }
  // Per-row and per-block scaling give bf16 out (what cuBLAS's FP8 kernels take).
  const at::ScalarType want =
      a.recipe.kind == ScalingKind::Tensorwise ? out : at::ScalarType::BFloat16;
  try {
    // Tensorwise: the same GEMM with the algorithm measured fastest (scaled_gemm_cuda.h),
    // straight from the codes and their one-element scales.
    if (tune && a.recipe.kind == ScalingKind::Tensorwise && want == out &&
        a.scale_inv.numel() == 1 && b.scale_inv.numel() == 1) {
      if (auto y = tuned_scaled_gemm(a.codes, *da, b.codes, *db, a.scale_inv.data_ptr<float>(),
                                     b.scale_inv.data_ptr<float>(), out, fast_accum))
        return y;
    }
    const auto sa = scale_arg(a, false), sb = scale_arg(b, true);
    if (!sa || !sb) return refuse("at::_scaled_mm takes no such scales");
    at::Tensor y = at::_scaled_mm(a.codes.view(*da), b.codes.view(*db).t(), *sa, *sb, std::nullopt,
                                  std::nullopt, want, fast_accum);
    return want == out ? y : y.to(out);
  } catch (const c10::Error& e) {
    {
      const std::lock_guard<std::mutex> lock(mu);
      failed.insert(key());
      any_failed.store(true, std::memory_order_release);
    }
    std::string what = e.what_without_backtrace();
    what = what.substr(0, what.find('\n'));
    return refuse("at::_scaled_mm refused it (" + what + ")");
  }
}

}  // namespace

at::Tensor dequant(const Operand& o) {
  at::Tensor out = at::empty(o.codes.sizes(), o.codes.options().dtype(at::kFloat));
  dequantize_cuda(o.codes.data_ptr<uint8_t>(), o.recipe, o.layout,
                  o.scale_inv.contiguous().data_ptr<float>(), out.data_ptr<float>(), stream());
  return out;
}

at::Tensor fp8_gemm(const Operand& a, const Operand& b, at::ScalarType out, bool fast_accum,
                    bool tune, Float8Probe* probe) {
  if (auto y = scaled_mm(a, b, out, fast_accum, tune)) {
    if (probe) probe->gemms_real++;
    return *y;
  }
  if (probe) probe->gemms_emulated++;
  return at::matmul(dequant(a), dequant(b).t()).to(out);
}

}  // namespace fp8wb::detail
