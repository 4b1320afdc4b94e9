#!/usr/bin/env bash
# On a CUDA machine: the llama's checks and its speed beside PyTorch.
#   OUT=/tmp/out bash tests/gpu/llama_gpu.sh build   # configure and build fp8wb and the tests
#   OUT=/tmp/out bash tests/gpu/llama_gpu.sh run     # tests, then tokens/s at a SmolLM-135M shape
# The tests: the llama's checks against the Python reference (python3's torch there), the
# GPU's bf16 logits among them. The speed: `fp8wb train --set model=llama` at d_model 576,
# 30 layers, 9 heads, 3 key/value heads, vocabulary 49152, context 1024, batch 8, bf16, without
# and with FP8 (tensorwise current scaling, no statistics, no reference), and the same model
# in PyTorch (tests/gpu/llama_peer.py, eager and torch.compile), in one call.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
BUILD=${BUILD:-build-gpu}
mkdir -p "$OUT"
if [ "${1:-run}" = build ]; then
  TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  extra=()
  if [ ! -f /usr/include/sqlite3.h ] && [ -f .deps/sqlite/usr/include/sqlite3.h ]; then
    extra+=(-DSQLite3_INCLUDE_DIR=$PWD/.deps/sqlite/usr/include
            -DSQLite3_LIBRARY=$(ls /usr/lib/x86_64-linux-gnu/libsqlite3.so.0* | head -1))
  fi
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8WB_CUDA=ON -DFP8WB_GUI=OFF \
    -DCMAKE_PREFIX_PATH="$TP" "${extra[@]}" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  ninja -C "$BUILD" fp8wb fp8wb_core_torch_tests >>"$OUT/build.log" 2>&1 ||
    { grep -E 'error' -A5 "$OUT/build.log" | head -60; exit 1; }
  echo "built"
  exit 0
fi
FP8WB_PYTHON=python3 "$BUILD/tests/fp8wb_core_torch_tests" \
  --gtest_filter='LlamaReference.*:SmoothSwiglu.*' >"$OUT/tests.log" 2>&1
grep -E '^\[  (FAILED|PASSED|SKIPPED) |error|relative|logit error' "$OUT/tests.log"
shape=(--set model=llama --set d_model=576 --set intermediate=1536 --set layers=30 --set heads=9
       --set kv_heads=3 --set vocab=49152 --set context=1024 --set batch=8 --set dtype=bf16
       --set reference=false --set stats_interval=0 --set sqnr_interval=0 --set steps=${STEPS:-40}
       --set scaling=current --set log_interval=1)
for fp8 in false true; do
  "$BUILD/app/fp8wb" train --db "$OUT/llama.sqlite" --device cuda "${shape[@]}" --set fp8=$fp8 \
    --set name=llama-fp8-$fp8 --json | tee -a "$OUT/engine.json"
done
for mode in eager compile; do
  python3 tests/gpu/llama_peer.py --mode "$mode" --json "$OUT/peer.json" 2>"$OUT/peer-$mode.err" ||
    tail -5 "$OUT/peer-$mode.err"
done
