#!/usr/bin/env bash
# Tests of the install rules (cmake/install.cmake): `cmake --install` into a scratch prefix
# gives the package's layout, and the installed vrnic finds its own libraries and scripts
# there, not the build tree's.
# usage: install_tree_test.sh BUILD_DIR BINDIR LIBDIR DATADIR MANDIR (CMAKE_INSTALL_*, relative)
set -u
build="$1" bindir="$2" libdir="$3" datadir="$4" mandir="$5"
fail=0
check() {  # name expected actual
  if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
if ! cmake --install "$build" --prefix "$prefix" >"$prefix.log" 2>&1; then
  cat "$prefix.log"; rm -f "$prefix.log"; echo "FAIL cmake --install"; exit 1
fi
rm -f "$prefix.log"
expected="$bindir/vrnic
$datadir/bash-completion/completions/vrnic
$datadir/vrnic/demo.py
$(cd "$(dirname "$0")/../sim/scenarios" && ls *.json | sed "s|^|$datadir/vrnic/scenarios/|")
$datadir/vrnic/sim-plots.py
$libdir/vrnic/libibverbs.so.1
$libdir/vrnic/librdmacm.so.1
$libdir/vrnic/vrnic-guard
$mandir/man1/vrnic-run.1
$mandir/man1/vrnic.1"
check "the installed files, and only those" "$(sort <<<"$expected")" \
  "$(cd "$prefix" && find . -type f -o -type l | sed 's|^\./||' | sort)"
vrnic="$prefix/$bindir/vrnic"
unset VRNIC_LIB_DIR
check "vrnic run: the installed libraries" "$(realpath "$prefix/$libdir/vrnic")" \
  "$("$vrnic" run --no-sysfs -- sh -c 'echo "${LD_LIBRARY_PATH%%:*}"')"
check "vrnic run: the installed CM guard" "$(realpath "$prefix/$libdir/vrnic")/vrnic-guard" \
  "$(env -u VRNIC_CM_GUARD "$vrnic" run --no-sysfs -- sh -c 'echo "$VRNIC_CM_GUARD"')"
check "vrnic devinfo: the installed library" "libibverbs.so.1: $(realpath "$prefix/$libdir/vrnic")/libibverbs.so.1" \
  "$("$vrnic" devinfo | grep '^libibverbs.so.1:')"
check "vrnic demo: the installed script" "usage: vrnic demo" \
  "$("$vrnic" demo --help | head -1 | cut -d' ' -f1-3)"
check "installed libraries carry no RUNPATH" "" \
  "$(readelf -d "$prefix/$libdir"/vrnic/*.so.1 "$prefix/$libdir/vrnic/vrnic-guard" "$vrnic" |
     grep -E 'RPATH|RUNPATH')"
rm "$prefix/$libdir/vrnic/libibverbs.so.1"
"$vrnic" run -- true 2>"$prefix/err"
check "vrnic run: no library is exit status 127" 127 $?
check "vrnic run: the message names where it looked" 1 \
  "$(grep -c "not found in $prefix/$bindir/.*$libdir/vrnic, $prefix/$bindir/../lib (" "$prefix/err")"
exit $fail
