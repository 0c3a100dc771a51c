#!/usr/bin/env bash
# Tests of the manual pages (man/): they format without a warning (as lintian checks them),
# vrnic.1 names every subcommand, vrnic-run.1 every option of `vrnic run --help` and every
# variable of the environment table in docs/live.md.
# usage: man_test.sh PATH/TO/vrnic MAN_DIR docs/live.md
set -u
vrnic="$1" dir="$2" live="$3"
fail=0
check() {  # name expected actual
  if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
for page in vrnic.1 vrnic-run.1; do
  warnings=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 \
             man --warnings -E UTF-8 -l -Tutf8 -Z "$dir/$page" 2>&1 >/dev/null)
  check "$page formats without warnings" "" "$warnings"
done
# The words of a page as printed, hyphens plain.
text() { MANWIDTH=200 man -l "$dir/$1" 2>/dev/null | sed 's/\xe2\x80\x90/-/g'; }
missing=()
for cmd in $("$vrnic" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 {print $1}'); do
  text vrnic.1 | grep -q "^ *$cmd\b" || missing+=("$cmd")
done
check "vrnic.1: every subcommand" "" "${missing[*]}"
missing=()
for opt in $("$vrnic" run --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
  text vrnic-run.1 | grep -q -- "^ *$opt\b" || missing+=("$opt")
done
check "vrnic-run.1: every option of vrnic run" "" "${missing[*]}"
missing=()
vars=$(sed -n '/^## Environment/,/^## /p' "$live" | grep -o '^| `VRNIC_[A-Z_]*' | tr -d '|` ')
[ -n "$vars" ] || { echo "FAIL no environment table in $live"; exit 1; }
for var in $vars; do
  text vrnic-run.1 | grep -q "^ *$var$" || missing+=("$var")
done
check "vrnic-run.1: every variable of docs/live.md" "" "${missing[*]}"
exit $fail
