# Source this to build and run the Rust crates against a chutney build tree instead of an
# installed library:
#
#   . bindings/rust/env.sh [BUILD_DIR]    # BUILD_DIR defaults to <repo>/build
#   cd bindings/rust && cargo test --offline
#
# It sets CHUTNEY_LIB_DIR (chutney-sys links libchutney from there and records it as an rpath,
# so tests and examples run without LD_LIBRARY_PATH), CHUTNEY_INCLUDE_DIR (the headers the
# layout probe is compiled against), CHUTNEY_BUILD_DIR (tests find plugins there) and
# CARGO_NET_OFFLINE (the workspace has no dependencies; cargo never needs the network).
_ctn_repo=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/../.." && pwd)
_ctn_build=${1:-$_ctn_repo/build}
case $_ctn_build in /*) ;; *) _ctn_build=$PWD/$_ctn_build ;; esac
if [ ! -f "$_ctn_build/core/libchutney.so" ]; then
  echo "env.sh: $_ctn_build is not a built chutney tree (no core/libchutney.so): bash tools/setup.sh build" >&2
  unset _ctn_repo _ctn_build
  return 1 2>/dev/null || exit 1
fi
export CHUTNEY_LIB_DIR="$_ctn_build/core"
export CHUTNEY_INCLUDE_DIR="$_ctn_repo/abi"
export CHUTNEY_BUILD_DIR="$_ctn_build"
export CARGO_NET_OFFLINE=true
unset _ctn_repo _ctn_build
