#!/bin/sh
# Runs Debian's unmodified `ibv_devinfo -v` on vrnic's libibverbs.so.1 and checks what it
# prints: the device, an ACTIVE port with link layer Ethernet, and a RoCE v2 GID.
# Usage: devinfo_test.sh LIBDIR
set -u
command -v ibv_devinfo >/dev/null || { echo "SKIP: no ibv_devinfo"; exit 0; }
out=$(LD_LIBRARY_PATH=$1 LD_BIND_NOW=1 timeout 20 ibv_devinfo -v 2>&1)
rc=$?
fail=0
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; fail=1; }
for want in 'hca_id:[[:space:]]*vrnic0' 'state:[[:space:]]*PORT_ACTIVE \(4\)' \
            'link_layer:[[:space:]]*Ethernet' 'phys_state:[[:space:]]*LINK_UP \(5\)' \
            'max_mtu:[[:space:]]*4096 \(5\)' 'GID\[  0\]:[[:space:]]*[0-9a-f:.]+, RoCE v2' \
            'board_id:[[:space:]]*VRNIC'; do
  echo "$out" | grep -Eq "$want" || { echo "FAIL: no line matching /$want/"; fail=1; }
done
[ $fail -eq 0 ] && echo "OK: ibv_devinfo -v shows vrnic0 ACTIVE, Ethernet, RoCE v2 GID" || echo "$out"
exit $fail
