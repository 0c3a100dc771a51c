#!/usr/bin/env bash
# Tests of the manual pages (man/): they format without a warning (as lintian checks them),
# vrnic.1 names every subcommand, vrnic-run.1 every option of `vrnic run --help`, every
# variable of the environment table in docs/live.md and every VRNIC_* variable the sources
# read (src/, tests aside), each number's entry with its range and its default.
# usage: man_test.sh PATH/TO/vrnic MAN_DIR docs/live.md SRC_DIR
set -u
vrnic="$1" dir="$2" live="$3" src="$4"
fail=0
check() {  # name expected actual
  if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
for page in vrnic.1 vrnic-run.1; do
  warnings=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 \
             man --warnings -E UTF-8 -l -Tutf8 -Z "$dir/$page" 2>&1 >/dev/null)
  check "$page formats without warnings" "" "$warnings"
done
# The words of each page as printed, hyphens plain (formatted once).
declare -A printed
for page in vrnic.1 vrnic-run.1; do
  printed[$page]=$(MANWIDTH=200 man -l "$dir/$page" 2>/dev/null | sed 's/\xe2\x80\x90/-/g')
done
text() { printf '%s\n' "${printed[$1]}"; }
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
# Every "VRNIC_..." literal of the sources is a variable vrnic reads (live/config.cc's
# LiveConfig, the CM's, vrnic run's own).
read_vars=$(grep -rhoE '"VRNIC_[A-Z0-9_]+"' "$src" --include='*.cc' --include='*.h' \
              --exclude='*_test.cc' | tr -d '"' | sort -u)
grep -q '^VRNIC_DEFER_US$' <<<"$read_vars" || { echo "FAIL no VRNIC_* literal under $src"; exit 1; }
missing=()
for var in $read_vars; do
  text vrnic-run.1 | grep -q "^ *$var$" || missing+=("$var")
done
check "vrnic-run.1: every variable the sources read" "" "${missing[*]}"
# A variable's entry: its heading line to the next variable's heading (or the next section).
entry() { text vrnic-run.1 | awk -v v="$1" '$1 == v && NF == 1 {on = 1; next}
                                            on && (/^ *VRNIC_[A-Z0-9_]+$/ || /^[A-Z]/) {exit}
                                            on'; }
incomplete=()
for var in $(grep -E '_(US|KB|QUEUES|TIMEOUT|RETRIES)$' <<<"$read_vars"); do
  e=$(entry "$var" | tr -s ' \n' ' ')
  grep -qE '[0-9]+ to [0-9]+' <<<"$e" && grep -q 'default' <<<"$e" || incomplete+=("$var")
done
check "vrnic-run.1: every number's range and default" "" "${incomplete[*]}"
exit $fail
