// defines: analysis_detail::recommend(): the recommendation of one tensor's analysis,
// shared by checkpoint_analysis.cpp (which measures the recipes) and
// checkpoint_recommend.cpp (which picks among them). Private to core.
#pragma once

#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/kernels/format.h"

namespace fp8wb::analysis_detail {

// Fills a's recommendation from its recipes' figures; `e4m3` is the E4M3 format of the
// device (E4M3FN, or E4M3FNUZ on AMD GPUs).
void recommend(TensorAnalysis& a, Format e4m3);

}  // namespace fp8wb::analysis_detail
