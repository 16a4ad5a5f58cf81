#!/usr/bin/env bash
# Cross-compiles chutney for aarch64 and runs its portable test suites under qemu user-mode
# emulation. Called by `bash tools/setup.sh test`; can be run on its own from any directory.
#
# Needs (Debian 12): g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user googletest.
# GoogleTest is compiled for aarch64 from Debian's sources in /usr/src/googletest by Meson's
# dependency('gtest') (no prebuilt aarch64 gtest exists on an x86_64 machine).
#
# Environment:
#   CROSS_BUILD_DIR           build folder, relative to the repo root (default build-aarch64)
#   CROSS_SUITES              test suites to run, space-separated (default "unit conformance")
#   CROSS_TIMEOUT_MULTIPLIER  emulation is 5-20x slower than native (default 10)
#   NINJA_JOBS                ninja -j value (default: ninja's own)
#   MESON_ARGS                extra arguments for `meson setup`
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo_root"

build_dir=${CROSS_BUILD_DIR:-build-aarch64}
suites=${CROSS_SUITES:-unit conformance}
cross_file=tools/cross/aarch64.ini

for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "test-aarch64: '$tool' not found; install g++-aarch64-linux-gnu and qemu-user" \
         "(bash tools/setup.sh test does)" >&2
    exit 1
  fi
done

# Host-only parts are off: OpenBLAS and the GPU backends have no aarch64 libraries on this
# machine, and benchmarks mean nothing under emulation.
setup_args=(
  -Dwerror=true
  -Dopenblas=disabled
  -Dcuda=disabled
  -Dopencl=disabled
  -Dvulkan=disabled
  -Dbench=false
)
# shellcheck disable=SC2206  # MESON_ARGS is deliberately word-split
extra_args=(${MESON_ARGS:-})

if [[ -f "$build_dir/meson-private/coredata.dat" ]]; then
  # The cross file is fixed at first setup; reconfigure only updates the options.
  if ! meson setup --reconfigure "$build_dir" "${setup_args[@]}" "${extra_args[@]}"; then
    echo "test-aarch64: reconfigure failed, wiping $build_dir" >&2
    meson setup --wipe "$build_dir" --cross-file "$cross_file" "${setup_args[@]}" "${extra_args[@]}"
  fi
else
  meson setup "$build_dir" --cross-file "$cross_file" "${setup_args[@]}" "${extra_args[@]}"
fi

ninja -C "$build_dir" ${NINJA_JOBS:+-j "$NINJA_JOBS"}

suite_args=()
for s in $suites; do
  suite_args+=(--suite "$s")
done
# The exe_wrapper in aarch64.ini runs every test binary through qemu-aarch64. --no-rebuild:
# ninja just ran; a second implicit build would only race with edits made meanwhile.
meson test -C "$build_dir" --no-rebuild "${suite_args[@]}" --print-errorlogs \
  --timeout-multiplier "${CROSS_TIMEOUT_MULTIPLIER:-10}"
