// defines: what the Sweeps tab's files share (sweeps_tab.cpp: the form, start, stop and
// collection; sweeps_store_reads.cpp: the sweep shown read; sweeps_heatmap.cpp: the
// heatmap, its slicers and the best setting; sweeps_cells.cpp: what a cell holds;
// sweeps_overlay.cpp: the overlaid loss curves): SweepRead and read_sweep(), a sweep's
// grid, points and status read on a connection of its own, and heat_gradient(), the
// heatmap's colours. Internal to views.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8wb/core/sweep/sweep.h"

class QCPColorGradient;

namespace fp8wb {
class RunStore;
}

namespace fp8wb::sweeps_detail {

// A sweep's grid and points, read on a connection of its own.
struct SweepRead {
  SweepSpec spec;
  std::vector<SweepPoint> points;
  SweepStatus status = SweepStatus::Running;
  std::string status_text;  // as shown (sweep_status_text())
  std::string runs_state;   // sweep_runs_state() when it was read
};

// The sweep's status and its trials' runs (id, status, live), as one string: two reads
// that give the same drew the same heatmap.
std::string sweep_runs_state(const RunStore& store, int64_t sweep_id);

SweepRead read_sweep(const std::string& path, int64_t sweep_id);

// Viridis (perceptually uniform, readable in grey) from its dark purple to its
// yellow-green at 0.9: its last tenth, a bright yellow, stands out too little from the
// plot's white for the scale's top (white itself would read as an empty cell).
QCPColorGradient heat_gradient();

}  // namespace fp8wb::sweeps_detail
