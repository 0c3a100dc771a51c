#!/bin/sh
# Checks that every program and library of imported_symbols.txt loads against vrnic's
# libibverbs.so.1 with eager binding, and that each symbol@version it imports is exported.
# Usage: symbols_test.sh LIBDIR imported_symbols.txt
set -u
dir=$1
list=$2
lib=$dir/libibverbs.so.1
fail=0
[ -f "$lib" ] || { echo "FAIL: no $lib"; exit 1; }

# 1. Every imported symbol@version is defined by our library (default or compat version).
readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && $8 ~ /@/ { sub(/@@/, "@", $8); print $8 }' |
  sort -u > /tmp/vrnic_exports.$$
grep -v '^#' "$list" | grep -v '^file:' | awk '{ print $1 }' | sort -u > /tmp/vrnic_imports.$$
missing=$(comm -23 /tmp/vrnic_imports.$$ /tmp/vrnic_exports.$$)
rm -f /tmp/vrnic_exports.$$ /tmp/vrnic_imports.$$
if [ -n "$missing" ]; then
  echo "FAIL: not exported: $missing"
  fail=1
fi

# 2. The SONAME is exactly libibverbs.so.1.
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libibverbs.so.1 ] || { echo "FAIL: SONAME '$soname'"; fail=1; }

# 3. Each importer resolves every symbol against our library (ldd -r binds them all).
checked=0
for f in $(sed -n 's/^file: //p' "$list"); do
  [ -e "$f" ] || continue
  out=$(LD_LIBRARY_PATH=$dir LD_BIND_NOW=1 ldd -r "$f" 2>&1)
  if echo "$out" | grep -Eq 'undefined symbol|not found|version .* not found'; then
    echo "FAIL: $f"
    echo "$out" | grep -E 'undefined symbol|not found'
    fail=1
  fi
  case $f in
    */libibverbs/*) ;;  # providers are dlopened by rdma-core's library, not linked to it
    *) echo "$out" | grep -q "libibverbs.so.1 => $dir/libibverbs.so.1" ||
         { echo "FAIL: $f does not pick $lib"; fail=1; } ;;
  esac
  checked=$((checked + 1))
done
[ "$checked" -gt 0 ] || { echo "FAIL: no importer found"; fail=1; }

# 4. Programs really start (constructors of libmlx5/libefa call IBVERBS_PRIVATE_34 names).
for p in ibv_devices ib_write_bw ib_read_lat qperf; do
  path=$(command -v $p) || continue
  case $p in
    ibv_devices) out=$(LD_LIBRARY_PATH=$dir LD_BIND_NOW=1 timeout 10 "$path" 2>&1) ;;
    qperf) out=$(LD_LIBRARY_PATH=$dir LD_BIND_NOW=1 timeout 10 "$path" --version 2>&1) ;;
    *) out=$(LD_LIBRARY_PATH=$dir LD_BIND_NOW=1 timeout 10 "$path" --help 2>&1) ;;
  esac
  if echo "$out" | grep -q 'symbol lookup error\|error while loading'; then
    echo "FAIL: $p: $out" | head -3
    fail=1
  fi
  if [ $p = ibv_devices ] && ! echo "$out" | grep -q vrnic0; then
    echo "FAIL: ibv_devices does not list vrnic0: $out"
    fail=1
  fi
done

[ $fail -eq 0 ] && echo "OK: $checked importers load against $lib"
exit $fail
