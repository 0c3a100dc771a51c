#!/bin/sh
# Runs Debian's unmodified `ibv_devinfo -v` on vrnic's libibverbs.so.1 and checks what it
# prints: the device, an ACTIVE port with link layer Ethernet, a RoCE v2 GID, the vendor id
# and a node GUID; and that `ibv_devices`, which opens nothing, shows a non-zero GUID too.
# Usage: devinfo_test.sh LIBDIR
set -u
command -v ibv_devinfo >/dev/null || { echo "SKIP: no ibv_devinfo"; exit 0; }
out=$(env -u VRNIC_IP LD_LIBRARY_PATH=$1 LD_BIND_NOW=1 timeout 20 ibv_devinfo -v 2>&1)
rc=$?
fail=0
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; fail=1; }
for want in 'hca_id:[[:space:]]*vrnic0' 'state:[[:space:]]*PORT_ACTIVE \(4\)' \
            'link_layer:[[:space:]]*Ethernet' 'phys_state:[[:space:]]*LINK_UP \(5\)' \
            'max_mtu:[[:space:]]*4096 \(5\)' 'GID\[  0\]:[[:space:]]*[0-9a-f:.]+, RoCE v2' \
            'board_id:[[:space:]]*VRNIC' 'vendor_id:[[:space:]]*0x0?27672' \
            'vendor_part_id:[[:space:]]*30322' 'active_width:[[:space:]]*4X \(2\)' \
            'node_guid:[[:space:]]*[0-9a-f]{4}:7fff:fe[0-9a-f]{2}:[0-9a-f]{4}'; do
  echo "$out" | grep -Eq "$want" || { echo "FAIL: no line matching /$want/"; fail=1; }
done
# Without VRNIC_IP the GUID is that of the first free loopback address (02:00:7f:.. MAC).
devs=$(env -u VRNIC_IP LD_LIBRARY_PATH=$1 LD_BIND_NOW=1 timeout 20 ibv_devices 2>&1)
echo "$devs" | grep -Eq '^[[:space:]]*vrnic0[[:space:]]+00007ffffe[0-9a-f]{6}$' ||
  { echo "FAIL: ibv_devices shows no loopback-derived node GUID:"; echo "$devs"; fail=1; }
[ $fail -eq 0 ] && echo "OK: ibv_devinfo -v shows vrnic0 ACTIVE, Ethernet, RoCE v2 GID" || echo "$out"
exit $fail
