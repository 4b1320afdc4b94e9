#!/usr/bin/env bash
# check_man_page.sh PAGE PROGRAM: the manual page PAGE documents what PROGRAM's --help
# says, and nothing it no longer has. For fp8wb: every subcommand, every subcommand's
# long options and choices, and every config field; for fp8-workbench: every option.
# Then the page must render with man (when installed) without a warning.
set -euo pipefail
page=$1
program=$2
export QT_QPA_PLATFORM=offscreen LC_ALL=C.UTF-8
[ -f "$page" ] || { echo "FAIL: no manual page $page"; exit 1; }

# The page as text: troff's escaped hyphens and font changes removed.
text=$(sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\(dq/"/g' "$page")
helps=$(mktemp)
trap 'rm -f "$helps"' EXIT
failures=0
missing() {
  echo "FAIL: $page does not document $1"
  failures=$((failures + 1))
}

# The long options of one --help text: from the part of each option line before its
# description (two or more spaces), so that options named inside descriptions do not count.
long_options() {
  grep -E '^ +-' | sed -E 's/^ +//; s/ {2,}.*//' | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}
# The choices that CLI11 lists as TEXT:{a,b,c}.
choices() {
  grep -oE ':\{[^}]*\}' | tr -d ':{}' | tr ',' '\n' | sort -u
}

"$program" --help >"$helps" 2>/dev/null
name=$(basename "$program")
if [ "$name" = fp8wb ]; then
  subcommands=$(sed -n '/^Subcommands:/,$p' "$helps" | grep -E '^  [a-z]' | awk '{print $1}')
  [ -n "$subcommands" ] || { echo "FAIL: no subcommands in $program --help"; exit 1; }
  for sub in $subcommands; do
    grep -qE "^\.SS \"?fp8wb $sub( |\"|$)" <<<"$(sed -e 's/\\-/-/g' "$page")" ||
      missing "the subcommand '$sub' (a .SS \"fp8wb $sub ...\" heading)"
    "$program" "$sub" --help >"$helps.sub"
    for opt in $(long_options <"$helps.sub"); do
      grep -qF -- "$opt" <<<"$text" || missing "$opt of fp8wb $sub"
    done
    for choice in $(choices <"$helps.sub"); do
      grep -qwF -- "$choice" <<<"$text" || missing "the choice '$choice' of fp8wb $sub"
    done
    # "  The run: name <= 200 characters; seed [0, ...]; ...": each field's first word.
    fields=$(sed -n '/^Fields/,$p' "$helps.sub" | sed -nE 's/^  [A-Z][^:]*: //p' |
      sed 's/; /\n/g' | awk '{print $1}')
    if [ "$sub" = train ] && [ -z "$fields" ]; then
      echo "FAIL: no config fields in $program train --help"
      failures=$((failures + 1))
    fi
    for field in $fields; do
      grep -qwF -- "$field" <<<"$text" || missing "the config field '$field' (fp8wb $sub)"
    done
    cat "$helps.sub" >>"$helps"
  done
  rm -f "$helps.sub"
else
  for opt in $(long_options <"$helps"); do
    grep -qF -- "$opt" <<<"$text" || missing "$opt"
  done
  # Qt's own options (--help-all) may be named, not all documented.
  "$program" --help-all >>"$helps" 2>/dev/null || true
fi

# And nothing stale: every long option the page names is one the program has.
for opt in $(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$text" | sort -u); do
  grep -qF -- "$opt" "$helps" || {
    echo "FAIL: $page names $opt, which $name --help does not have"
    failures=$((failures + 1))
  }
done

if command -v man >/dev/null 2>&1; then
  warnings=$(MANWIDTH=80 man --warnings=w -l "$page" 2>&1 >/dev/null || true)
  if [ -n "$warnings" ]; then
    echo "FAIL: $page renders with warnings:"
    echo "$warnings"
    failures=$((failures + 1))
  fi
else
  echo "note: man is not installed: the page's rendering is not checked"
fi

[ "$failures" -eq 0 ] || exit 1
echo "ok: $page documents every subcommand, option and field of $name"
