// defines: what exportable_plot.cpp and plot_style.cpp share (private to views/src).
#pragma once

namespace fp8wb::detail {

// A colour map's property: the rows x columns of blocks fill_block_map() gave it (QSize:
// columns, rows); the CSV export writes each block once by it.
inline constexpr const char* kBlockGrid = "fp8wbBlockGrid";

}  // namespace fp8wb::detail
