#!/usr/bin/env bash
# Sets everything up (Debian 12) and starts FP8 Workbench. Without a display it runs a
# headless demo instead: the format explorer in the terminal and a screenshot of the GUI.
#
#   ./scripts/workbench.sh --cuda   on an NVIDIA workstation: builds against the CUDA
#                                   LibTorch of python3's torch (real FP8 GEMMs) in
#                                   build-cuda and starts the GUI there
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--cuda" ]; then
  shift
  if ! torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null); then
    echo "workbench.sh --cuda: python3 cannot import torch. Install PyTorch with CUDA (e.g." >&2
    echo "  python3 -m pip install torch), whose LibTorch the workbench is built against." >&2
    exit 1
  fi
  if ! python3 -c 'import sys, torch; sys.exit(0 if torch.version.cuda else 1)'; then
    echo "workbench.sh --cuda: python3's torch ($(python3 -c 'import torch; print(torch.__version__)')) is a CPU build;" >&2
    echo "  install a CUDA build of PyTorch, or run ./scripts/workbench.sh for CPU emulation." >&2
    exit 1
  fi
  if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "workbench.sh --cuda: no nvcc (the CUDA compiler) on PATH or in /usr/local/cuda/bin;" >&2
    echo "  install the CUDA toolkit matching torch.version.cuda=$(python3 -c 'import torch; print(torch.version.cuda)')." >&2
    exit 1
  fi
  export BUILD_DIR="${BUILD_DIR:-build-cuda}"
  export FP8WB_CMAKE_ARGS="-DFP8WB_CUDA=ON -DCMAKE_PREFIX_PATH=$torch_prefix ${FP8WB_CMAKE_ARGS:-}"
fi
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
echo
db="$BUILD_DIR/demo-runs.sqlite"
echo "\$ fp8wb train --set steps=120 --db $db -- a tiny GPT with FP8 delayed scaling beside its fp32 reference"
"$CLI" train --set steps=120 --set name="headless demo" --db "$db" --quiet
"$CLI" runs list --db "$db"
if [ -x "$GUI" ]; then
  shot="$BUILD_DIR/fp8-workbench-formats.png"
  QT_QPA_PLATFORM=offscreen "$GUI" --screenshot "$shot" --tab formats --value 0.1 2>/dev/null
  run_shot="$BUILD_DIR/fp8-workbench-scaling.png"
  QT_QPA_PLATFORM=offscreen "$GUI" --db "$db" --preset "Tiny GPT: FP8 vs BF16" --steps 120 \
    --tab scaling --screenshot "$run_shot" 2>/dev/null
  echo
  echo "The GUI rendered offscreen to $shot and $run_shot (open them with any image viewer)."
fi
