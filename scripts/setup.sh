#!/usr/bin/env bash
# Installs what FP8 Workbench needs from Debian 12's packages and builds it (Release,
# Ninja, ccache) in ./build. Used by workbench.sh and test.sh; safe to run again.
#   setup.sh [packages] [build]: only those steps (test.sh times them apart); none: both.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(packages build)
for step in "${steps[@]}"; do
  case $step in
    packages | build) ;;
    *) echo "setup.sh: unknown step '$step': the steps are packages and build" >&2; exit 2 ;;
  esac
done
wants() { [[ " ${steps[*]} " == *" $1 "* ]]; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-pthread         # LibTorch 1.13 (CPU); OpenBLAS, else reference BLAS
  libgloo-dev                               # Gloo headers for c10d (data-parallel runs)
  libsqlite3-dev
  qt6-base-dev libqcustomplot-dev           # GUI: Qt 6 Widgets + QCustomPlot (Qt 6 build)
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
    xvfb xauth fonts-dejavu-core              # GUI tests and screenshots without a display
  clang libclang-rt-14-dev                  # the readers' fuzzers (libFuzzer, sanitizers)
  clang-format                              # the format check (scripts/check-format.sh)
  slurm-wlm munge                           # the Slurm sweep tests: a one-node cluster
                                            # (scripts/slurm-local.sh; nothing in /etc used)
  librsvg2-bin                              # the icon's PNG sizes (packaging/)
  desktop-file-utils appstream lintian      # the Debian package's checks (scripts/test-deb.sh)
  hipcc libamdhip64-dev                     # the kernels compiled as HIP for AMD GPUs (kernels/hip)
  python3-torch                             # the fp8wb package's tests, the Llama reference (1.13)
)

missing=()
wants packages || PACKAGES=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "== installing ${#missing[@]} Debian packages: ${missing[*]}"
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

wants build || exit 0
# Paths under the checkout are hashed relative to it: any clone reuses the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/tmp}/.cache/ccache}"
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
BUILD_DIR="${BUILD_DIR:-build}"
echo "== configuring ($BUILD_DIR)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${FP8WB_CMAKE_ARGS:-}
echo "== building on $(nproc) cores"
cmake --build "$BUILD_DIR" --parallel "$(nproc)"
