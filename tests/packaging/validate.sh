#!/usr/bin/env bash
# Runs a Debian validator (desktop-file-validate, appstreamcli) on a packaging file.
# Exits 77 (the test is skipped) when the tool is not installed; fails on any error or
# warning it reports, not only on its exit status.
set -uo pipefail
tool=$1
if ! command -v "$tool" >/dev/null 2>&1; then
  echo "SKIP: $tool is not installed (Debian packages desktop-file-utils, appstream)"
  exit 77
fi
output=$("$@" 2>&1)
rc=$?
[ -n "$output" ] && echo "$output"
if [ "$rc" -ne 0 ]; then
  echo "FAIL: $* exited with $rc"
  exit 1
fi
if grep -qE '(^|: )(error|warning)s?: |^[EW]: ' <<<"$output"; then
  echo "FAIL: $tool reported errors or warnings"
  exit 1
fi
echo "ok: $*"
