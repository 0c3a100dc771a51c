#!/bin/bash
# The Debian package installed and used as a user would, on a fresh Debian 12 system: a root
# made by debootstrap (minbase), entered through its own mount, PID and (for the user's
# programs) network namespaces with pivot_root, then apt install ./vrnic_*.deb; as a user
# that is not root: vrnic demo, vrnic run -- ibv_devinfo, rping, vrnic sim run incast-pfc;
# then an upgrade to a newer version that drops a file, apt remove and purge, which must leave
# nothing (tests/package/in_root.sh).
#   install_test.sh DIR   DIR holds vrnic_<version>_<arch>.deb and SHA256SUMS (scripts/package.sh)
# Needs root. Env: VRNIC_DEBIAN_MIRROR (default http://deb.debian.org/debian);
# VRNIC_ROOT_CACHE (default ~/.cache/vrnic): a tar of the untouched debootstrap output is kept
# there and unpacked afresh for each run; VRNIC_FRESH_ROOT=1 runs debootstrap again.
#
# pivot_root, not chroot: in a chroot the kernel refuses to make a user namespace (EPERM,
# user_namespaces(7)), which `vrnic run` needs for its sysfs view as a user that is not root.
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: install_test.sh DIR}
[ "$(id -u)" = 0 ] || { echo "install_test: needs root (debootstrap, namespaces); skipped"; exit 77; }
for tool in debootstrap unshare pivot_root; do
  command -v $tool >/dev/null || { echo "FAIL install_test: $tool is not installed"; exit 1; }
done
debs=("$dir"/vrnic_*.deb)
[ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] ||
  { echo "FAIL install_test: no single vrnic_*.deb in $dir (scripts/package.sh makes it)"; exit 1; }
deb=$(basename "${debs[0]}")
(cd "$dir" && sha256sum --quiet -c SHA256SUMS) || { echo "FAIL SHA256SUMS of $dir"; exit 1; }
version=$(dpkg-deb -f "$dir/$deb" Version)
echo "install_test: $deb, version $version"

# The upgrade: the same package as a newer version without one of its scenario files, which
# the upgrade must remove (dpkg-deb, as an archive's next version would be built).
newer_version=$version+upgrade1
work=$(mktemp -d /var/tmp/vrnic-upgrade.XXXXXX)
dpkg-deb -R "$dir/$deb" "$work/pkg" || { echo "FAIL dpkg-deb -R $deb"; exit 1; }
dropped=$(cd "$work/pkg" && find usr/share/vrnic/scenarios -name '*.json' | sort | head -1)
[ -n "$dropped" ] || { echo "FAIL no scenario file in $deb"; exit 1; }
rm "$work/pkg/$dropped"
sed -i "\| $dropped\$|d" "$work/pkg/DEBIAN/md5sums"
sed -i "s/^Version: .*/Version: $newer_version/" "$work/pkg/DEBIAN/control"
newer=vrnic_${newer_version}_$(dpkg-deb -f "$dir/$deb" Architecture).deb
dpkg-deb --root-owner-group -b "$work/pkg" "$work/$newer" >/dev/null ||
  { echo "FAIL dpkg-deb -b $newer"; exit 1; }
rm -rf "$work/pkg"

mirror=${VRNIC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${VRNIC_ROOT_CACHE:-$HOME/.cache/vrnic}/bookworm-minbase-$(echo "$mirror" | md5sum | cut -c1-8).tar
root=$(mktemp -d /var/tmp/vrnic-root.XXXXXX)
trap 'rm -rf --one-file-system "$root" "$work"' EXIT
t0=$SECONDS
if [ "${VRNIC_FRESH_ROOT:-0}" = 1 ] || [ ! -s "$cache" ]; then
  echo "install_test: debootstrap --variant=minbase bookworm from $mirror"
  if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1; then
    tail -20 "$root.log"; rm -f "$root.log"; echo "FAIL debootstrap"; exit 1
  fi
  rm -f "$root.log"
  mkdir -p "$(dirname "$cache")"
  tar -C "$root" -cf "$cache.new" . && mv "$cache.new" "$cache"
else
  echo "install_test: the debootstrap root from $cache"
  tar -C "$root" -xf "$cache" || { echo "FAIL unpacking $cache"; exit 1; }
fi
chmod 755 "$root"  # it becomes /
echo "time fresh root: $((SECONDS - t0)) s"

# enter NET CMD...: CMD as root with $root as /, in new mount and PID namespaces (every
# process ends with the step), in the host's network namespace (NET=host: apt downloads) or
# in one of its own with only lo (NET=own: no port or address shared with other programs).
# /run/vrnic-test holds the scripts and both packages; /dev/shm is the step's own.
enter() {
  local net=$1; shift
  local flags=(--mount --pid --fork)
  [ "$net" = own ] && flags+=(--net)
  unshare "${flags[@]}" -- bash -c '
    set -e
    root=$1 here=$2 deb=$3 newer=$4 net=$5; shift 5
    mount --make-rprivate /
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount -t sysfs sysfs "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
    mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$root/run"
    mkdir -m 1777 "$root/run/vrnic-test"
    cp "$here/in_root.sh" "$deb" "$newer" "$root/run/vrnic-test/"
    [ "$net" = own ] && ip link set lo up
    cd "$root"
    pivot_root . .
    umount -l .
    cd /
    exec "$@"' bash "$root" "$here" "$dir/$deb" "$work/$newer" "$net" "$@"
}
fail=0
enter host bash /run/vrnic-test/in_root.sh install "$deb" "$version" || fail=1
if [ $fail = 0 ]; then
  # The user's steps with a login environment, none of the caller's.
  enter own runuser -u tester -- env -i HOME=/home/tester USER=tester LOGNAME=tester \
    SHELL=/bin/bash PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
    bash /run/vrnic-test/in_root.sh use "$version" || fail=1
  enter own bash /run/vrnic-test/in_root.sh upgrade "$newer" "$newer_version" "/$dropped" || fail=1
  enter own bash /run/vrnic-test/in_root.sh remove "$deb" || fail=1
fi
echo "install_test: $([ $fail = 0 ] && echo PASS || echo FAIL) ($((SECONDS - t0)) s)"
exit $fail
