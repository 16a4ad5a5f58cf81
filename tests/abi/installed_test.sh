#!/bin/sh
# What an install gives users (README "Layout": abi/ is the only thing apps and plugins compile
# against): `meson install` into a scratch DESTDIR must install every public header, a plugin (the
# 1.2-era op library of the compat suite) must
# build from the installed headers alone through chutney-plugin.pc without linking libchutney, and
# an application through chutney.pc.
# usage: installed_test.sh BUILD_DIR SOURCE_ROOT
set -eu
build=$1 src=$2
dest=$(mktemp -d "${TMPDIR:-/tmp}/ctn-install.XXXXXX")
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --no-rebuild --quiet --destdir "$dest" >"$dest/install.log" 2>&1 ||
  { cat "$dest/install.log"; echo "FAIL: meson install"; exit 1; }
inc=$(find "$dest" -type d -path '*/include/chutney' | head -n 1)
[ -n "$inc" ] || { echo "FAIL: no include/chutney installed"; exit 1; }
missing=0
for h in "$src"/abi/chutney/*.h; do
  if ! cmp -s "$h" "$inc/$(basename "$h")"; then
    echo "FAIL: $(basename "$h") is not installed (or differs) in $inc"
    missing=1
  fi
done
[ "$missing" = 0 ] || exit 1
pcdir=$(dirname "$(find "$dest" -name chutney-plugin.pc | head -n 1)")
[ -f "$pcdir/chutney-plugin.pc" ] || { echo "FAIL: chutney-plugin.pc not installed"; exit 1; }
export PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$dest"
[ -z "$(pkg-config --libs chutney-plugin)" ] || { echo "FAIL: chutney-plugin.pc links: $(pkg-config --libs chutney-plugin)"; exit 1; }
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -pedantic -Werror -fPIC -shared -fvisibility=hidden -Wl,--no-undefined \
  $(pkg-config --cflags chutney-plugin) -DCOMPAT_NAME='"installed"' "$src/tests/abi/compat/oplib12.c" \
  -o "$dest/ctn-oplib.so" -lm ||
  { echo "FAIL: an op library does not build from the installed headers"; exit 1; }
if nm -D "$dest/ctn-oplib.so" | grep -q ' U ctn_'; then
  echo "FAIL: the plugin needs libchutney symbols:"; nm -D "$dest/ctn-oplib.so" | grep ' U ctn_'; exit 1
fi
printf '#include <chutney/chutney.h>\n#include <chutney/collective.h>\n#include <chutney/onnx.h>\n#include <chutney/dlpack.h>\nint main(void) { return ctn_abi_version() == 0; }\n' >"$dest/app.c"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -pedantic -Werror -c $(pkg-config --cflags chutney) "$dest/app.c" -o "$dest/app.o" ||
  { echo "FAIL: an application does not compile against the installed headers"; exit 1; }
echo "installed: $(ls "$inc" | wc -l) headers in ${inc#"$dest"}; an op library builds from them via chutney-plugin.pc and links nothing of libchutney"
