#!/usr/bin/env bash
# fp8-workbench --follow --wait-steps never waits without end: a run whose recorded writer
# is a live process that is not its writer (started after the run) is no live run, and a
# run whose recorded writer cannot be told from its own (a live process started before
# the run, which stores nothing) ends the wait after --wait-timeout with a message.
#   follow_bound.sh FP8WB FP8_WORKBENCH OUTDIR
set -euo pipefail
cli=$1 gui=$2 out=$3
mkdir -p "$out"
db="$out/follow-bound.sqlite"
rm -f "$db" "$db-wal" "$db-shm" "$out/follow-bound.png"
"$cli" train --db "$db" --quiet --set name=stale --set steps=3 --set d_model=32 \
  --set context=32 --set batch=4 >/dev/null
sleep 600 &
other=$!  # alive, and not the run's writer
trap 'kill $other 2>/dev/null || true' EXIT
owned_by() {  # HOST PID STARTED_AT: the run 'running' again, written by that process
  /usr/bin/python3 - "$db" "$1" "$2" "$3" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("UPDATE runs SET status = 'running', ended_at = NULL, owner_host = ?, owner_pid = ?, "
          "started_at = ?", (sys.argv[2], int(sys.argv[3]), sys.argv[4]))
c.commit()
PY
}
host=$(/usr/bin/python3 -c 'import socket; print(socket.gethostname())')

owned_by "$host" "$other" 2020-01-01T00:00:00Z
rc=0
said=$(QT_QPA_PLATFORM=offscreen timeout 300 "$gui" --db "$db" --follow --wait-steps 10 \
  --screenshot "$out/follow-bound.png" 2>&1) || rc=$?
echo "$said"
test "$rc" = 1 || { echo "exit status $rc, not 1"; exit 1; }
grep -q "no run is being written into $db" <<<"$said"

owned_by "$host" $$ "$(date -u +%Y-%m-%dT%H:%M:%SZ)"  # this shell: alive, started before
rc=0
said=$(QT_QPA_PLATFORM=offscreen timeout 300 "$gui" --db "$db" --follow --wait-steps 10 \
  --wait-timeout 2 --screenshot "$out/follow-bound.png" 2>&1) || rc=$?
echo "$said"
test "$rc" = 1 || { echo "exit status $rc, not 1"; exit 1; }
grep -q "stored no new step for 2 s (3 of the 10 steps waited for are stored)" <<<"$said"
test ! -e "$out/follow-bound.png"
echo "bounded waits: ok"
