# Source this to build and run the Rust crates against a chutney build tree instead of an
# installed library:
#
#   . bindings/rust/env.sh [BUILD_DIR]    # BUILD_DIR defaults to <repo>/build
#   cd bindings/rust && cargo test --offline
#
# It sets CHUTNEY_LIB_DIR (chutney-sys links libchutney from there), CHUTNEY_INCLUDE_DIR (the
# headers the layout probe is compiled against), CHUTNEY_BUILD_DIR (tests find plugins there),
# CARGO_NET_OFFLINE (the workspace has no dependencies; cargo never needs the network) and adds
# `-C link-arg=-Wl,-rpath,<lib dir>` to RUSTFLAGS: every binary cargo links meanwhile, your own
# crate's included, finds libchutney without LD_LIBRARY_PATH (a build script's rpath reaches
# only its own crate's binaries, so chutney's cannot give one to yours).
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
_ctn_rpath="-C link-arg=-Wl,-rpath,$_ctn_build/core"
case $_ctn_build in
  *[[:space:]]*) echo "env.sh: $_ctn_build has a space, which RUSTFLAGS cannot hold: binaries need LD_LIBRARY_PATH=$_ctn_build/core" >&2 ;;
  *) case " ${RUSTFLAGS:-} " in
       *" $_ctn_rpath "*) ;;
       *) export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }$_ctn_rpath" ;;
     esac ;;
esac
unset _ctn_rpath
unset _ctn_repo _ctn_build
