#!/usr/bin/env bash
# Sets everything up (Debian 12) and starts FP8 Workbench. Without a display it runs a
# headless demo instead: the format explorer in the terminal and a screenshot of the GUI.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD_DIR="${BUILD_DIR:-build}"
GUI="$BUILD_DIR/app/gui/fp8-workbench"
CLI="$BUILD_DIR/app/fp8wb"

if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x "$GUI" ]; then
  exec "$GUI" "$@"
fi

echo
echo "== No display: a headless tour of FP8 Workbench"
"$CLI" info
echo
echo "\$ fp8wb formats 0.1 448 1e-5 -- the same numbers in every format"
"$CLI" formats 0.1 448 1e-5
echo
echo "\$ fp8wb formats 1000 --format e4m3 --format e5m2 --overflow ieee"
"$CLI" formats 1000 --format e4m3 --format e5m2 --overflow ieee
echo
echo "\$ fp8wb formats --table fp4 -- all 16 codes of FP4 (E2M1)"
"$CLI" formats --table fp4
if [ -x "$GUI" ]; then
  shot="$BUILD_DIR/fp8-workbench-formats.png"
  QT_QPA_PLATFORM=offscreen "$GUI" --screenshot "$shot" --tab formats --value 0.1 2>/dev/null
  echo
  echo "The GUI rendered offscreen to $shot (open it with any image viewer)."
fi
