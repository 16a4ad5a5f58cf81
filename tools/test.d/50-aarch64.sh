#!/usr/bin/env bash
# Stage (cross): aarch64 build, unit and conformance suites under qemu.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dir=${CROSS_BUILD_DIR:-build-aarch64}
rm -f "$dir/meson-logs/testlog.json"
rc=0
CROSS_BUILD_DIR=$dir bash tools/cross/test-aarch64.sh || rc=$?
record_meson "$dir"
exit "$rc"
