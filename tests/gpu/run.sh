#!/usr/bin/env bash
# On a CUDA machine: build the project against the CUDA LibTorch found by python3, run
# every test (the GPU ones included), check the golden tables against ml_dtypes, run the
# benchmarks, write JSON and logs under $OUT, and print a short table last.
#
#   OUT=/tmp/out bash tests/gpu/run.sh
#   QUICK=1 ...   skips the MLP, codec and quantize benchmarks and the GPT runs (measured
#                 before; see docs/performance.md), keeping tests and checkpoint inspection
#   PART=ranks    (two GPUs) data-parallel runs through NCCL: two ranks against one on the
#                 tiny GPT (loss, per-rank scales, without the amax reduction), 2 GPUs
#                 against 1 in tokens/s, and `fp8wb bench --comm` over NCCL
#   PART=verify   build everything and run every test (GPU ones included), then stop;
#                 CTEST_ARGS="-L gpu": only those ctest selects
#   PART=kernels  only the GPU kernel and FP8 linear tests and benchmarks, and an ncu
#                 profile of the statistics kernel, for work on the kernels;
#                 PROFILE_STEP="fp8 rowwise current" (a variant of the MLP benchmark)
#                 adds the time of every kernel of its steps; NO_BENCH=1: the tests only;
#                 MLP_REPS=N: timed steps a variant in the MLP benchmark (20)
#   PART=trace    only the MLP benchmark at 16384 x 4096 (TRACE_D=2048: 16384 x 2048; bf16,
#                 tensorwise delayed with and without statistics) with nvidia-smi's clocks
#                 and power during each variant (clocks_summary.py), then its steps under
#                 the Kineto profiler, clocks as they run: GPU busy and idle time a step and
#                 every GPU operation, what statistics add, and the host's operators at a
#                 step's start (trace_summary.py); the traces are kept gzipped
#   PART=steps    only the MLP benchmark's tensorwise delayed variants at 16384 x 2048
#                 (TRACE_D=N: 16384 x N), and the tiny GPT's training steps on the GPU
#                 (`fp8wb bench --train-only --device cuda --rounds 3`, GPT_ROUNDS=N), where
#                 the host's time counts
#   PART=gemms    only the MLP's six FP8 GEMMs, at::_scaled_mm against every algorithm
#                 cuBLASLt's heuristic offers (times, and whether their bits agree)
#   PART=gpt      only the engine's GPT against the same GPT in PyTorch (tests/gpu/gpt_peer.py:
#                 eager bf16, torch.compile bf16, FP8 through torch._scaled_mm compiled) at
#                 two shapes (d_model 1024 x 4 layers, context 256, batch 32; and GPT-2 small:
#                 768 x 12 layers, context 1024, batch 8): tokens/s of one model (median),
#                 statistics every 25 steps and every step, the reference in lockstep, the
#                 allocator's peaks (E1-E4, E7); gpt.json and a table last. GPT_STEPS=N (120),
#                 PEERS="eager compile fp8" (the peers' modes), GPT_SHAPES="1024 4 16 256 32"
#                 (d_model layers heads context batch; ";" between shapes), GPT_QUICK=1 (the
#                 engine's bf16 and FP8 runs only); with .deps/base.tar (a git
#                 archive of an earlier commit) loss curves of both engines (BASE_SPEED=1:
#                 its figures too); Kineto traces of the d_model 1024 steps (engine, eager)
#   PART=stats    only what sampling statistics costs the GPT-2-small shape's FP8 steps
#                 (E3): Kineto traces of five steps sampling every step and of five plain
#                 ones, with the engine's own spans (FP8WB_TRACE_SCOPE: reading the step
#                 before, settling each layer's statistics, the batch, its publishing), then
#                 tests/gpu/stats_cost.py (statistics every step, every 25, none; tokens/s
#                 near and far from a sample, page faults; with .deps/base.tar the base
#                 engine's runs beside)
#   PART=watch    only the fp8wb Python package with this machine's PyTorch: its tests
#                 (tests/python, on the CPU), examples/watch_mlp.py on the GPU,
#                 examples/watch_torchao.py where torchao imports, and what watch() costs a
#                 GPT of d_model 1024 (tests/gpu/watch_overhead.py: <= 3 % at
#                 stats_interval=25, <= 1 % between samples)
#   PART=cpu      only the CPU figures beside PyTorch's: the quantize pass on one thread
#                 (each statistics loop) against PyTorch's cast and one read of the input
#                 (P4), and the emulated training steps of
#                 `fp8wb bench --train-only --device cpu` (P5)
#
# Missing headers (sqlite3.h on some GPU images) can be supplied under .deps/sqlite
# (dpkg -x of Debian's libsqlite3-dev).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
log() { echo "== $*"; }

TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
source tests/gpu/qt_env.sh  # Debian's Qt 6 from .deps/qt-debs, where the image has none
extra=("${QT_CMAKE_ARGS[@]}")
[ ${#QT_CMAKE_ARGS[@]} -gt 0 ] || extra+=(-DFP8WB_GUI=OFF)
sqlite_inc=""
for d in .deps/qt-root/usr/include .deps/sqlite/usr/include; do
  [ -f "$d/sqlite3.h" ] && [ ! -f /usr/include/sqlite3.h ] && sqlite_inc=$PWD/$d && break
done
if [ -n "$sqlite_inc" ]; then
  lib=$(ls /usr/lib/x86_64-linux-gnu/libsqlite3.so.0* 2>/dev/null | head -1)
  extra+=(-DSQLite3_INCLUDE_DIR=$sqlite_inc -DSQLite3_LIBRARY=$lib)
fi
# NCCL's header, for data-parallel runs on GPUs (PART=ranks, or NCCL_INCLUDE_DIR given):
# PyTorch's wheels keep it in site-packages.
if [ -z "${NCCL_INCLUDE_DIR:-}" ] && [ "${PART:-}" = ranks ]; then
  NCCL_INCLUDE_DIR=$(python3 -c 'import nvidia, os
print(next((os.path.join(p, "nccl", "include") for p in nvidia.__path__
            if os.path.exists(os.path.join(p, "nccl", "include", "nccl.h"))), ""))' 2>/dev/null)
  export NCCL_INCLUDE_DIR
fi
log "configure (LibTorch from $TORCH_PREFIX)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8WB_CUDA=ON \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX${QT_PREFIX:+;$QT_PREFIX}" "${extra[@]}" >"$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
grep -E 'fp8wb:' "$OUT/build.log"
if [ -z "${QUICK:-}" ] && [ "${PART:-}" != gpt ]; then
  log "what at::_scaled_mm takes here"
  python3 tests/gpu/scaled_mm_support.py >"$OUT/notes.txt" 2>&1
  python3 tests/gpu/mlp_gemms.py >>"$OUT/notes.txt" 2>&1
  cat "$OUT/notes.txt"
fi

# The engine before a change, for its figures beside the tree's in the same call:
# .deps/base.tar (git archive of that commit), built beside; BASE_FP8WB names its CLI
# (empty without the archive or when it does not build).
build_base() {
  BASE_FP8WB=""
  [ -f .deps/base.tar ] || return 0
  local start
  start=$(date +%s)
  rm -rf /tmp/fp8wb-base && mkdir -p /tmp/fp8wb-base && tar -xf .deps/base.tar -C /tmp/fp8wb-base
  if cmake -S /tmp/fp8wb-base -B /tmp/fp8wb-base/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8WB_CUDA=ON \
       -DCMAKE_PREFIX_PATH="$TORCH_PREFIX${QT_PREFIX:+;$QT_PREFIX}" "${extra[@]}" >"$OUT/base_build.log" 2>&1 \
     && ninja -C /tmp/fp8wb-base/build fp8wb >>"$OUT/base_build.log" 2>&1; then
    BASE_FP8WB=/tmp/fp8wb-base/build/app/fp8wb
    echo "the base engine built in $(( $(date +%s) - start )) s"
  else
    tail -20 "$OUT/base_build.log"
  fi
}

if [ "${PART:-}" = ranks ]; then
  log "build (fp8wb)"
  ninja -C "$BUILD" fp8wb >>"$OUT/build.log" 2>&1 || { grep -E 'error|Error' -A3 "$OUT/build.log" | head -60; exit 1; }
  grep -E "NCCL|nccl|Gloo" "$OUT/build.log" | head -3
  nvidia-smi -L
  FP8WB="$BUILD/app/fp8wb"
  db="$OUT/ranks.sqlite"
  rm -f "$db"
  TINY=(--set d_model=64 --set heads=4 --set layers=2 --set context=64 --set batch=16 --set steps=50
        --set warmup=5 --set stats_interval=5 --set sqnr_interval=0 --set reference=false
        --set device=cuda --set rank_timeout=120)
  log "two ranks (NCCL, one GPU each) against one rank with the whole batch"
  rc=0
  for scaling in delayed current; do
    "$FP8WB" train --db "$db" --quiet "${TINY[@]}" --set scaling=$scaling --set name="one-$scaling" || rc=1
    timeout 300 "$FP8WB" train --db "$db" --quiet --nproc 2 "${TINY[@]}" --set scaling=$scaling \
      --set name="two-$scaling" || rc=1
    timeout 300 "$FP8WB" train --db "$db" --quiet --nproc 2 "${TINY[@]}" --set scaling=$scaling \
      --set amax_reduction=false --set name="two-noreduce-$scaling" || rc=1
  done
  log "controls: one rank twice; two ranks against one without FP8 (GPU GEMMs' own drift)"
  "$FP8WB" train --db "$db" --quiet "${TINY[@]}" --set scaling=delayed --set name="one-again-delayed" || rc=1
  "$FP8WB" train --db "$db" --quiet "${TINY[@]}" --set fp8=false --set name="one-nofp8" || rc=1
  timeout 300 "$FP8WB" train --db "$db" --quiet --nproc 2 "${TINY[@]}" --set fp8=false \
    --set name="two-nofp8" || rc=1
  BIG=(--set d_model=1024 --set heads=16 --set layers=4 --set context=256 --set dtype=bf16
       --set steps=60 --set stats_interval=0 --set sqnr_interval=0 --set reference=false
       --set device=cuda --set rank_timeout=120)
  log "throughput: the same batch per GPU on 1 and on 2 GPUs (d_model 1024, 4 layers, bf16)"
  "$FP8WB" train --db "$db" --quiet "${BIG[@]}" --set batch=32 --set name=big-1gpu || rc=1
  timeout 300 "$FP8WB" train --db "$db" --quiet --nproc 2 "${BIG[@]}" --set batch=64 --set name=big-2gpu || rc=1
  log "FP8 weights across GPUs: fp8wb bench --comm (NCCL)"
  timeout 200 "$FP8WB" bench --comm --nproc 2 --device cuda --json >"$OUT/comm_nccl.json" 2>"$OUT/comm_nccl.err" || rc=1
  cat "$OUT/comm_nccl.json" "$OUT/comm_nccl.err" | head -40
  log "the same at 8192 x 8192 (past the collectives' latency)"
  timeout 200 "$FP8WB" bench --comm --nproc 2 --device cuda --rows 8192 --cols 8192 --json \
    >"$OUT/comm_nccl_8192.json" 2>>"$OUT/comm_nccl.err" || rc=1
  cat "$OUT/comm_nccl_8192.json"
  "$FP8WB" runs list --db "$db"
  python3 - "$db" "$OUT/ranks.json" <<'PY'
import json, sqlite3, statistics, sys
db = sqlite3.connect(sys.argv[1])
def series(run, name):
    return [v for (s, v) in db.execute(
        "select c.step, c.value from scalars c join series s on c.series_id = s.id "
        "join runs r on r.id = s.run_id where r.name = ? and s.name = ? order by c.step", (run, name))]
def ranks(run):
    return db.execute("select rs.step, rs.layer, rs.role, rs.rank, rs.scale from rank_scales rs "
                      "join runs r on r.id = rs.run_id where r.name = ?", (run,)).fetchall()
out = {}
for scaling in ("delayed", "current"):
    one, two, nored = (series(f"{p}-{scaling}", "loss") for p in ("one", "two", "two-noreduce"))
    rel = [abs(a - b) / abs(b) for a, b in zip(two, one)]
    relnr = [abs(a - b) / abs(b) for a, b in zip(nored, one)]
    def spread(rows):
        by = {}
        for step, layer, role, rank, scale in rows:
            by.setdefault((step, layer, role), set()).add(scale)
        return sum(1 for v in by.values() if len(v) > 1), len(by)
    out[scaling] = {"steps": [len(one), len(two)],
                    "max_rel_loss_first_10": max(rel[:10]) if rel else None,
                    "max_rel_loss_all": max(rel) if rel else None,
                    "no_reduction_max_rel_loss": max(relnr) if relnr else None,
                    "rank_scales_differing_with_reduction": spread(ranks(f"two-{scaling}")),
                    "rank_scales_differing_without": spread(ranks(f"two-noreduce-{scaling}"))}
def rel(a, b):
    r = [abs(x - y) / abs(y) for x, y in zip(series(a, "loss"), series(b, "loss"))]
    return {"first_10": max(r[:10]) if r else None, "all": max(r) if r else None}
out["one_rank_twice"] = rel("one-again-delayed", "one-delayed")
out["two_ranks_without_fp8"] = rel("two-nofp8", "one-nofp8")
t1, t2 = series("big-1gpu", "tokens_per_s")[10:], series("big-2gpu", "tokens_per_s")[10:]
out["tokens_per_s_1gpu"] = statistics.median(t1) if t1 else None
out["tokens_per_s_2gpu"] = statistics.median(t2) if t2 else None
out["statuses"] = dict(db.execute("select name, status from runs").fetchall())
json.dump(out, open(sys.argv[2], "w"), indent=1)
print(json.dumps(out, indent=1))
PY
  exit $rc
fi

if [ "${PART:-}" = watch ]; then
  log "build (the fp8wb Python package and its library; the CLI for its tests)"
  ninja -C "$BUILD" fp8wb_python fp8wb >>"$OUT/build.log" 2>&1 || { grep -E 'error|Error' -A3 "$OUT/build.log" | head -60; exit 1; }
  export PYTHONPATH="$PWD/$BUILD"
  log "tests/python with $(python3 -c 'import torch;print("PyTorch", torch.__version__)')"
  (cd tests/python && FP8WB_BINARY="$PWD/../../$BUILD/app/fp8wb" python3 -m unittest -v test_watch 2>&1 | tail -15)
  log "tests/python with the models on the GPU (its statistics against the CPU kernels')"
  python3 -c 'import fp8wb; print("fp8wb_devices():", fp8wb._lib.fp8wb_devices())'
  (cd tests/python && FP8WB_TEST_DEVICE=cuda FP8WB_BINARY="$PWD/../../$BUILD/app/fp8wb" \
     python3 -m unittest -v test_watch 2>&1 | tail -25)
  log "examples/watch_mlp.py on the GPU"
  python3 examples/watch_mlp.py --device cuda --steps 100 --db "$OUT/watch.sqlite" 2>&1 | tail -3
  if python3 -c 'import torchao' 2>/dev/null; then
    log "examples/watch_torchao.py"
    python3 examples/watch_torchao.py --steps 100 --db "$OUT/watch.sqlite" 2>&1 | tail -3
  else
    log "examples/watch_torchao.py: torchao does not import here (not run)"
  fi
  "$BUILD/app/fp8wb" runs list --db "$OUT/watch.sqlite"
  log "what watch() costs a GPT of d_model 1024"
  python3 tests/gpu/watch_overhead.py 2>&1 | tee "$OUT/watch_overhead.txt"
  exit "${PIPESTATUS[0]}"
fi

if [ "${PART:-}" = cpu ]; then
  log "build (CLI, CPU quantize benchmark)"
  start=$(date +%s)
  ninja -C "$BUILD" fp8wb fp8wb_quantize_bench >>"$OUT/build.log" 2>&1 || { grep -E 'error|Error' -A3 "$OUT/build.log" | head -60; exit 1; }
  echo "built in $(( $(date +%s) - start )) s"
  log "CPU quantize, one thread, beside PyTorch's cast (P4)"
  "$BUILD/tests/bench/fp8wb_quantize_bench" --benchmark_filter='BM_Memcpy|BM_ReadOnly|BM_TorchCast/./1/|BM_Quantize/./1/' \
    --benchmark_out="$OUT/cpu_quantize_bench.json" --benchmark_out_format=json 2>&1 | grep -E "BM_|Run on"
  log "CPU training steps (P5)"
  "$BUILD/app/fp8wb" bench --train-only --device cpu 2>&1 | tail -8
  exit 0
fi

if [ "${PART:-}" = stats ]; then
  log "build (CLI)"
  ninja -C "$BUILD" fp8wb >>"$OUT/build.log" 2>&1 || { grep -E 'error|Error' -A3 "$OUT/build.log" | head -60; exit 1; }
  nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
  S=(--set d_model=768 --set layers=12 --set heads=12 --set context=1024 --set batch=8 --set dtype=bf16
     --set sqnr_interval=0 --set lr=1e-4 --set warmup=10 --set reference=false)
  for si in 1 0; do
    log "Kineto trace, FP8, stats_interval=$si"
    rm -f /tmp/fp8wb-traced.sqlite*
    FP8WB_TRACE="$OUT/trace_stats$si.json" "$BUILD/app/fp8wb" train --db /tmp/fp8wb-traced.sqlite --device cuda \
      --quiet "${S[@]}" --set steps=30 --set stats_interval=$si >/dev/null || exit 1
    python3 tests/gpu/gpt_table.py --trace "$OUT/trace_stats$si.json"
  done
  gzip -f "$OUT"/trace_stats*.json
  build_base
  log "what statistics cost: every step, every 25, none (two rounds)${BASE_FP8WB:+; the base engine beside}"
  python3 tests/gpu/stats_cost.py "$BUILD/app/fp8wb" ${BASE_FP8WB:+--base "$BASE_FP8WB"} "${S[@]}"
  exit
fi

if [ "${PART:-}" = gpt ] || [ "${PART:-}" = gpttrace ]; then
  log "build (CLI, the trainer's GPU tests, the fast paths' CPU tests)"
  start=$(date +%s)
  ninja -C "$BUILD" fp8wb fp8wb_float8_gpu_tests fp8wb_core_torch_tests >>"$OUT/build.log" 2>&1 \
    || { grep -E 'error|Error' -A3 "$OUT/build.log" | head -60; exit 1; }
  echo "built in $(( $(date +%s) - start )) s"
  "$BUILD/tests/gpu/fp8wb_float8_gpu_tests" --gtest_filter='TrainerCuda*:BiasCuda*:Float8LinearCuda*' 2>&1 \
    | grep -E "^\[  (PASSED|FAILED|SKIPPED)|OK \]|FAILED|Failure|Expected|Which is|attention bf16|peak memory" | head -30
  "$BUILD/tests/fp8wb_core_torch_tests" --gtest_filter='FastPaths*' 2>&1 | grep -E "OK \]|FAILED|Failure|SKIPPED \]" | head
  FP8WB="$BUILD/app/fp8wb"
  db="$OUT/gpt.sqlite"
  rm -f "$db" "$OUT/gpt_peer.jsonl"
  if [ "${PART:-}" = gpttrace ]; then
    # PART=gpttrace: Kineto traces of five steps, the engine's (bf16, FP8) and the eager
    # peer's, at both shapes, summarised (gpt_table.py --trace); the compiled peer's figure.
    for shape in "1024 4 16 256 32" "768 12 12 1024 8"; do
      set -- $shape
      SHAPE=(--set d_model=$1 --set layers=$2 --set heads=$3 --set context=$4 --set batch=$5
             --set dtype=bf16 --set steps=30 --set sqnr_interval=0 --set stats_interval=0 --set reference=false)
      for fp8 in false true; do
        FP8WB_TRACE="$OUT/trace_d$1_fp8$fp8.json" "$FP8WB" train --db "$db" --device cuda --quiet "${SHAPE[@]}" \
          --set fp8=$fp8 --set name="d$1 fp8=$fp8" >/dev/null || exit 1
        python3 tests/gpu/gpt_table.py --trace "$OUT/trace_d$1_fp8$fp8.json"
      done
      python3 tests/gpu/gpt_peer.py --d-model $1 --layers $2 --heads $3 --context $4 --batch $5 \
        --mode eager --steps 30 --trace "$OUT/trace_d$1_peer.json" 2>/dev/null
      python3 tests/gpu/gpt_table.py --trace "$OUT/trace_d$1_peer.json"
      for mode in ${PEERS:-compile}; do
        timeout 300 python3 tests/gpu/gpt_peer.py --d-model $1 --layers $2 --heads $3 --context $4 \
          --batch $5 --mode $mode --steps 40 2>"$OUT/peer_${mode}_d$1.err" || tail -5 "$OUT/peer_${mode}_d$1.err"
      done
    done
    "$FP8WB" runs list --db "$db"
    gzip -f "$OUT"/trace_*.json
    exit 0
  fi
  build_base
  nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
  n=${GPT_STEPS:-120}
  shapes=("1024 4 16 256 32" "768 12 12 1024 8")  # GPT_SHAPES="D L H T B;...": others
  [ -n "${GPT_SHAPES:-}" ] && IFS=';' read -ra shapes <<<"$GPT_SHAPES"
  for shape in "${shapes[@]}"; do
    set -- $shape
    SHAPE=(--set d_model=$1 --set layers=$2 --set heads=$3 --set context=$4 --set batch=$5
           --set dtype=bf16 --set steps=$n --set sqnr_interval=0 --set lr=1e-4 --set warmup=10)
    tag="d$1"
    log "engine, $tag: bf16; FP8; FP8 + statistics every 25 steps and every step; FP8 + bf16 reference"
    "$FP8WB" train --db "$db" --device cuda --quiet "${SHAPE[@]}" --set reference=false --set fp8=false \
      --set stats_interval=0 --set name="$tag bf16" || exit 1
    "$FP8WB" train --db "$db" --device cuda --quiet "${SHAPE[@]}" --set reference=false \
      --set stats_interval=0 --set name="$tag fp8" || exit 1
    [ -n "${GPT_QUICK:-}" ] || "$FP8WB" train --db "$db" --device cuda --quiet "${SHAPE[@]}" --set reference=false \
      --set stats_interval=25 --set name="$tag fp8 stats25" || exit 1
    [ -n "${GPT_QUICK:-}" ] || "$FP8WB" train --db "$db" --device cuda --quiet "${SHAPE[@]}" --set reference=false \
      --set stats_interval=1 --set name="$tag fp8 stats1" || exit 1
    [ -n "${GPT_QUICK:-}" ] || "$FP8WB" train --db "$db" --device cuda --quiet "${SHAPE[@]}" --set reference=true \
      --set stats_interval=0 --set name="$tag fp8 + reference" || exit 1
    if [ -n "$BASE_FP8WB" ] && [ -n "${BASE_SPEED:-}" ]; then
      log "the base engine, $tag: bf16; FP8"
      "$BASE_FP8WB" train --db "$OUT/base.sqlite" --device cuda --quiet "${SHAPE[@]}" --set reference=false \
        --set fp8=false --set stats_interval=0 --set name="$tag bf16" || exit 1
      "$BASE_FP8WB" train --db "$OUT/base.sqlite" --device cuda --quiet "${SHAPE[@]}" --set reference=false \
        --set stats_interval=0 --set name="$tag fp8" || exit 1
    fi
    if [ "$tag" = d1024 ] && [ -z "${NO_TRACE:-}" ]; then
      log "Kineto traces of five steps, $tag: the engine's bf16 and FP8 steps, the eager peer's"
      for fp8 in false true; do
        FP8WB_TRACE="$OUT/trace_${tag}_fp8$fp8.json" "$FP8WB" train --db "$OUT/traced.sqlite" --device cuda \
          --quiet "${SHAPE[@]/#steps=$n/steps=30}" --set reference=false --set stats_interval=0 --set fp8=$fp8 \
          --set name="traced fp8=$fp8" >/dev/null || exit 1
        python3 tests/gpu/gpt_table.py --trace "$OUT/trace_${tag}_fp8$fp8.json"
      done
      python3 tests/gpu/gpt_peer.py --d-model $1 --layers $2 --heads $3 --context $4 --batch $5 \
        --mode eager --steps 20 --trace "$OUT/trace_${tag}_peer.json" >/dev/null 2>&1
      python3 tests/gpu/gpt_table.py --trace "$OUT/trace_${tag}_peer.json"
      gzip -f "$OUT"/trace_*.json
    fi
    log "PyTorch, $tag: eager bf16, torch.compile bf16, FP8 (torch._scaled_mm) compiled"
    for mode in ${PEERS:-eager compile fp8}; do
      timeout 400 python3 tests/gpu/gpt_peer.py --d-model $1 --layers $2 --heads $3 --context $4 \
        --batch $5 --mode $mode --steps 60 --json "$OUT/gpt_peer.jsonl" 2>"$OUT/peer_${mode}_${tag}.err" \
        || tail -5 "$OUT/peer_${mode}_${tag}.err"
    done
  done
  # Loss curves before and after (300 steps, FP8 tensorwise delayed beside its bf16
  # reference, statistics every 25 steps), each engine twice: the run-to-run spread.
  CURVE=(--set d_model=1024 --set layers=4 --set heads=16 --set context=256 --set batch=32
         --set dtype=bf16 --set steps=300 --set sqnr_interval=0 --set stats_interval=25)
  for i in $([ -z "${NO_CURVES:-}" ] && echo 1 2); do
    "$FP8WB" train --db "$OUT/curves.sqlite" --device cuda --quiet "${CURVE[@]}" --set name="after $i" || exit 1
    [ -n "$BASE_FP8WB" ] && { "$BASE_FP8WB" train --db "$OUT/curves.sqlite" --device cuda --quiet "${CURVE[@]}" \
      --set name="before $i" || exit 1; }
  done
  "$FP8WB" runs list --db "$db"
  "$FP8WB" runs show 1 --db "$db" | grep -iE "status|tokens" | head -4
  [ -f "$OUT/curves.sqlite" ] && "$FP8WB" runs list --db "$OUT/curves.sqlite"
  [ -f "$OUT/curves.sqlite" ] && python3 tests/gpu/gpt_table.py --curves "$OUT/curves.sqlite"
  [ -f "$OUT/base.sqlite" ] && python3 tests/gpu/gpt_table.py --base "$OUT/base.sqlite" "$db"
  python3 tests/gpu/gpt_table.py "$db" "$OUT/gpt_peer.jsonl" "$OUT/gpt.json"
  exit 0
fi

if [ "${PART:-}" = steps ]; then
  log "build (CLI, MLP benchmark)"
  start=$(date +%s)
  ninja -C "$BUILD" fp8wb fp8wb_float8_linear_bench >>"$OUT/build.log" 2>&1 || { grep -E 'error|Error' -A3 "$OUT/build.log" | head -60; exit 1; }
  echo "built in $(( $(date +%s) - start )) s"
  d=${TRACE_D:-2048}
  log "MLP block at 16384 x $d, tensorwise delayed (the host's share of a synchronised step)"
  "$BUILD/tests/gpu/fp8wb_float8_linear_bench" --only "tensorwise delayed" --d "$d" --reps "${MLP_REPS:-20}" \
    --json "$OUT/steps_mlp.json" | grep -v "GEMM "
  log "tiny GPT training steps on the GPU (host-bound: every launch counts)"
  "$BUILD/app/fp8wb" bench --train-only --device cuda --steps "${GPT_STEPS:-100}" \
    --rounds "${GPT_ROUNDS:-3}" 2>&1 | tail -8
  exit 0
fi

if [ "${PART:-}" = gemms ]; then
  log "build (GEMM algorithm benchmark)"
  ninja -C "$BUILD" fp8wb_gemm_algo_bench >>"$OUT/build.log" 2>&1 || { grep -E 'error|Error' -A3 "$OUT/build.log" | head -60; exit 1; }
  log "the MLP's six FP8 GEMMs: at::_scaled_mm against every algorithm cuBLASLt's heuristic offers"
  "$BUILD/tests/gpu/fp8wb_gemm_algo_bench" --json "$OUT/gemm_algos.json"
  exit $?
fi

if [ "${PART:-}" = trace ]; then
  log "build (MLP benchmark)"
  start=$(date +%s)
  ninja -C "$BUILD" fp8wb_float8_linear_bench >>"$OUT/build.log" 2>&1 || { grep -E 'error|Error' -A3 "$OUT/build.log" | head -60; exit 1; }
  echo "built in $(( $(date +%s) - start )) s"
  d=${TRACE_D:-4096}
  log "MLP steps, then five of each under the Kineto profiler, 16384 x $d"
  mkdir -p "$OUT/traces"
  # The GPU's clocks and power during each variant's timed steps (FP8 steps run at the
  # power limit).
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu \
    --format=csv,noheader,nounits -lms 10 >"$OUT/smi.csv" 2>/dev/null &
  smi=$!
  "$BUILD/tests/gpu/fp8wb_float8_linear_bench" --only "tensorwise delayed" --d "$d" --reps 20 \
    --json "$OUT/trace_bench.json" --trace "$OUT/traces" || exit 1
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  python3 tests/gpu/clocks_summary.py "$OUT/smi.csv" "$OUT/trace_bench.json"
  rm -f "$OUT/smi.csv"
  t="$OUT/traces/16384x${d}_"
  python3 tests/gpu/trace_summary.py "${t}bf16.json" "${t}fp8_tensorwise_delayed.json"
  python3 tests/gpu/trace_summary.py "${t}fp8_tensorwise_delayed.json" \
    "${t}fp8_tensorwise_delayed___stats.json" | tail -50
  python3 tests/gpu/trace_summary.py --start "${t}bf16.json" "${t}fp8_tensorwise_delayed.json" \
    "${t}fp8_tensorwise_delayed___stats.json" | cut -c1-130 | head -${START_LINES:-400}
  gzip -f "$OUT"/traces/*.json
  exit 0
fi

if [ "${PART:-}" = kernels ]; then
  log "build (kernels, GPU tests, benchmarks)"
  start=$(date +%s)
  ninja -C "$BUILD" fp8wb_gpu_tests fp8wb_float8_gpu_tests fp8wb_gpu_quantize_bench \
    fp8wb_float8_linear_bench fp8wb_gemm_algo_bench fp8wb_scaled_gemm_tests >>"$OUT/build.log" 2>&1 || { grep -E 'error|Error' -A3 "$OUT/build.log" | head -60; exit 1; }
  echo "built in $(( $(date +%s) - start )) s"
  log "GPU tests"
  "$BUILD/tests/gpu/fp8wb_gpu_tests" >"$OUT/gpu_tests.log" 2>&1; rc1=$?
  "$BUILD/tests/gpu/fp8wb_float8_gpu_tests" >"$OUT/float8_gpu_tests.log" 2>&1; rc2=$?
  "$BUILD/tests/gpu/fp8wb_scaled_gemm_tests" >>"$OUT/float8_gpu_tests.log" 2>&1 || rc2=1
  grep -E "FP8 conversion|FAILED|PASSED|Failure|Expected|Which is|first pattern" "$OUT/gpu_tests.log" "$OUT/float8_gpu_tests.log" | head -40
  [ -n "${NO_BENCH:-}" ] && exit $(( rc1 | rc2 ))
  log "benchmarks"
  "$BUILD/tests/gpu/fp8wb_gpu_quantize_bench" --json "$OUT/gpu_quantize_bench.json" | tail -25
  "$BUILD/tests/gpu/fp8wb_float8_linear_bench" --reps "${MLP_REPS:-20}" --json "$OUT/float8_linear_bench.json"
  log "the MLP's six FP8 GEMMs: at::_scaled_mm against every algorithm cuBLASLt's heuristic offers"
  "$BUILD/tests/gpu/fp8wb_gemm_algo_bench" --json "$OUT/gemm_algos.json"
  if command -v ncu >/dev/null; then
    # Past the 2 x 28 launches of the histogram-only case (the first the kernel takes; each
    # case runs as launched, then queued): the third of all statistics.
    log "the statistics kernel (tensorwise E4M3, bf16, all statistics; ncu, clocks untouched)"
    ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:tile_keys_kernel<.fp8wb::Format.0" \
      --launch-skip 58 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section LaunchStats --section ComputeWorkloadAnalysis \
      "$BUILD/tests/gpu/fp8wb_gpu_quantize_bench" >"$OUT/ncu-stats.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers Per|Issue Slots|Executed Ipc A|Block Limit|Warp Cycles Per Issued|Shared Memory Config|Local" \
      "$OUT/ncu-stats.txt" | head -30
    grep -iE "stall|spend|cycles" "$OUT/ncu-stats.txt" | grep -v "^\s*$" | cut -c1-220 | head -12
  fi
  if command -v ncu >/dev/null && [ -n "${PROFILE_STEP:-}" ]; then
    log "kernels of MLP steps (variant $PROFILE_STEP and bf16), 16384 x 4096 (ncu, clocks untouched)"
    timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
      "$BUILD/tests/gpu/fp8wb_float8_linear_bench" --only "=$PROFILE_STEP" --d 4096 --reps 1 >"$OUT/ncu-step.txt" 2>&1
    grep -E "gpu__time_duration|Invocations|\)x\(" "$OUT/ncu-step.txt" | sed -E 's/\(float, .*//; s/\(const .*//' | cut -c1-150 | head -120
  fi
  exit $(( rc1 | rc2 ))
fi

log "build"
start=$(date +%s)
ninja -C "$BUILD" >>"$OUT/build.log" 2>&1 || { grep -E 'error|Error' -A3 "$OUT/build.log" | head -60; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

log "tests"
QT_QPA_PLATFORM=offscreen ctest --test-dir "$BUILD" -j 8 --output-on-failure ${CTEST_ARGS:-} >"$OUT/ctest.log" 2>&1
ctest_rc=$?
tail -5 "$OUT/ctest.log"
gpu_skipped=$(grep -cE '^\s+[0-9]+ - .*\(Skipped\)' "$OUT/ctest.log" || true)  # ctest's closing list

if [ "${PART:-}" = verify ]; then
  grep -E "Failed|\*\*\*|Errors" "$OUT/ctest.log" | head -20
  if [ -z "${NO_BENCH:-}" ]; then
  log "benchmarks: GPU quantize, MLP block, CPU quantize beside PyTorch's cast, CPU training steps"
  "$BUILD/tests/gpu/fp8wb_gpu_quantize_bench" --json "$OUT/gpu_quantize_bench.json" | tail -17
  "$BUILD/tests/gpu/fp8wb_float8_linear_bench" --reps 10 --json "$OUT/float8_linear_bench.json" | tail -22
  if [ -x "$BUILD/tests/bench/fp8wb_quantize_bench" ]; then
    "$BUILD/tests/bench/fp8wb_quantize_bench" --benchmark_filter='BM_Memcpy|BM_ReadOnly|BM_TorchCast/./1/|BM_Quantize/./1/' \
      --benchmark_out="$OUT/cpu_quantize_bench.json" --benchmark_out_format=json 2>&1 | grep -E "BM_|Run on"
  fi
  "$BUILD/app/fp8wb" bench --train-only --device cpu 2>&1 | tail -8
  fi
  log "ranks on one GPU: two NCCL ranks need two GPUs, and are refused saying so"
  "$BUILD/app/fp8wb" train --db "$OUT/v.sqlite" --quiet --nproc 2 --set device=cuda --set steps=2 2>&1 | tail -2
  grep -E "NCCL|nccl" "$OUT/build.log" | head -2
  printf '%-28s %s\n' "ctest" "$(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
  printf '%-28s %s\n' "skipped tests" "$gpu_skipped"
  exit $ctest_rc
fi

log "golden tables against ml_dtypes here"
python3 tests/gpu/make_golden.py "$OUT/golden-now" >>"$OUT/ctest.log" 2>&1
if diff -r -q "$OUT/golden-now" tests/data/golden >/dev/null; then golden=identical; else golden=DIFFERENT; fi
rm -rf "$OUT/golden-now"
echo "committed golden tables: $golden"

log "PyTorch files for the checkpoint tests (what tests/data/pt holds)"
python3 tests/gpu/make_pt_files.py "$OUT/pt"
if cmp -s "$OUT/pt/expected.json" tests/data/pt/expected.json; then pt_files=identical; else pt_files=DIFFERENT; fi
echo "expected.json against tests/data/pt: $pt_files"

log "checkpoint inspection (P8)"
"$BUILD/tests/bench/fp8wb_inspect_bench" --mb "${INSPECT_MB:-1024}" --json "$OUT/inspect_bench.json"
big=$(mktemp -d)
python3 - "$big/model.pt" <<'PY'
import sys, torch
torch.manual_seed(0)
sd = {f"layers.{i}.{n}": torch.randn(s, dtype=torch.bfloat16) * 0.02
      for i in range(8) for n, s in [("attn.qkv.weight", (6144, 2048)), ("mlp.up.weight", (8192, 2048))]}
torch.save(sd, sys.argv[1])
PY
echo "a $(du -m "$big/model.pt" | cut -f1) MB state dict from torch.save: $("$BUILD/app/fp8wb" inspect "$big/model.pt" --device gpu --format E4M3FN 2>&1 | tail -1)"
rm -rf "$big"
for f in "$OUT"/pt/*.pt "$OUT"/pt/*.pth "$OUT"/pt/*.bin; do  # LibTorch here reads them too
  echo "$(basename "$f"): $("$BUILD/app/fp8wb" inspect "$f" --device gpu --format E4M3FN 2>&1 | tail -1)"
done

GUI="$BUILD/app/gui/fp8-workbench"
gui_rc=0
if [ -x "$GUI" ]; then
  log "the GUI trains on the GPU (offscreen): Tiny GPT preset on cuda:0, screenshots"
  db="$OUT/gui_runs.sqlite"
  rm -f "$db"
  GUI_SET=(--set device=cuda:0 --set d_model=1024 --set heads=16 --set layers=4 --set context=256
           --set batch=32 --set dtype=bf16 --set stats_interval=25 --set name=gui-cuda)
  export QT_QPA_PLATFORM=offscreen
  "$GUI" --db "$db" --preset "Tiny GPT: FP8 vs BF16" --steps "${GUI_STEPS:-300}" "${GUI_SET[@]}" \
    --tab overview,scaling,quantization --screenshot "$OUT/gui-{tab}.png" 2>&1 | grep -v propagateSizeHints
  gui_rc=${PIPESTATUS[0]}
  # The same config, headless: the GUI's own config_json, renamed.
  python3 - "$db" "$OUT/gui_config.json" <<'PY'
import json, sqlite3, sys
c = json.loads(sqlite3.connect(sys.argv[1]).execute("select config_json from runs where id = 1").fetchone()[0])
c["name"] = "headless"
json.dump(c, open(sys.argv[2], "w"))
PY
  "$BUILD/app/fp8wb" train "$OUT/gui_config.json" --db "$db" --quiet
  log "the GUI follows a run that the CLI writes"
  "$BUILD/app/fp8wb" train "$OUT/gui_config.json" --db "$db" --quiet --set name=followed \
    --set steps=600 >"$OUT/follow_writer.log" 2>&1 &
  writer=$!
  for _ in $(seq 100); do
    "$BUILD/app/fp8wb" runs list --db "$db" 2>/dev/null | grep -q 'followed.*running' && break
    sleep 0.2
  done
  "$BUILD/app/fp8wb" runs list --db "$db"
  "$GUI" --db "$db" --follow --wait-steps 150 --tab overview,scaling --screenshot "$OUT/follow-{tab}.png" 2>&1 \
    | grep -v propagateSizeHints
  wait $writer; echo "writer exit code: $?"
  "$BUILD/app/fp8wb" runs list --db "$db" | tee -a "$OUT/notes.txt"
  "$BUILD/app/fp8wb" runs show 1 --db "$db" | grep -E 'peak|status'
  log "bad input on the GPU"
  "$BUILD/app/fp8wb" train --db "$db" --quiet --set device=cuda:7 --set steps=2 2>&1 | tail -1
  timeout 120 "$BUILD/app/fp8wb" train "$OUT/gui_config.json" --db "$db" --quiet --set name=oom --set batch=100000 \
    --set steps=3 2>&1 | tail -1 | cut -c1-200
  python3 - "$db" "$OUT/gui.json" <<'PY'
import json, sqlite3, statistics, sys
db = sqlite3.connect(sys.argv[1])
def series(run, name):
    return [v for (s, v) in db.execute(
        "select c.step, c.value from scalars c join series s on c.series_id = s.id "
        "join runs r on r.id = s.run_id where r.name = ? and s.name = ? order by c.step", (run, name))]
out = {}
for run in ("gui-cuda", "headless", "followed"):
    tps = series(run, "tokens_per_s")[20:]
    mem = series(run, "mem_fp8"), series(run, "mem_ref")
    out[run] = {"median_tokens_per_s": statistics.median(tps) if tps else None,
                "mem_fp8_gb": mem[0][-1] / 1e9 if mem[0] else None,
                "mem_ref_gb": mem[1][-1] / 1e9 if mem[1] else None}
g, h = out["gui-cuda"]["median_tokens_per_s"], out["headless"]["median_tokens_per_s"]
out["gui_over_headless"] = g / h if g and h else None
out["statuses"] = dict(db.execute("select name, status from runs").fetchall())
json.dump(out, open(sys.argv[2], "w"), indent=1)
print(json.dumps(out, indent=1))
PY
  log "GPU out of memory mid-run: another process takes the GPU's free memory at step 40"
  python3 - "$db" >"$OUT/hog.log" 2>&1 <<'PY' &
import sqlite3, sys, time, torch
q = ("select max(c.step) from scalars c join series s on c.series_id = s.id join runs r "
     "on r.id = s.run_id where r.name = 'oom-mid' and s.name = 'loss'")
t0, step = time.time(), None
while time.time() - t0 < 180:
    try:
        step = sqlite3.connect(sys.argv[1], timeout=1).execute(q).fetchone()[0]
    except Exception:
        step = None
    if step is not None and step >= 40:
        break
    time.sleep(0.1)
free, total = torch.cuda.mem_get_info()
x = torch.empty(free - (32 << 20), dtype=torch.uint8, device="cuda")
print(f"took {x.numel() / 1e9:.1f} GB of the GPU at step {step}", flush=True)
time.sleep(60)
PY
  hog=$!
  timeout 300 "$GUI" --db "$db" --preset "Tiny GPT: FP8 vs BF16" --steps 3000 "${GUI_SET[@]}" --set name=oom-mid \
    --set sqnr_interval=10 --set stats_interval=5 --tab overview --screenshot "$OUT/oom-overview.png" 2>&1 \
    | grep -v propagateSizeHints | cut -c1-240
  echo "GUI exit code after the out-of-memory run: ${PIPESTATUS[0]}"
  cat "$OUT/hog.log"; kill $hog 2>/dev/null; wait $hog 2>/dev/null
  "$BUILD/app/fp8wb" runs list --db "$db" | grep oom-mid
fi

if [ -n "${QUICK:-}" ]; then
  log "QUICK: the MLP, codec and quantize benchmarks and the GPT runs are skipped"
else
log "benchmarks"
"$BUILD/tests/gpu/fp8wb_float8_linear_bench" --json "$OUT/float8_linear_bench.json"
"$BUILD/tests/gpu/fp8wb_gpu_bench" --json "$OUT/gpu_codec_bench.json"
"$BUILD/tests/gpu/fp8wb_gpu_quantize_bench" --json "$OUT/gpu_quantize_bench.json"
python3 - "$OUT/torch_cast.json" <<'PY'
import json, sys, torch
n = 1 << 28
x = torch.randn(n, device="cuda") * 30
def bench(fn, reps=30):
    for _ in range(3): fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b))
    return sorted(ts)[len(ts) // 2]
ms = bench(lambda: x.to(torch.float8_e4m3fn))
xb = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
def torch_current():
    amax = xb.abs().amax().float()
    scale = 448.0 / torch.clamp(amax, min=1e-12)
    return (xb.float() * scale).clamp(-448, 448).to(torch.float8_e4m3fn)
ms_q = bench(torch_current)
ms_cast_bf16 = bench(lambda: xb.to(torch.float8_e4m3fn))
ms_cpu = None
xc = x[: 1 << 24].cpu()
torch.set_num_threads(1)
import time
for _ in range(2): xc.to(torch.float8_e4m3fn)
t = time.perf_counter(); xc.to(torch.float8_e4m3fn); ms_cpu = (time.perf_counter() - t) * 1e3
print(f"torch CUDA cast fp32->e4m3fn, n={n}: {ms:.3f} ms, {n*5/ms/1e6:.1f} GB/s")
nq = 16384 * 4096
print(f"torch bf16 16384x4096: plain cast {ms_cast_bf16:.3f} ms; current scaling (amax, scale, cast) {ms_q:.3f} ms")
print(f"torch CPU cast fp32->e4m3fn, 1 thread, n={1<<24}: {ms_cpu:.1f} ms, {(1<<24)/ms_cpu/1e3:.0f} Melem/s")
json.dump({"cuda_ms": ms, "cuda_gbs": n * 5 / ms / 1e6, "cpu_1t_ms": ms_cpu, "cpu_1t_melem_s": (1 << 24) / ms_cpu / 1e3,
           "bf16_cast_ms": ms_cast_bf16, "bf16_current_scaling_ms": ms_q}, open(sys.argv[1], "w"))
PY
log "the GPT via the CLI: FP8 against bf16 (the database comes back in \$OUT)"
GPT=(--set d_model=2048 --set heads=16 --set layers=4 --set context=256 --set batch=32
     --set dtype=bf16 --set reference=false --set steps=${GPT_STEPS:-300} --set lr=1e-3
     --set stats_interval=0 --set sqnr_interval=0)
rm -f "$OUT/gpu_runs.sqlite"
for fp8 in false true; do
  "$BUILD/app/fp8wb" train --db "$OUT/gpu_runs.sqlite" --device cuda --quiet "${GPT[@]}" \
    --set fp8=$fp8 --set name="gpt-2048 fp8=$fp8" | tee -a "$OUT/notes.txt"
done
"$BUILD/app/fp8wb" train --db "$OUT/gpu_runs.sqlite" --device cuda --quiet "${GPT[@]}" \
  --set fp8=true --set stats_interval=25 --set sqnr_interval=50 --set reference=true \
  --set name="gpt-2048 fp8, statistics every 25 steps, bf16 reference" | tee -a "$OUT/notes.txt"
"$BUILD/app/fp8wb" runs list --db "$OUT/gpu_runs.sqlite" | tee -a "$OUT/notes.txt"
"$BUILD/app/fp8wb" bench --device cuda --steps 20 --set d_model=1024 --set heads=16 \
  --set context=256 --set batch=32 --set dtype=bf16 2>&1 | tee -a "$OUT/notes.txt"

if [ -x "$BUILD/tests/bench/fp8wb_codec_bench" ]; then
    "$BUILD/tests/bench/fp8wb_codec_bench" 2>&1 | grep -E 'BM_|Run on'
fi
fi
"$BUILD/app/fp8wb" info | tee -a "$OUT/notes.txt"

log "summary"
printf '%-28s %s\n' "ctest" "$(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
printf '%-28s %s\n' "skipped tests" "$gpu_skipped"
printf '%-28s %s\n' "golden vs ml_dtypes here" "$golden"
printf '%-28s %s\n' "tests/data/pt/expected.json" "$pt_files"
python3 - "$OUT" <<'PY'
import json, os, sys
o = sys.argv[1]
if os.path.exists(f"{o}/gui.json"):
    g = json.load(open(f"{o}/gui.json"))
    for run in ("gui-cuda", "headless", "followed"):
        r = g[run]
        print(f"GPT d1024 on the GPU, {run:<10} {r['median_tokens_per_s'] or 0:10.0f} tokens/s (median)"
              f"  peak memory FP8 {r['mem_fp8_gb'] or 0:.3f} GB, reference {r['mem_ref_gb'] or 0:.3f} GB")
    print(f"GUI open / headless throughput: {g['gui_over_headless'] or 0:.3f}; statuses {g['statuses']}")
i = json.load(open(f"{o}/inspect_bench.json"))
for r in i["rows"]:
    print(f"inspect {i['mb']:.0f} MB: {r['what']:<44} {r['s']:8.3f} s {r['gbs']:8.3f} GB/s")
if not os.path.exists(f"{o}/gpu_codec_bench.json"):
    sys.exit(0)
g = json.load(open(f"{o}/gpu_codec_bench.json"))
for r in g["rows"]:
    print(f"{r['what']:<34} {r['ms']:8.3f} ms {r['gbs']:8.1f} GB/s {100*r['of_copy']:6.1f}% of copy")
q = json.load(open(f"{o}/gpu_quantize_bench.json"))
for r in q["rows"]:
    print(f"{r['what']:<44} {r['ms']:8.3f} ms {r['gbs']:8.1f} GB/s {100*r['of_copy']:6.1f}% of copy")
f = json.load(open(f"{o}/float8_linear_bench.json"))
for r in f["rows"]:
    print(f"MLP {r['m']}x{r['d']} {r['variant']:<34} {r['ms']:8.3f} ms {r['speedup']:6.2f}x bf16")
t = json.load(open(f"{o}/torch_cast.json"))
print(f"{'torch bf16 cast 16384x4096':<44} {t['bf16_cast_ms']:8.3f} ms")
print(f"{'torch bf16 current scaling 16384x4096':<44} {t['bf16_current_scaling_ms']:8.3f} ms")
print(f"{'torch cast fp32->e4m3fn':<34} {t['cuda_ms']:8.3f} ms {t['cuda_gbs']:8.1f} GB/s")
print(f"{'torch CPU cast, 1 thread':<34} {t['cpu_1t_melem_s']:8.0f} Melem/s")
PY
[ "$gui_rc" -eq 0 ] || echo "the GUI run failed (exit code $gui_rc)"
exit $ctest_rc
