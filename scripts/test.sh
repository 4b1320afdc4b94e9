#!/usr/bin/env bash
# Sets everything up (Debian 12), builds, and runs every test: unit, CLI, GUI (offscreen)
# and GPU tests (which skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD_DIR="${BUILD_DIR:-build}"
export QT_QPA_PLATFORM=offscreen
ctest --test-dir "$BUILD_DIR" --output-on-failure --parallel "$(nproc)" --timeout 600
