#!/bin/bash
# The install test's steps inside the fresh Debian root (install_test.sh runs each in its own
# namespaces, with the root as /): what a user does with the package, and checks of it.
#   in_root.sh install DEB VERSION   root: apt install ./DEB; the test user; a file list
#   in_root.sh use VERSION           the test user: vrnic demo, run, rping, sim
#   in_root.sh upgrade DEB VERSION DROPPED
#                                    root: apt install ./DEB, a newer version without the
#                                    file DROPPED; nothing else changes
#   in_root.sh remove DEB            root: apt remove; apt install ./DEB again and apt purge;
#                                    nothing of vrnic is left
# Works in /run/vrnic-test (a tmpfs of each step); the file lists are kept in /var/tmp.
set -u
here=/run/vrnic-test
state=/var/tmp/vrnic-test
user=tester
fail=0
check() {  # name expected actual
  if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
# Every file and symlink on the root, less the package managers' state, logs and this test's.
file_list() {
  find / -xdev \( -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/cache -o -path /var/log \
       -o -path "$state" \) -prune -o \( -type f -o -type l \) -print | sort
}

step_install() {
  local deb=$1 version=$2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || { echo "FAIL apt-get update"; return 1; }
  local t0=$SECONDS
  if ! apt install -y -q "$here/$deb" >"$here/apt.log" 2>&1; then
    tail -30 "$here/apt.log"; echo "FAIL apt install ./$deb"; return 1
  fi
  echo "time apt install ./$deb (with its dependencies and recommends): $((SECONDS - t0)) s"
  sed -n '/^The following NEW packages/,/^[^ ]/{/^The\|^  /p}' "$here/apt.log"
  check "installed version" "install ok installed $version" \
    "$(dpkg-query -W -f '${Status} ${Version}' vrnic)"
  useradd -m "$user" || return 1
  mkdir -p "$state"
  dpkg -L vrnic >"$state/vrnic.files"
  # The root as it is with vrnic installed, less vrnic's own files: what must remain after
  # its removal, and no more.
  file_list | grep -vxF -f "$state/vrnic.files" >"$state/before"
  return $fail
}

step_use() {
  local version=$1
  cd "$HOME" || return 1
  check "a user that is not root" 1 "$([ "$(id -u)" != 0 ] && echo 1)"
  check "vrnic on the PATH" /usr/bin/vrnic "$(command -v vrnic)"
  check "vrnic --version" "vrnic $version" "$(vrnic --version)"
  # The private mount namespace needs unprivileged user namespaces here, in this root.
  local gid_type err
  gid_type=$(vrnic run -- cat /sys/class/infiniband/vrnic0/ports/1/gid_attrs/types/0 2>"$here/err")
  err=$(cat "$here/err")
  check "vrnic run: the sysfs view, as a user, in this root" "RoCE v2|" "$gid_type|$err"
  local out
  out=$(vrnic run -- ibv_devinfo 2>&1)
  check "vrnic run -- ibv_devinfo" "hca_id:	vrnic0|PORT_ACTIVE (4)|Ethernet" \
    "$(grep -o 'hca_id:.*' <<<"$out")|$(grep -o 'PORT_ACTIVE (4)' <<<"$out")|$(grep -o 'Ethernet' <<<"$out")"
  local lib
  lib=$(vrnic run -- sh -c 'ldd "$(command -v ibv_devinfo)"' | awk '/libibverbs.so.1/ {print $3}')
  check "vrnic run: vrnic's libibverbs.so.1, not rdma-core's" private \
    "$(case $lib in /usr/lib/*/vrnic/libibverbs.so.1) echo private ;; *) echo "$lib" ;; esac)"

  local t0=$SECONDS
  vrnic demo >"$here/demo.log" 2>&1
  local rc=$? took=$((SECONDS - t0))
  cat "$here/demo.log"
  echo "time first vrnic demo: $took s"
  check "vrnic demo: exit status" 0 "$rc"
  check "vrnic demo: every case passed" 1 "$(grep -cE '^([0-9]+)/\1 passed$' "$here/demo.log")"

  # RDMA CM: an rping server (127.0.0.1, the first free address) and client (127.0.0.2);
  # -V verifies every ping's data, -v prints each on the client.
  vrnic run -- rping -s -a 127.0.0.1 -C 10 -V >"$here/rping.server" 2>&1 &
  local server=$! rc
  # Its device's UDP socket, 127.0.0.1:4791, then a moment for rdma_listen.
  for _ in $(seq 100); do grep -q ' 0100007F:12B7 ' /proc/net/udp && break; sleep 0.1; done
  sleep 1
  for attempt in 1 2 3; do
    timeout 60 vrnic run -- rping -c -a 127.0.0.1 -C 10 -v -V >"$here/rping.client" 2>&1
    rc=$?
    # A client that came before the server listened is rejected (reason 8): once more.
    [ $rc != 0 ] && grep -q 'REJECTED' "$here/rping.client" && { sleep 1; continue; }
    break
  done
  check "rping client: exit status" 0 $rc
  timeout 30 tail --pid=$server -f /dev/null
  wait $server
  check "rping server: exit status" 0 $?
  check "rping client: ten pings" 10 "$(grep -c '^ping data: rdma-ping-' "$here/rping.client")"
  if [ $fail != 0 ]; then
    echo "-- rping server:"; cat "$here/rping.server"; echo "-- rping client:"; cat "$here/rping.client"
  fi

  out=$(vrnic sim run incast-pfc --out "$here/sim" 2>&1)
  check "vrnic sim run incast-pfc: exit status" 0 $?
  check "vrnic sim run incast-pfc: every flow" "flows 32/32 completed (0 failed)" \
    "$(grep -o 'flows [0-9/]* completed ([0-9]* failed)' <<<"$out")"
  check "sim: summary.json" "incast-pfc 32" \
    "$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["scenario"], s["flows_completed"])' "$here/sim/summary.json")"
  check "sim: the scenario files" "$(vrnic sim list | cut -d' ' -f1 | sort | tr '\n' ' ')" \
    "$(ls /usr/share/vrnic/scenarios | sed 's/\.json$//' | sort | tr '\n' ' ')"
  check "bash completion" "complete -F _vrnic vrnic" \
    "$(bash -c 'source /usr/share/bash-completion/completions/vrnic && complete -p vrnic')"
  check "manual pages" "vrnic-run.1.gz vrnic.1.gz" "$(cd /usr/share/man/man1 && echo vrnic*)"
  # Every program has exited: none left a file behind.
  check "nothing left in /dev/shm" "" "$(ls -A /dev/shm)"
  check "nothing left in /tmp" "" "$(ls -A /tmp)"
  return $fail
}

step_upgrade() {
  local deb=$1 version=$2 dropped=$3
  export DEBIAN_FRONTEND=noninteractive
  check "before the upgrade: $dropped" 1 "$([ -f "$dropped" ] && echo 1)"
  apt install -y -q "$here/$deb" >"$here/apt.log" 2>&1 || { cat "$here/apt.log"; echo "FAIL apt install ./$deb"; return 1; }
  check "upgraded version" "install ok installed $version" \
    "$(dpkg-query -W -f '${Status} ${Version}' vrnic)"
  check "upgrade: the file the new version dropped is gone" "" "$(ls "$dropped" 2>/dev/null)"
  local files missing
  files=$(dpkg -L vrnic)
  missing=$(while read -r f; do [ -e "$f" ] || echo "$f"; done <<<"$files")
  check "upgrade: every file of the new version is there" "" "$missing"
  check "upgrade: no other file added or lost" "" \
    "$(diff "$state/before" <(file_list | grep -vxF -f <(echo "$files")) | grep '^[<>]' |
       grep -v " /home/$user/")"
  check "upgrade: vrnic runs" 0 "$(vrnic --version >/dev/null; echo $?)"
  return $fail
}

