#!/usr/bin/env bash
# test-deb.sh [BUILD_DIR]: makes the Debian package with scripts/make-deb.sh (a CPU
# build of its own in BUILD_DIR, default ./build-deb), installs it with apt-get, checks
# that every library the programs load belongs to a Debian package, runs the installed
# programs as a user would (fp8wb formats, a 20-step training run, the GUI's offscreen
# screenshot through the installed desktop entry's Exec line), checks the installed files,
# and removes the package again, whatever happened in between. Needs root or sudo, and apt.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build-deb}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PKG=fp8-workbench
APP_ID=org.fp8wb.Workbench

installed() {
  local status
  status=$(dpkg-query -W -f='${db:Status-Status}' "$PKG" 2>/dev/null) || return 1
  [ -n "$status" ] && [ "$status" != not-installed ]
}
if installed; then
  echo "test-deb: $PKG is installed on this machine already; this test installs and removes"
  echo "test-deb: it, so remove it first: apt-get remove $PKG"
  exit 1
fi

echo "== building the package (scripts/make-deb.sh $BUILD_DIR)"
deb=$(./scripts/make-deb.sh "$BUILD_DIR" | tail -1)
echo "$deb"
if command -v lintian >/dev/null; then
  echo "== lintian"
  # Clean of errors and warnings; the informational tags that stay are in docs/packaging.md.
  lintian --fail-on error,warning "$deb" 2> >(grep -v 'running with root privileges' >&2)
fi

