#!/usr/bin/env bash
# Makes the target libraries a cross build links against, without touching the build machine's
# dpkg database:
#
#   bash tools/cross/sysroot.sh aarch64|armhf      (prints the sysroot's folder last)
#
# The Debian packages of tools/cross/sysroot-<target>.txt are downloaded for the target's Debian
# architecture with apt's own state kept in the sysroot (no `dpkg --add-architecture`, no
# multiarch co-installation), then unpacked with `dpkg -x` into build-<target>-sysroot. Headers
# come from the build machine's /usr/include, which Debian's cross compilers search anyway (the
# host -dev packages of tools/deps/ provide them); only libraries and .pc files come from here.
#
# Why not multiarch: installing foo-dev:arm64 beside foo-dev:amd64 needs both at the very same
# version, and a mirror whose security archive for one architecture lags the other's makes that
# impossible (and makes `apt-get update` fail as a whole). Here a lagging index only costs that
# index: packages come from whichever index has them.
#
# It writes build-<target>-sysroot/sysroot.ini, a Meson machine file given after
# tools/cross/<target>.ini (tools/cross/lib.sh does): sys_root and pkg_config_libdir point into the
# sysroot, the linker gets -L and -rpath-link for it, and the exe_wrapper puts its libraries on
# the emulated program's LD_LIBRARY_PATH. Reruns reuse the sysroot while the package list is
# unchanged (a stamp holds its hash).
#
# Environment:
#   CROSS_SYSROOT   the sysroot folder, relative to the repo root (default build-<target>-sysroot)
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo_root"

target=${1:-}
case "$target" in
  aarch64) arch=arm64 triplet=aarch64-linux-gnu qemu=qemu-aarch64 cpu=cortex-a53 ;;
  armhf) arch=armhf triplet=arm-linux-gnueabihf qemu=qemu-arm cpu=cortex-a7 ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "usage: bash tools/cross/sysroot.sh aarch64|armhf" >&2
    exit 2
    ;;
esac

list=tools/cross/sysroot-$target.txt
sysroot=$repo_root/${CROSS_SYSROOT:-build-$target-sysroot}
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^[[:space:]]*$/d' "$list")
stamp=$(cat "$list" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)

if [[ -f "$sysroot/.stamp" && "$(cat "$sysroot/.stamp")" == "$stamp" && -f "$sysroot/sysroot.ini" ]]; then
  echo "sysroot.sh: $target sysroot up to date" >&2
  echo "$sysroot"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
  echo "sysroot.sh: needs apt-get and dpkg-deb (a Debian machine) to fetch $arch libraries" >&2
  exit 1
fi

rm -rf "$sysroot"
apt_dir=$sysroot/.apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
: >"$apt_dir/status"
# The machine's own sources, but this architecture only and a private state: nothing here
# changes what apt-get does for the machine. Downloads run as the calling user (no _apt sandbox,
# which could not write into a folder under /root).
apt_opts=(
  -o "APT::Architecture=$arch" -o "APT::Architectures=$arch"
  -o "Dir::State=$apt_dir" -o "Dir::State::Lists=$apt_dir/lists"
  -o "Dir::State::status=$apt_dir/status" -o "Dir::Cache=$apt_dir/cache"
  -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root"
  -o "Acquire::Retries=3"
)
echo "sysroot.sh: fetching the $arch package lists" >&2
# One lagging index (a mirror mid-sync) makes apt-get update exit non-zero although every other
# index arrived; what matters is whether the packages below can be downloaded.
if ! apt-get "${apt_opts[@]}" -qq update >&2; then
  echo "sysroot.sh: warning: some $arch package lists failed to download (above); going on with the rest" >&2
fi
echo "sysroot.sh: downloading ${packages[*]} ($arch)" >&2
if ! (cd "$apt_dir/debs" && apt-get "${apt_opts[@]}" -qq download "${packages[@]}" >&2); then
  echo "sysroot.sh: could not download the $arch packages of $list" >&2
  exit 1
fi
for deb in "$apt_dir"/debs/*.deb; do
  dpkg-deb -x "$deb" "$sysroot"
done
# Debian 12 is merged-/usr, but some packages still ship files under /lib: fold them into
# /usr/lib so that one library folder holds everything (the -dev symlinks are relative).
if [[ -d "$sysroot/lib" && ! -L "$sysroot/lib" ]]; then
  mkdir -p "$sysroot/usr/lib"
  cp -a "$sysroot/lib/." "$sysroot/usr/lib/"
  rm -rf "$sysroot/lib"
  ln -s usr/lib "$sysroot/lib"
fi
libdir=$sysroot/usr/lib/$triplet
# A -dev symlink must resolve inside the sysroot: an absolute target would name the build
# machine's file (or nothing).
while IFS= read -r -d '' link; do
  dest=$(readlink "$link")
  if [[ "$dest" == /* ]]; then
    ln -sfn "$sysroot$dest" "$link"
  fi
done < <(find "$sysroot/usr" -type l -print0)
for f in "$libdir"/*.so; do
  if [[ ! -e "$f" ]]; then
    echo "sysroot.sh: $f is a dangling link" >&2
    exit 1
  fi
done

# The exe_wrapper of tools/cross/<target>.ini, with this sysroot's libraries after the cross C
# library on the guest's LD_LIBRARY_PATH.
cat >"$sysroot/sysroot.ini" <<EOF
# Generated by tools/cross/sysroot.sh for $target: the $arch libraries of $list.
[properties]
sys_root = '$sysroot'
pkg_config_libdir = ['$libdir/pkgconfig', '$sysroot/usr/share/pkgconfig']

[built-in options]
c_link_args = ['-L$libdir', '-Wl,-rpath-link,$libdir']
cpp_link_args = ['-L$libdir', '-Wl,-rpath-link,$libdir']

[binaries]
exe_wrapper = ['sh', '-c',
  'p=/usr/$triplet; exec $qemu -cpu "\${QEMU_CPU:-$cpu}" -L "\$p" -E "LD_LIBRARY_PATH=\$p/lib:$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" "\$@"',
  'qemu-run']
EOF
echo "$stamp" >"$sysroot/.stamp"
echo "sysroot.sh: $target sysroot ready: $(find "$sysroot/usr" -name '*.so*' | wc -l) library files" >&2
echo "$sysroot"
