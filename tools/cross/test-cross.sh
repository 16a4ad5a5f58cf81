#!/usr/bin/env bash
# Cross-compiles chutney for a board target and tests it under qemu user-mode emulation:
#
#   bash tools/cross/test-cross.sh aarch64|armhf
#
# 1. configures build-<target> with tools/cross/<target>.ini and builds the installed parts and
#    the test programs of the suites (tools/cross/lib.sh says what each target contains);
# 2. runs the suites under qemu (aarch64 as a Cortex-A53, armhf as a Cortex-A7 and, for the
#    tests that say so, a Cortex-R5F without NEON);
# 3. builds the board package (tools/cross/package.sh) and checks it under qemu
#    (tools/cross/check-package.sh: its CLI, plugins, pkg-config file).
# Called by the cross stages of `bash tools/setup.sh test` (tools/test.d/50-aarch64.sh,
# 55-armhf.sh); runs on its own from any directory.
#
# Environment:
#   CROSS_BUILD_DIR           build folder, relative to the repo root (default build-<target>)
#   CROSS_SUITES              suites to run (default: unit conformance, plus abi on armhf, whose
#                             32-bit struct layouts differ from the native build's)
#   CROSS_TIMEOUT_MULTIPLIER  emulation is 5-20x slower than native (default 10)
#   CROSS_NO_PACKAGE=1        skip step 3
#   NINJA_JOBS, MESON_ARGS    as for setup.sh
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo_root"
source tools/cross/lib.sh
cross_target_setup "${1:-}"

default_suites="unit conformance"
[[ "$target" == armhf ]] && default_suites+=" abi"
suites=${CROSS_SUITES:-$default_suites}

cross_configure
# shellcheck disable=SC2086  # suites is a word list
cross_build $suites

suite_args=()
for s in $suites; do
  suite_args+=(--suite "$s")
done
rc=0
# The cross file's exe_wrapper runs every test program through qemu. --no-rebuild: the build
# above made exactly what the suites need.
meson test -C "$build_dir" --no-rebuild "${suite_args[@]}" --print-errorlogs \
  --timeout-multiplier "${CROSS_TIMEOUT_MULTIPLIER:-10}" || rc=$?

if [[ "${CROSS_NO_PACKAGE:-0}" != 1 ]]; then
  archive=$(CROSS_BUILD_DIR=$build_dir bash tools/cross/package.sh "$target" | tail -n 1)
  bash tools/cross/check-package.sh "$target" "$archive" || rc=1
fi
exit "$rc"
