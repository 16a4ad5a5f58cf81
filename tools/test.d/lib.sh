# Sourced by every stage of tools/test.d (not a stage itself: stages are NN-name.sh).
# setup.sh runs each stage from the repository root with:
#   BUILD_DIR      the native build folder (configured and built)
#   STAGE_RESULT   a file the stage writes "ok fail skip" into (counts of tests it ran)
# A stage exits non-zero when anything failed; one that writes no counts counts as one test.
set -euo pipefail

# Adds the counts of a meson testlog.json (one JSON object per line) to this stage's result.
record_meson() {
  local log=$1/meson-logs/testlog.json ok=0 fail=0 skip=0
  if [[ -f "$log" ]]; then
    ok=$(grep -cE '"result": "(OK|EXPECTEDFAIL)"' "$log" || true)
    fail=$(grep -cE '"result": "(FAIL|UNEXPECTEDPASS|TIMEOUT|ERROR)"' "$log" || true)
    skip=$(grep -cE '"result": "SKIP"' "$log" || true)
  fi
  record "$ok" "$fail" "$skip"
}

# record OK FAIL SKIP: adds to this stage's counts.
record() {
  local o=0 f=0 s=0
  [[ -s "$STAGE_RESULT" ]] && read -r o f s <"$STAGE_RESULT"
  echo "$((o + $1)) $((f + $2)) $((s + $3))" >"$STAGE_RESULT"
}

# run_cross_stage TARGET: tools/cross/test-cross.sh TARGET, counting its meson tests and the
# board package checks (lines "PASS ..." / "FAIL ..." of tools/cross/check-package.sh).
run_cross_stage() {
  local target=$1 dir=${CROSS_BUILD_DIR:-build-$1} log rc=0 pass fail
  log=$(mktemp)
  rm -f "$dir/meson-logs/testlog.json"
  CROSS_BUILD_DIR=$dir bash tools/cross/test-cross.sh "$target" 2>&1 | tee "$log" || rc=$?
  record_meson "$dir"
  pass=$(grep -c "^PASS $target package:" "$log" || true)
  fail=$(grep -c "^FAIL $target package:" "$log" || true)
  record "$pass" "$fail" 0
  rm -f "$log"
  return "$rc"
}
