#!/usr/bin/env bash
# fp8-workbench --follow end to end: the CLI writes a run, the GUI (offscreen) follows the
# newest live run until 10 steps are stored and saves two tabs.
#   follow_option.sh FP8WB FP8_WORKBENCH OUTDIR
set -euo pipefail
cli=$1 gui=$2 out=$3
mkdir -p "$out"
db="$out/follow-option.sqlite"
rm -f "$db" "$db-wal" "$db-shm" "$out"/follow-option-*.png
"$cli" train --db "$db" --quiet --set name=followed --set steps=100000 --set d_model=32 \
  --set context=32 --set batch=4 >/dev/null &
writer=$!
trap 'kill -9 $writer 2>/dev/null || true' EXIT
for _ in $(seq 300); do
  "$cli" runs list --db "$db" 2>/dev/null | grep -q 'followed.*running' && break
  sleep 0.1
done
QT_QPA_PLATFORM=offscreen "$gui" --db "$db" --follow --wait-steps 10 --tab overview,scaling \
  --screenshot "$out/follow-option-{tab}.png"
test -s "$out/follow-option-overview.png" && test -s "$out/follow-option-scaling.png"
# The run is still being written: the list says so, with its step (after its FP8 settings).
"$cli" runs list --db "$db" | grep -E 'followed +running +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[0-9]+'  # recipe, scaling, margin, window, steps
kill -9 $writer; wait $writer 2>/dev/null || true
"$cli" runs list --db "$db" | grep -E 'followed +interrupted'
echo "followed, then interrupted: ok"
