// defines: ScalingKind, MxRounding, QuantRecipe, GroupLayout, ScaleSet, scale_for_amax(),
// compute_scales(), validate_recipe(): how a tensor is cut into groups that share a
// scale, and how each group's scale follows from its amax (numerics.md, "Scaling recipes").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8wb/kernels/format.h"
#include "fp8wb/kernels/name_table.h"

namespace fp8wb {

enum class ScalingKind : uint8_t {
  Tensorwise,    // one scale for the tensor
  Rowwise,       // one scale per row (per token for x, per output channel for w), along K
  Block1x128,    // DeepSeek-V3 activations/gradients: 1x128 groups along K
  Block128x128,  // DeepSeek-V3 weights: 128x128 tiles
  MX,            // OCP MX: 1x32 along K sharing an E8M0 scale
  NVFP4,         // 1x16 E2M1 blocks with E4M3 block scales and an fp32 global scale
};
inline constexpr ScalingKind kAllScalingKinds[] = {
    ScalingKind::Tensorwise,   ScalingKind::Rowwise, ScalingKind::Block1x128,
    ScalingKind::Block128x128, ScalingKind::MX,      ScalingKind::NVFP4};
struct ScalingKindEntry {
  ScalingKind value;
  std::string_view name;  // as fp8wb inspect and the statistics name it
};
inline constexpr ScalingKindEntry kScalingKinds[] = {
    {ScalingKind::Tensorwise, "tensorwise"},
    {ScalingKind::Rowwise, "rowwise"},
    {ScalingKind::Block1x128, "1x128"},
    {ScalingKind::Block128x128, "128x128"},
    {ScalingKind::MX, "mx"},
    {ScalingKind::NVFP4, "nvfp4"},
};
static_assert(names_cover_enum(kScalingKinds, ScalingKind::NVFP4));

enum class MxRounding : uint8_t {
  Floor,  // OCP spec: X = 2^(floor(log2 amax) - emax_elem)
  RCeil,  // torchao: X = 2^ceil(log2(amax / fmax))
};
struct MxRoundingEntry {
  MxRounding value;
  std::string_view name;
};
inline constexpr MxRoundingEntry kMxRoundings[] = {{MxRounding::Floor, "floor"},
                                                   {MxRounding::RCeil, "rceil"}};
static_assert(names_cover_enum(kMxRoundings, MxRounding::RCeil));

struct QuantRecipe {
  ScalingKind kind = ScalingKind::Tensorwise;
  Format format = Format::E4M3FN;
  Overflow overflow = Overflow::Saturate;
  int margin = 0;            // scale = (fmax / amax) / 2^margin (not for MX/NVFP4)
  bool pow2_scales = false;  // scale = 2^floor(log2(scale)) (not for MX/NVFP4)
  MxRounding mx_rounding = MxRounding::Floor;
  bool partial_blocks = false;  // allow a last, smaller block where the shape does not divide
};

std::string_view scaling_kind_name(ScalingKind k);  // "tensorwise", "rowwise", "1x128", ...
std::optional<ScalingKind> parse_scaling_kind(std::string_view name);
std::string recipe_name(const QuantRecipe& r);  // "E4M3FN 1x128", "MXFP8 E4M3FN floor"...

// How a rows x cols tensor (row-major, K = cols) is cut into groups.
struct GroupLayout {
  int64_t rows = 0, cols = 0;
  int64_t block_rows = 1, block_cols = 1;  // a group's extent
  int64_t group_rows = 1, group_cols = 1;  // how many groups along each dimension
  int64_t group_count() const { return group_rows * group_cols; }
  int64_t group_of(int64_t r, int64_t c) const {
    return (r / block_rows) * group_cols + c / block_cols;
  }
};

// Throws std::invalid_argument naming the problem: empty shapes are fine (no groups),
// negative shapes, blocks that do not divide the shape (unless partial_blocks), a format
// the recipe cannot use, margin out of [-64, 64].
GroupLayout make_layout(const QuantRecipe& r, int64_t rows, int64_t cols);
void validate_recipe(const QuantRecipe& r);

// Per-group scales: q = encode(x * scale), x ~ decode(q) * scale_inv.
struct ScaleSet {
  GroupLayout layout;
  std::vector<float> scale;
  std::vector<float> scale_inv;
  std::vector<uint8_t> scale_codes;  // MX: E8M0 codes; NVFP4: E4M3 block-scale codes
  float global_scale = 1.0f;         // NVFP4: the fp32 per-tensor scale
};

// The tensorwise/rowwise/block formula: fp32(fmax / max(fp64(amax), 1e-12)) / 2^margin,
// 1 for amax == 0 or non-finite, then optionally rounded down to a power of two.
float scale_for_amax(float amax, double fmax, int margin = 0, bool pow2 = false);
// MX: the E8M0 code of the block's shared scale X (elements are encoded as x / X).
uint8_t mx_scale_code(float amax, Format element, MxRounding rounding);

// From each group's amax (and, for NVFP4, the tensor's amax).
ScaleSet compute_scales(const QuantRecipe& r, const GroupLayout& layout,
                        const std::vector<float>& amax, float tensor_amax);

}  // namespace fp8wb
