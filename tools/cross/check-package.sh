#!/usr/bin/env bash
# Checks a board package the way a board would use it, under qemu user-mode emulation:
#
#   bash tools/cross/check-package.sh aarch64|armhf dist/chutney-<version>-<target>.tar.gz
#
# The archive is unpacked into a fresh folder under a name unlike the build's (so only relative
# lookups can work), then: the files are there, stripped and built for the target; its CLI runs
# `version` and `plugins --explain` (every plugin of the package loaded from the package, the
# device backends "unavailable: <why>" since qemu has no GPU); and a C program built against the
# package's pkg-config file runs. Prints "PASS <check>" or "FAIL <check>: <why>" per check and
# exits non-zero when one failed.
set -uo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo_root"
target=${1:-}
archive=${2:-}
case "$target" in
  aarch64) triplet=aarch64-linux-gnu machine=AArch64 device_plugins="opencl vulkan" ;;
  armhf) triplet=arm-linux-gnueabihf machine=ARM device_plugins="" ;;
  *) echo "usage: check-package.sh aarch64|armhf ARCHIVE" >&2; exit 2 ;;
esac
sysroot_lib=$repo_root/${CROSS_SYSROOT:-build-$target-sysroot}/usr/lib/$triplet
[[ -f "$archive" ]] || { echo "check-package.sh: no archive '$archive'" >&2; exit 2; }

failed=0
pass() { echo "PASS $target package: $1"; }
fail() { echo "FAIL $target package: $1: $2"; failed=1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/moved elsewhere" "$work/home"
tar -xzf "$archive" -C "$work/moved elsewhere"
name=$(basename "$archive" .tar.gz)
pkg="$work/moved elsewhere/$name"
version=${name#chutney-}
version=${version%-"$target"}
run() { HOME="$work/home" CHUTNEY_CACHE_DIR="$work/home/cache" CHUTNEY_PLUGIN_PATH= \
  "$repo_root/tools/cross/qemu-run" "$target" "$@"; }

# 1. Layout: every part present, built for the target, stripped.
plugins="cpu swish${device_plugins:+ $device_plugins}"
missing=""
for f in bin/chutney lib/libchutney.so include/chutney/chutney.h lib/pkgconfig/chutney.pc \
         share/doc/chutney/BOARDS.md; do
  [[ -e "$pkg/$f" ]] || missing+=" $f"
done
for p in $plugins; do
  [[ -f "$pkg/lib/chutney/plugins/ctn-$p.so" ]] || missing+=" lib/chutney/plugins/ctn-$p.so"
done
wrong=""
for f in "$pkg/bin/chutney" "$pkg"/lib/libchutney.so.*.*.* "$pkg"/lib/chutney/plugins/*.so; do
  "$triplet-readelf" -h "$f" 2>/dev/null | grep -q "Machine:.*$machine" || wrong+=" ${f#"$pkg"/}(arch)"
  "$triplet-readelf" -S "$f" 2>/dev/null | grep -q '\.symtab' && wrong+=" ${f#"$pkg"/}(not stripped)"
done
if [[ -n "$missing$wrong" ]]; then fail layout "missing:$missing; wrong:$wrong"; else pass "layout ($plugins)"; fi

# 2. `chutney version`.
out=$(run "$pkg/bin/chutney" version 2>&1)
if [[ $? == 0 && "$out" == *"chutney $version"* ]]; then pass "chutney version"; else fail "chutney version" "$out"; fi

# 3. `chutney plugins --explain`: the package's own plugins, found next to its libchutney.
out=$(run "$pkg/bin/chutney" plugins --explain 2>&1)
rc=$?
echo "$out" | sed 's/^/    /'
why=""
((rc == 0)) || why+=" exit $rc;"
echo "$out" | grep -Eq '^  cpu +available' || why+=" cpu not available;"
for p in cpu swish; do
  echo "$out" | grep -Fq "loaded      $pkg/lib/chutney/plugins/ctn-$p.so" || why+=" ctn-$p.so not loaded from the package;"
done
for p in $device_plugins; do
  # qemu has no GPU: the plugin loads, its init says why the device is absent.
  line=$(echo "$out" | grep -F "unavailable $pkg/lib/chutney/plugins/ctn-$p.so: ")
  [[ "$line" == *"backend \"$p\" init failed: unavailable: "?* ]] || why+=" $p not reported 'unavailable: <why>';"
done
echo "$out" | grep -q '^  rejected' && why+=" a plugin was rejected;"
if [[ -z "$why" ]]; then pass "chutney plugins --explain"; else fail "chutney plugins --explain" "$why"; fi

# 4. pkg-config: compile the README's C example against the unpacked package and run it.
cflags=$(PKG_CONFIG_LIBDIR="$pkg/lib/pkgconfig" PKG_CONFIG_PATH= pkg-config --cflags --libs chutney 2>&1)
plugindir=$(PKG_CONFIG_LIBDIR="$pkg/lib/pkgconfig" PKG_CONFIG_PATH= pkg-config --variable=plugindir chutney 2>&1)
if [[ "$(realpath -m "${plugindir//\\/}")" != "$(realpath "$pkg/lib/chutney/plugins")" ]]; then
  fail pkg-config "plugindir '$plugindir' is not the package's"
# libchutney's own dependencies (zlib) are the board's: here they are in the cross sysroot
# (tools/cross/sysroot.sh), which the linker needs to be told about (-rpath-link).
elif ! (eval "set -- $cflags"; "$triplet-gcc" -std=c99 -O1 bindings/c/readme.c "$@" \
          -Wl,-rpath,"$pkg/lib" -Wl,-rpath-link,"$sysroot_lib" -o "$work/readme") >"$work/cc.log" 2>&1; then
  fail pkg-config "compiling bindings/c/readme.c with '$cflags': $(cat "$work/cc.log")"
elif ! out=$(run "$work/readme" 2>&1); then
  fail pkg-config "the example built against the package failed: $out"
else
  pass "pkg-config + C example ($out)"
fi
exit "$failed"
