#!/usr/bin/env bash
# On a CUDA machine, after `PART=kernels bash tests/gpu/run.sh` has built $BUILD: the SASS
# of the statistics kernel that counts bf16 tensors by value (E4M3FN, no transposed codes)
# and Nsight Compute's per-instruction executed counts and stall samples of
# its first all-statistics launch in the quantize benchmark (clocks untouched), under $OUT:
#   tile_keys.sass.gz    the kernel's SASS
#   stats-sass.csv.gz    per SASS instruction: executed count, stall samples
#   stats-details.txt    instruction mix, warp states, source counters
#   OUT=/tmp/out bash tests/gpu/profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
BUILD=${BUILD:-build-gpu}
mkdir -p "$OUT"
obj=$BUILD/kernels/CMakeFiles/fp8wb_kernels_cuda.dir/src/quantize_keys_cuda.cu.o
bench=$BUILD/tests/gpu/fp8wb_gpu_quantize_bench
[ -f "$obj" ] && [ -x "$bench" ] || { echo "build $BUILD first (PART=kernels bash tests/gpu/run.sh)"; exit 1; }
cuobjdump -sass "$obj" | awk '/Function : .*tile_keys_kernel.*FormatE0ELb0E/ {p = 1; print; next}
  /Function : / {p = 0} p' | gzip >"$OUT/tile_keys.sass.gz"
echo "tile_keys_kernel<E4M3FN, no transposed codes>: $(zcat "$OUT/tile_keys.sass.gz" | grep -cE "^\s+/\*[0-9a-f]{4}\*/") SASS instructions," \
  "$(zcat "$OUT/tile_keys.sass.gz" | grep -cE 'LDL|STL') local loads and stores"
# Past the 2 x 28 launches of the histogram-only case (the first the kernel takes; each
# case runs as launched, then queued): the third of all statistics.
ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:tile_keys_kernel<.fp8wb::Format.0" \
  --launch-skip 58 --launch-count 1 --import-source no --section SourceCounters --section WarpStateStats \
  --section InstructionStats --section LaunchStats --section Occupancy -f -o "$OUT/stats" "$bench" \
  >"$OUT/ncu-profile.log" 2>&1 || { tail -5 "$OUT/ncu-profile.log"; exit 1; }
ncu --import "$OUT/stats.ncu-rep" --page details >"$OUT/stats-details.txt" 2>&1
ncu --import "$OUT/stats.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip >"$OUT/stats-sass.csv.gz"
rm -f "$OUT/stats.ncu-rep"
grep -E "Registers Per|Achieved Occupancy|Local|Executed Instructions  |Warp Cycles Per Issued" "$OUT/stats-details.txt" | head
zcat "$OUT/stats-sass.csv.gz" | wc -l
