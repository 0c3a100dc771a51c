#!/usr/bin/env bash
# Proves that the include path of each layer admits exactly the layers it is declared over
# (cmake/layers.cmake): from every layer's include root, one header of every layer is
# preprocessed; it must be found for the layer itself and the layers below, and must not be
# found ("No such file or directory") for any other. Then every header of a layer is
# preprocessed in the layer's own context, so a header that includes upwards fails even if
# only sources of higher layers include it (test helpers, test_*.h, may include what the
# tests link). Run by ctest as layers.includes.
#   check_layers.sh <c++ compiler> <src dir> <layer>:<visible,layers>:<include root>...
set -uo pipefail
CXX=$1 SRC=$2
shift 2
declare -A VISIBLE ROOT PROBE
LAYERS=()
for arg in "$@"; do
  IFS=: read -r layer visible root <<<"$arg"
  LAYERS+=("$layer")
  VISIBLE[$layer]=",$visible,"
  ROOT[$layer]=$root
  # The layer's first header in name order stands for the layer.
  PROBE[$layer]=$(cd "$SRC" && find "$layer" -name '*.h' | LC_ALL=C sort | head -1)
  [ -n "${PROBE[$layer]}" ] || { echo "no header in src/$layer"; exit 1; }
done
[ ${#LAYERS[@]} -ge 2 ] || { echo "need at least two layers"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 up=0 down=0
for from in "${LAYERS[@]}"; do
  for to in "${LAYERS[@]}"; do
    printf '#include "%s"\n' "${PROBE[$to]}" >"$tmp/probe.cc"
    "$CXX" -std=c++20 -E -I"${ROOT[$from]}" "$tmp/probe.cc" -o /dev/null 2>"$tmp/err"
    rc=$?
    if [[ ${VISIBLE[$from]} == *",$to,"* ]]; then
      down=$((down + 1))
      if [ $rc -ne 0 ]; then
        echo "FAIL: $from cannot include ${PROBE[$to]}:"; head -3 "$tmp/err"; fail=1
      fi
    else
      up=$((up + 1))
      if [ $rc -eq 0 ]; then
        echo "FAIL: $from can include ${PROBE[$to]} (not a layer below it)"; fail=1
      elif ! grep -q 'No such file or directory' "$tmp/err"; then
        echo "FAIL: $from including ${PROBE[$to]} failed for another reason:"; head -3 "$tmp/err"
        fail=1
      else
        printf '%-9s -> %-28s refused: %s\n' "$from" "${PROBE[$to]}" "$(grep -m1 'fatal error' "$tmp/err" | sed 's/.*fatal error: //')"
      fi
    fi
  done
done
headers=0
for layer in "${LAYERS[@]}"; do
  while read -r h; do
    printf '#include "%s"\n' "$h" >"$tmp/probe.cc"
    if ! "$CXX" -std=c++20 -E -I"${ROOT[$layer]}" "$tmp/probe.cc" -o /dev/null 2>"$tmp/err"; then
      echo "FAIL: $h does not preprocess with the include path of $layer:"; head -3 "$tmp/err"
      fail=1
    fi
    headers=$((headers + 1))
  done < <(cd "$SRC" && find "$layer" -name '*.h' ! -name 'test_*.h' | LC_ALL=C sort)
done
echo "layers: ${#LAYERS[@]}; includes that must work: $down; includes that must fail: $up;" \
     "headers preprocessed in their own layer: $headers"
[ $fail -eq 0 ] && [ $down -gt 0 ] && [ $up -gt 0 ]
