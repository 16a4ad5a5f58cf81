#!/usr/bin/env bash
# Stage: the concurrency test (tests/unit/concurrency_test.cpp: T threads x one context, plans
# and eager graphs, compared bit for bit with sequential runs) under ThreadSanitizer, in a build
# of its own (TSAN_BUILD_DIR, default build-tsan: -Db_sanitize=thread, only libchutney, the CPU
# backend and that test are built). Any report fails the stage (TSan exits 66).
#
# No suppressions: the CPU backend's OpenBLAS runs on the calling thread only (it is set to one
# thread), and TSan sees nothing of uninstrumented code, so it has nothing to report there.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dir=${TSAN_BUILD_DIR:-build-tsan}
if ! echo 'int main() { return 0; }' | c++ -fsanitize=thread -x c++ - -o "${TMPDIR:-/tmp}/ctn-tsan-probe.$$" 2>/dev/null; then
  echo "tsan: this toolchain cannot build with -fsanitize=thread; skipped"
  record 0 0 1
  exit 0
fi
rm -f "${TMPDIR:-/tmp}/ctn-tsan-probe.$$"
if [[ ! -f "$dir/build.ninja" ]]; then
  # The device backends stay out: their drivers (PoCL, lavapipe) are not instrumented and are
  # serialised by the host anyway; the concurrency test skips them here and runs them in the
  # native stage.
  meson setup "$dir" -Db_sanitize=thread -Dbuildtype=debugoptimized -Dwerror=true \
    -Dopencl=disabled -Dvulkan=disabled -Dcuda=disabled -Dbench=false -Dtests=enabled
fi
ninja -C "$dir" ${NINJA_JOBS:+-j "$NINJA_JOBS"} tests/unit/concurrency_test backends/cpu/ctn-cpu.so
rm -f "$dir/meson-logs/testlog.json"
rc=0
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  meson test -C "$dir" --no-rebuild --print-errorlogs concurrency || rc=$?
record_meson "$dir"
exit "$rc"
