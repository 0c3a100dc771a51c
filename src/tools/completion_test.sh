#!/usr/bin/env bash
# Tests of the bash completion (vrnic.bash-completion): what each partial command line offers.
# usage: completion_test.sh vrnic.bash-completion PATH/TO/vrnic
set -u
source "$1"
vrnic="$2"
fail=0
complete_line() {  # the words of a command line, the last one being completed
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _vrnic
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}
check() {  # name expected actual
  if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
check "subcommands" "sim stats" "$(complete_line "$vrnic" s)"
check "run options" "--debug --direct" "$(complete_line "$vrnic" run --d)"
check "run: options after an option's value" "--no-sysfs" "$(complete_line "$vrnic" run --ip 127.0.0.1 --n)"
check "run: an option's value is not a program" "" "$(complete_line "$vrnic" run --ip 12)"
check "run: a program after the options" "ibv_devinfo" \
  "$(PATH=$(dirname "$(command -v ibv_devinfo 2>/dev/null || echo /nonexistent)"):/nonexistent \
     complete_line "$vrnic" run --stats -- ibv_devin | tr ' ' '\n' | grep -x ibv_devinfo)"
offered=$(complete_line "$vrnic" run -- sh --st)
check "run: the program's arguments are not vrnic's options" "" "${offered//*--stats*/--stats}"
check "sim" "list run" "$(complete_line "$vrnic" sim "")"
check "sim run: scenario names from vrnic sim list" "incast-nopfc incast-pfc" \
  "$(cd /nonexistent 2>/dev/null; complete_line "$vrnic" sim run incast)"
check "sim run options" "--out" "$(complete_line "$vrnic" sim run incast-pfc --o)"
check "stats" "--all" "$(complete_line "$vrnic" stats --a)"
exit $fail
