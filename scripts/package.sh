#!/usr/bin/env bash
# Builds the Debian package from this tree: build/package/vrnic_<version>_<arch>.deb (and its
# -dbgsym), their SHA256SUMS, and lintian's verdict. Installs the build dependencies first.
#   scripts/package.sh            (JOBS=N: parallel compile jobs, default nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/build/package
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
apt_install() {
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@"
}

# The tools, then debian/control's Build-Depends.
need=()
for p in build-essential debhelper dpkg-dev lintian; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "package: installing ${need[*]}"
  $SUDO apt-get update -qq
  apt_install "${need[@]}"
fi
if ! dpkg-checkbuilddeps >/dev/null 2>&1; then
  echo "package: installing the build dependencies of debian/control"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get build-dep -y -qq ./
fi

version=$(dpkg-parsechangelog -S Version)
# The sources as they are in this tree (tracked files and new ones git does not ignore; no
# build trees), in a copy: dpkg-buildpackage writes into the tree and its parent.
stage=$out/vrnic-$version
rm -rf "$out"
mkdir -p "$stage"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -c | tar -x -C "$stage"
else
  tar -c --exclude=./build --exclude=./.git . | tar -x -C "$stage"
fi

start=$(date +%s)
echo "package: dpkg-buildpackage in $stage (log: $out/build.log)"
if ! (cd "$stage" && dpkg-buildpackage -us -uc -b -J"${JOBS:-$(nproc)}") >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "package: dpkg-buildpackage failed (whole log: $out/build.log)"
  exit 1
fi
seconds=$(( $(date +%s) - start ))
rm -rf "$stage"

cd "$out"
sha256sum -- *.deb >SHA256SUMS
# lintian: errors and warnings fail; informational tags are shown (docs/dependencies.md
# explains each one left).
status=0
lintian --allow-root --display-info --fail-on error,warning ./*.changes >lintian.log 2>&1 ||
  status=$?
cat lintian.log
echo "package: built in ${seconds} s"
for f in *.deb; do printf 'package: %s  %s bytes\n' "$out/$f" "$(stat -c %s "$f")"; done
echo "package: $out/SHA256SUMS"
cat SHA256SUMS
if [ "$status" != 0 ]; then echo "package: lintian found errors or warnings (above)"; exit 1; fi
