#!/usr/bin/env bash
# Builds the board package of a cross target:
#
#   bash tools/cross/package.sh aarch64|armhf
#
# -> dist/chutney-<version>-<target>.tar.gz (its path is the last line printed), one folder
# chutney-<version>-<target>/ holding
#   bin/chutney                    the CLI (finds libchutney through RPATH $ORIGIN/../lib)
#   lib/libchutney.so*             the library
#   lib/chutney/plugins/ctn-*.so   backends and op libraries (found next to libchutney)
#   lib/pkgconfig/chutney.pc       prefix=${pcfiledir}/../.. : valid wherever it is unpacked
#   include/chutney/*.h            the public headers
#   share/doc/chutney/BOARDS.md    how to use it on a board
# Binaries are stripped. Uses (and if needed configures and builds) the target's cross build
# folder, the same one tools/cross/test-cross.sh tests. docs/BOARDS.md says how to use it.
#
# Environment: CROSS_BUILD_DIR (default build-<target>), DIST_DIR (default dist), NINJA_JOBS,
# MESON_ARGS.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo_root"
source tools/cross/lib.sh
cross_target_setup "${1:-}" >&2

if [[ ! -f "$build_dir/build.ninja" ]]; then
  cross_configure >&2
fi
cross_build >&2  # the installed targets only (a no-op after test-cross.sh)

version=$(meson introspect --projectinfo "$build_dir" |
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
name=chutney-$version-$target
dist=${DIST_DIR:-dist}
mkdir -p "$dist"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The build is configured for prefix /usr/local, libdir lib (Meson's defaults for cross builds);
# the staged tree is that prefix, renamed.
meson install -C "$build_dir" --no-rebuild --strip --destdir "$stage/root" >/dev/null
prefix=$(meson introspect --buildoptions "$build_dir" |
  /usr/bin/python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
libdir=$(meson introspect --buildoptions "$build_dir" |
  /usr/bin/python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "libdir"))')
if [[ "$libdir" != lib ]]; then
  echo "package.sh: $build_dir has libdir '$libdir'; the package layout needs 'lib'" >&2
  exit 1
fi
mv "$stage/root$prefix" "$stage/$name"
# Relocatable pkg-config file: every path in it derives from prefix.
sed -i 's|^prefix=.*|prefix=${pcfiledir}/../..|' "$stage/$name/lib/pkgconfig/chutney.pc"
mkdir -p "$stage/$name/share/doc/chutney"
cp docs/BOARDS.md "$stage/$name/share/doc/chutney/"
# Reproducible archive: sorted names, no owner, the commit's time.
mtime=$(git log -1 --format=%ct 2>/dev/null || date +%s)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" \
  -C "$stage" -czf "$dist/$name.tar.gz" "$name"
echo "package.sh: $(du -h "$dist/$name.tar.gz" | cut -f1) $dist/$name.tar.gz" >&2
echo "$dist/$name.tar.gz"