tmp=$(mktemp -d)
cleanup() {
  local rc=$?
  if installed; then
    echo "== removing $PKG"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q "$PKG" >/dev/null ||
      $SUDO dpkg --remove "$PKG"
  fi
  rm -rf "$tmp"
  if installed || [ -e /usr/bin/fp8wb ] || [ -e /usr/bin/fp8-workbench ]; then
    echo "test-deb: $PKG is still installed"
    rc=1
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== installing $deb"
# apt-get installs a local file when its path has a slash; the dependencies are the
# build's own runtime libraries, there already.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "$(realpath "$deb")" >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log"; exit 1; }

fail() {
  echo "test-deb: $*"
  exit 1
}
echo "== the installed files"
for f in /usr/bin/fp8wb /usr/bin/fp8-workbench \
  /usr/share/applications/$APP_ID.desktop /usr/share/metainfo/$APP_ID.metainfo.xml \
  /usr/share/doc/$PKG/copyright /usr/share/doc/$PKG/changelog.gz \
  /usr/share/doc/$PKG/README.md /usr/share/doc/$PKG/docs/numerics.md \
  /usr/share/doc/$PKG/docs/images/formats.png \
  /usr/share/man/man1/fp8wb.1.gz /usr/share/man/man1/fp8-workbench.1.gz \
  /usr/share/icons/hicolor/scalable/apps/fp8-workbench.svg \
  /usr/lib/python3/dist-packages/fp8wb/__init__.py \
  /usr/lib/python3/dist-packages/fp8wb/libfp8wb_watch.so; do
  dpkg -S "$f" >/dev/null 2>&1 || fail "$f is not in the package"
done
for size in 16 32 48 64 128 256; do
  png=/usr/share/icons/hicolor/${size}x${size}/apps/fp8-workbench.png
  [ -f "$png" ] || fail "$png is not installed"
  # The PNG's width and height, big-endian at bytes 16 and 20 of its IHDR chunk.
  wh=$(od -An -tu1 -j16 -N8 "$png" | awk '{print $3*256+$4 "x" $7*256+$8}')
  [ "$wh" = "${size}x${size}" ] || fail "$png is $wh, not ${size}x${size}"
done
# Every library the programs load must come from a Debian package (a library found only
# through this machine's own setup, such as a CUDA toolkit in /usr/local, would be missing
# on the user's machine, and dpkg-shlibdeps cannot declare it).
owned() {
  local p=$1 r
  r=$(readlink -f "$p")
  for q in "$p" "$r" "${r#/usr}" "/usr$r"; do
    dpkg -S "$q" >/dev/null 2>&1 && return 0
  done
  return 1
}
for b in /usr/bin/fp8wb /usr/bin/fp8-workbench /usr/lib/python3/dist-packages/fp8wb/libfp8wb_watch.so; do
  while read -r name path; do
    [ "$path" != "not" ] || fail "$b needs $name, which is not found"
    owned "$path" || fail "$b needs $name ($path), which no Debian package provides"
  done < <(ldd "$b" | awk '$2 == "=>" && $3 != "" {print $1, $3}')
done
if command -v desktop-file-validate >/dev/null; then
  desktop-file-validate /usr/share/applications/$APP_ID.desktop
fi
if command -v appstreamcli >/dev/null; then
  appstreamcli validate --no-net /usr/share/metainfo/$APP_ID.metainfo.xml >/dev/null
fi
if command -v man >/dev/null; then
  for page in fp8wb fp8-workbench; do
    # A dpkg path-exclude (slim container images) may leave manual pages out.
    [ -f /usr/share/man/man1/$page.1.gz ] || { echo "note: /usr/share/man is excluded by dpkg"; continue; }
    MANWIDTH=80 man "$page" >/dev/null 2>"$tmp/man.err" || fail "man $page: $(cat "$tmp/man.err")"
  done
fi

# From the installed paths only, with a home of its own.
export PATH=/usr/bin:/bin HOME="$tmp/home" XDG_DATA_HOME="$tmp/home/data" \
  XDG_CONFIG_HOME="$tmp/home/config" XDG_RUNTIME_DIR="$tmp/runtime"
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
echo "== fp8wb formats 0.1"
fp8wb formats 0.1 >"$tmp/formats.txt"
# 0.1 in E4M3FN: code 0x1d = 2^(3-7) x 1.625 = 0.1015625.
grep -Eq '^E4M3FN +0x1d .* 0\.1015625 ' "$tmp/formats.txt" ||
  { cat "$tmp/formats.txt"; fail "fp8wb formats 0.1 does not give E4M3FN 0x1d = 0.1015625"; }

echo "== fp8wb train --set steps=20"
fp8wb train --set steps=20 --db "$tmp/runs.sqlite" --quiet
fp8wb runs list --db "$tmp/runs.sqlite" --json >"$tmp/runs.json"
run_stored() { # name-or-empty source steps: is such a run stored as finished?
  python3 - "$tmp/runs.json" "$@" <<'PY'
import json, sys
runs, name, source, steps = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.exit(not any(r["source"] == source and r["status"] == "finished" and r["steps"] == steps
                 and (not name or r["name"] == name) for r in runs))
PY
}
run_stored "" train 20 ||
  { cat "$tmp/runs.json"; fail "the training run is not stored as finished after 20 steps"; }

echo "== python3 -c 'import fp8wb' (Debian's python3)"
where=$(python3 -c 'import fp8wb; print(fp8wb.__file__)') || fail "Debian's python3 cannot import fp8wb"
[ "$where" = /usr/lib/python3/dist-packages/fp8wb/__init__.py ] || fail "python3 imports fp8wb from $where"
if python3 -c 'import torch' 2>/dev/null; then
  echo "== a watched PyTorch script (python3-torch)"
  python3 - "$tmp/runs.sqlite" <<'PY' || fail "a watched script did not run"
import sys, torch, fp8wb
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
with fp8wb.watch(model, db=sys.argv[1], name="watched", stats_interval=2) as w:
    for _ in range(5):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step(); w.step(loss=loss)
PY
  fp8wb runs list --db "$tmp/runs.sqlite" --json >"$tmp/runs.json"
  run_stored watched python 5 ||
    { cat "$tmp/runs.json"; fail "the watched run is not stored as finished after 5 steps"; }
fi

echo "== the GUI through the desktop entry's Exec line, offscreen"
exec_line=$(sed -n 's/^Exec=//p' /usr/share/applications/$APP_ID.desktop)
# The Exec line's words, less the desktop entry's field codes (%f, %U, ...).
read -ra words <<<"$exec_line"
command_line=()
for w in "${words[@]}"; do [[ $w == %? ]] || command_line+=("$w"); done
[ "$(command -v "${command_line[0]}")" = /usr/bin/fp8-workbench ] ||
  fail "the desktop entry's Exec=$exec_line does not start /usr/bin/fp8-workbench"
shot="$tmp/formats.png"
env -u DISPLAY -u WAYLAND_DISPLAY QT_QPA_PLATFORM=offscreen \
  "${command_line[@]}" --db "$tmp/runs.sqlite" --tab formats --value 0.1 --screenshot "$shot"
[ "$(od -An -tx1 -N8 "$shot" | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$shot is not a PNG"
[ "$(stat -c %s "$shot")" -gt 20000 ] || fail "$shot is too small to show the window"
if [ -n "${FP8WB_DEB_SCREENSHOT:-}" ]; then cp "$shot" "$FP8WB_DEB_SCREENSHOT"; fi
echo "== the package installs, runs and removes cleanly"
