# Source this to build and run the Go package against a chutney build tree instead of an
# installed library:
#
#   . bindings/go/env.sh [BUILD_DIR]      # BUILD_DIR defaults to <repo>/build
#   cd bindings/go && go test ./...
#
# It points pkg-config at the build's uninstalled chutney.pc (so `#cgo pkg-config: chutney`
# finds the headers and libchutney there), records the library's folder as an rpath of the Go
# binaries, and keeps the go command offline (no module proxy: the module has no requirements).
_ctn_repo=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/../.." && pwd)
_ctn_build=${1:-$_ctn_repo/build}
case $_ctn_build in /*) ;; *) _ctn_build=$PWD/$_ctn_build ;; esac
if [ ! -f "$_ctn_build/meson-uninstalled/chutney-uninstalled.pc" ]; then
  echo "env.sh: $_ctn_build is not a configured chutney build (no meson-uninstalled/chutney-uninstalled.pc)" >&2
  unset _ctn_repo _ctn_build
  return 1 2>/dev/null || exit 1
fi
export PKG_CONFIG_PATH="$_ctn_build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export CGO_LDFLAGS="-Wl,-rpath,$_ctn_build/core${CGO_LDFLAGS:+ $CGO_LDFLAGS}"
export CHUTNEY_BUILD_DIR="$_ctn_build"
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
export GOPROXY=off
unset _ctn_repo _ctn_build