# Nothing of vrnic's is left: none of its files, no file more or less than before it was
# installed (less the test user's home), none of its directories.
nothing_left() {  # how it was removed
  local left
  left=$(while read -r f; do [ -f "$f" ] || [ -L "$f" ] && echo "$f"; done <"$state/vrnic.files")
  check "$1: none of vrnic's files is left" "" "$left"
  file_list >"$state/after"
  check "$1: no other file added or lost" "" \
    "$(diff "$state/before" "$state/after" | grep '^[<>]' | grep -v " /home/$user/")"
  check "$1: no directory of vrnic's is left" "" \
    "$(ls -d /usr/lib/*/vrnic /usr/share/vrnic /usr/share/doc/vrnic 2>/dev/null)"
}

step_remove() {
  local deb=$1
  export DEBIAN_FRONTEND=noninteractive
  apt remove -y -q vrnic >"$here/apt.log" 2>&1 || { cat "$here/apt.log"; echo "FAIL apt remove"; return 1; }
  check "apt remove: vrnic is gone" "" "$(command -v vrnic)"
  # It has no configuration files: dpkg forgets it at once (nothing for purge to do).
  check "apt remove: not known to dpkg" "" "$(dpkg-query -W -f '${Status}' vrnic 2>/dev/null)"
  nothing_left "apt remove"
  # Installed again (its dependencies are there), then purged.
  apt install -y -q "$here/$deb" >"$here/apt.log" 2>&1 || { cat "$here/apt.log"; echo "FAIL apt install again"; return 1; }
  check "installed again" /usr/bin/vrnic "$(command -v vrnic)"
  apt purge -y -q vrnic >"$here/apt.log" 2>&1 || { cat "$here/apt.log"; echo "FAIL apt purge"; return 1; }
  check "apt purge: not known to dpkg" "" "$(dpkg-query -W -f '${Status}' vrnic 2>/dev/null)"
  nothing_left "apt purge"
  return $fail
}

case ${1:-} in
  install) step_install "$2" "$3" ;;
  use) step_use "$2" ;;
  upgrade) step_upgrade "$2" "$3" "$4" ;;
  remove) step_remove "$2" ;;
  *) echo "usage: in_root.sh install DEB VERSION | use VERSION | upgrade DEB VERSION DROPPED | remove DEB" >&2; exit 2 ;;
esac
