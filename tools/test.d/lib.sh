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
