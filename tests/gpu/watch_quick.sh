#!/usr/bin/env bash
# On a CUDA machine, in a short call: the fp8wb package's tests with the models on the GPU
# (each statistic against the CPU kernels'; every step's amax) and what watch() costs
# (tests/gpu/watch_overhead.py, two cycles of 25 steps). PART=watch in run.sh is the full one.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
BUILD=${BUILD:-build-gpu}
mkdir -p "$OUT"
TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
source tests/gpu/qt_env.sh >/dev/null  # Debian's libsqlite3-dev among .deps/qt-debs
extra=()
for d in .deps/qt-root/usr/include .deps/sqlite/usr/include; do
  if [ -f "$d/sqlite3.h" ] && [ ! -f /usr/include/sqlite3.h ]; then
    extra+=(-DSQLite3_INCLUDE_DIR=$PWD/$d -DSQLite3_LIBRARY=$(ls /usr/lib/x86_64-linux-gnu/libsqlite3.so.0* | head -1))
    break
  fi
done
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8WB_CUDA=ON -DFP8WB_GUI=OFF \
  -DFP8WB_BENCHMARKS=OFF -DCMAKE_PREFIX_PATH="$TP" "${extra[@]}" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
ninja -C "$BUILD" fp8wb_python fp8wb >>"$OUT/build.log" 2>&1 || { grep -E 'error' -A5 "$OUT/build.log" | head -40; exit 1; }
export PYTHONPATH="$PWD/$BUILD"
python3 -c 'import fp8wb; print("fp8wb_devices():", fp8wb._lib.fp8wb_devices())'
(cd tests/python && FP8WB_TEST_DEVICE=cuda FP8WB_BINARY="$PWD/../../$BUILD/app/fp8wb" \
   python3 -m unittest test_watch.WatchTest.test_transformer_50_steps_current_scaling \
   test_watch.WatchTest.test_delayed_scaling_follows_its_history \
   test_watch.WatchTest.test_every_steps_amax_is_stored_and_replays 2>&1 | tail -12)
timeout 120 python3 tests/gpu/watch_overhead.py --steps 50 2>&1 | tee "$OUT/watch_overhead.txt"
