#!/usr/bin/env bash
# Stage: every suite of the native build (meson test): unit, abi, conformance, opencl (PoCL),
# vulkan (lavapipe), cuda (skips cleanly without a GPU).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rm -f "$BUILD_DIR/meson-logs/testlog.json"
rc=0
# --no-rebuild: setup.sh's build stage just ran (and failed loudly if it could not build).
meson test -C "$BUILD_DIR" --no-rebuild --print-errorlogs || rc=$?
record_meson "$BUILD_DIR"
exit "$rc"
