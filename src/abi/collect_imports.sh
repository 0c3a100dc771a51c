#!/bin/sh
# Regenerates imported_symbols.txt: every libibverbs symbol (name@version) that Debian 12's RDMA
# programs and the libraries they load import. Usage: collect_imports.sh > imported_symbols.txt
set -eu
L=/usr/lib/x86_64-linux-gnu
files=$( {
  for pkg in perftest ibverbs-utils qperf rdmacm-utils; do dpkg -L "$pkg" | grep '^/usr/bin/'; done
  echo $L/librdmacm.so.1 $L/libmlx5.so.1 $L/libmlx4.so.1 $L/libefa.so.1 $L/libmana.so.1
  echo $L/rsocket/librspreload.so
  ls $L/libibverbs/*.so
} | tr ' ' '\n' | sort -u)
echo "# libibverbs symbols imported by Debian 12 RDMA programs and libraries (rdma-core 44.0,"
echo "# perftest 4.5-0.17, qperf 0.4.11). Made by collect_imports.sh; checked by symbols_test.sh."
echo "# 'file:' lines name the importers; the rest are 'symbol@version importer...'."
for f in $files; do
  [ -f "$f" ] && file -L "$f" | grep -q ELF || continue
  readelf --dyn-syms -W "$f" | grep -q '@IBVERBS_' || continue
  echo "file: $f"
done
for f in $files; do
  [ -f "$f" ] && file -L "$f" | grep -q ELF || continue
  readelf --dyn-syms -W "$f" |
    awk -v f="$(basename "$f")" '$7 == "UND" && $8 ~ /@IBVERBS_/ { sub(/ \([0-9]+\)$/, "", $8); print $8, f }'
done | sort -u | awk '{ a[$1] = a[$1] " " $2 } END { for (s in a) print s a[s] }' | sort
