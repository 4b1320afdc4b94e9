#!/usr/bin/env bash
# On a CUDA machine: build the quantize benchmark and profile the first launch of the
# statistics kernel and of the codes-only kernel with Nsight Compute (clocks untouched).
#   OUT=/tmp/out bash tests/gpu/profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
BUILD=${BUILD:-build-gpu}
mkdir -p "$OUT"
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
extra=()
if [ -f .deps/sqlite/usr/include/sqlite3.h ] && [ ! -f /usr/include/sqlite3.h ]; then
  extra+=(-DSQLite3_INCLUDE_DIR=$PWD/.deps/sqlite/usr/include -DSQLite3_LIBRARY=$(ls /usr/lib/x86_64-linux-gnu/libsqlite3.so* | head -1))
fi
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8WB_GUI=OFF -DFP8WB_CUDA=ON \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" "${extra[@]}" >"$OUT/profile-build.log" 2>&1 || exit 1
ninja -C "$BUILD" fp8wb_gpu_quantize_bench >>"$OUT/profile-build.log" 2>&1 || exit 1
for which in 1 0; do
  ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:quantize_fast_kernel.*Format.0, .bool.$which" \
    --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section LaunchStats --section ComputeWorkloadAnalysis \
    "$BUILD/tests/gpu/fp8wb_gpu_quantize_bench" >"$OUT/ncu-stats-$which.txt" 2>&1
  grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers Per|Stall|Issue Slots|Executed Ipc|Block Limit|Warp Cycles Per Issued" \
    "$OUT/ncu-stats-$which.txt" | head -40
done
