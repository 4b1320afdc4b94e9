#include "fp8wb/kernels/recipe.h"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <stdexcept>

#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/scale_math.h"

namespace fp8wb {

std::string_view scaling_kind_name(ScalingKind k) {
  return table_name(kScalingKinds, k);
}

std::optional<ScalingKind> parse_scaling_kind(std::string_view name) {
  std::string n;
  for (char c : name) n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (n == "tensorwise" || n == "tensor" || n == "per-tensor") return ScalingKind::Tensorwise;
  if (n == "rowwise" || n == "row" || n == "axiswise") return ScalingKind::Rowwise;
  if (n == "1x128" || n == "block1x128") return ScalingKind::Block1x128;
  if (n == "128x128" || n == "block128x128") return ScalingKind::Block128x128;
  if (n == "mx" || n == "mx1x32" || n == "1x32" || n == "mxfp8") return ScalingKind::MX;
  if (n == "nvfp4") return ScalingKind::NVFP4;
  return std::nullopt;
}

std::string recipe_name(const QuantRecipe& r) {
  std::string s =
      std::string(format_info(r.format).name) + " " + std::string(scaling_kind_name(r.kind));
  if (r.kind == ScalingKind::MX) s += " " + std::string(table_name(kMxRoundings, r.mx_rounding));
  if (r.margin != 0) s += " margin " + std::to_string(r.margin);
  if (r.pow2_scales) s += " pow2";
  return s;
}

void validate_recipe(const QuantRecipe& r) {
  const std::string name(format_info(r.format).name);
  if (r.format == Format::E8M0FNU) {
    throw std::invalid_argument("E8M0FNU holds scales, not elements: choose an element format");
  }
  if (r.kind == ScalingKind::NVFP4 && r.format != Format::E2M1FN) {
    throw std::invalid_argument("NVFP4 scaling needs E2M1FN elements, not " + name);
  }
  if (r.kind == ScalingKind::MX && (r.format == Format::E4M3FNUZ || r.format == Format::E5M2FNUZ)) {
    throw std::invalid_argument("MX scaling is defined for the OCP formats, not " + name);
  }
  if ((r.kind == ScalingKind::MX || r.kind == ScalingKind::NVFP4) &&
      (r.margin != 0 || r.pow2_scales)) {
    throw std::invalid_argument(
        "margin and power-of-2 rounding apply to tensorwise, rowwise and "
        "block scales, not to MX/NVFP4 (their scales are fixed by the format)");
  }
  if (r.margin < -64 || r.margin > 64) {
    throw std::invalid_argument("margin " + std::to_string(r.margin) +
                                " is out of range [-64, 64]");
  }
}

GroupLayout make_layout(const QuantRecipe& r, int64_t rows, int64_t cols) {
  validate_recipe(r);
  if (rows < 0 || cols < 0) {
    throw std::invalid_argument("tensor shape " + std::to_string(rows) + "x" +
                                std::to_string(cols) + " is negative");
  }
  GroupLayout g;
  g.rows = rows;
  g.cols = cols;
  switch (r.kind) {
    case ScalingKind::Tensorwise:
      g.block_rows = std::max<int64_t>(rows, 1);
      g.block_cols = std::max<int64_t>(cols, 1);
      break;
    case ScalingKind::Rowwise:
      g.block_rows = 1;
      g.block_cols = std::max<int64_t>(cols, 1);
      break;
    case ScalingKind::Block1x128:
      g.block_rows = 1;
      g.block_cols = 128;
      break;
    case ScalingKind::Block128x128:
      g.block_rows = 128;
      g.block_cols = 128;
      break;
    case ScalingKind::MX:
      g.block_rows = 1;
      g.block_cols = 32;
      break;
    case ScalingKind::NVFP4:
      g.block_rows = 1;
      g.block_cols = 16;
      break;
  }
  if (!r.partial_blocks && rows > 0 && cols > 0 &&
      (cols % g.block_cols != 0 || rows % g.block_rows != 0)) {
    throw std::invalid_argument(
        "a " + std::to_string(rows) + "x" + std::to_string(cols) + " tensor does not divide into " +
        std::string(scaling_kind_name(r.kind)) + " blocks of " + std::to_string(g.block_rows) +
        "x" + std::to_string(g.block_cols) + ": pad it, or allow partial blocks");
  }
  g.group_rows = rows == 0 || cols == 0 ? 0 : (rows + g.block_rows - 1) / g.block_rows;
  g.group_cols = rows == 0 || cols == 0 ? 0 : (cols + g.block_cols - 1) / g.block_cols;
  return g;
}

float scale_for_amax(float amax, double fmax, int margin, bool pow2) {
  return tensor_scale(amax, fmax, margin, pow2);
}

uint8_t mx_scale_code(float amax, Format element, MxRounding rounding) {
  const FormatInfo& info = format_info(element);
  return static_cast<uint8_t>(
      mx_scale_exponent(amax, info.emax, info.max_finite, rounding == MxRounding::RCeil) + 127);
}

ScaleSet compute_scales(const QuantRecipe& r, const GroupLayout& layout,
                        const std::vector<float>& amax, float tensor_amax) {
  const auto n = static_cast<size_t>(layout.group_count());
  if (amax.size() != n) {
    throw std::invalid_argument("compute_scales: " + std::to_string(amax.size()) +
                                " amax values for " + std::to_string(n) + " groups");
  }
  ScaleSet s;
  s.layout = layout;
  s.scale.resize(n);
  s.scale_inv.resize(n);
  const double fmax = format_info(r.format).max_finite;
  if (r.kind == ScalingKind::MX) {
    s.scale_codes.resize(n);
    for (size_t g = 0; g < n; ++g) {
      const uint8_t code = mx_scale_code(amax[g], r.format, r.mx_rounding);
      s.scale_codes[g] = code;
      s.scale_inv[g] = decode(code, codec_spec(Format::E8M0FNU));   // X
      s.scale[g] = std::ldexp(1.0f, 127 - static_cast<int>(code));  // 1 / X, exact
    }
    return s;
  }
  if (r.kind == ScalingKind::NVFP4) {
    const float g = nvfp4_global_scale(tensor_amax, fmax);
    s.global_scale = g;
    s.scale_codes.resize(n);
    for (size_t b = 0; b < n; ++b) {
      const Nvfp4BlockScale bs = nvfp4_block_scale(amax[b], g, fmax);
      s.scale_codes[b] = bs.code;
      s.scale[b] = bs.scale;
      s.scale_inv[b] = bs.scale_inv;
    }
    return s;
  }
  for (size_t g = 0; g < n; ++g) {
    s.scale[g] = scale_for_amax(amax[g], fmax, r.margin, r.pow2_scales);
    s.scale_inv[g] = 1.0f / s.scale[g];
  }
  return s;
}

}  // namespace fp8wb
