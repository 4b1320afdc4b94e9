#!/usr/bin/env bash
# E5 (docs/performance.md): the engine's GPT step on the CPU (fp32, no FP8, no reference;
# d_model 256, 4 layers, 4 heads, context 128, batch 16) against the same GPT in Debian's
# python3-torch eager (tests/gpu/gpt_peer.py), both on THREADS threads (2), in turn for
# ROUNDS rounds (3) so that a machine's drift falls on both alike. Prints each round's
# tokens/s (the median over the timed steps: the engine's stored wall-clock figure over its
# steps after the first two, the peer's after two warm-up steps) and the ratio.
#
#   tests/bench/gpt_cpu_peer.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-12}
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$THREADS
db=$(mktemp -d)/e5.sqlite
SHAPE=(--set d_model=256 --set layers=4 --set heads=4 --set context=128 --set batch=16)
for round in $(seq "$ROUNDS"); do
  "$BUILD/app/fp8wb" train --db "$db" --quiet "${SHAPE[@]}" --set fp8=false --set reference=false \
    --set steps=$((STEPS + 2)) --set stats_interval=0 --set sqnr_interval=0 --set name="engine $round" >/dev/null
  engine=$(/usr/bin/python3 - "$db" "engine $round" <<'PY'
import sqlite3, statistics, sys
db = sqlite3.connect(sys.argv[1])
v = [r[0] for r in db.execute(
    "select c.value from scalars c join series s on c.series_id = s.id join runs r on r.id = s.run_id "
    "where r.name = ? and s.name = 'wall_tokens_per_s' order by c.step", (sys.argv[2],))][1:]
print(f"{statistics.median(v):.0f}")
PY
)
  peer=$(/usr/bin/python3 tests/gpu/gpt_peer.py --device cpu --mode fp32 --d-model 256 --layers 4 \
    --heads 4 --context 128 --batch 16 --steps "$STEPS" --warmup 2 --threads "$THREADS" \
    | /usr/bin/python3 -c 'import json,sys; print(round(json.load(sys.stdin)["tokens_per_s"]))')
  echo "round $round: engine $engine tokens/s, PyTorch $(/usr/bin/python3 -c 'import torch;print(torch.__version__)') eager $peer tokens/s: $(/usr/bin/python3 -c "print(f'{$engine / $peer:.2f}x')")"
done
rm -rf "$(dirname "$db")"
