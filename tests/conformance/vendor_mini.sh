#!/bin/sh
# Vendor mode against a backend that runs a few ops (meson test conformance-vendor-mini, and the
# compatibility suite's conformance-vendor-vend*).
#   vendor_mini.sh CONFORMANCE_EXE PLUGIN OPS [BACKEND]
# BACKEND is the backend's name as the plugin reports it (default mini).
# Runs every case on the plugin's backend (CTN_CONFORMANCE_PLUGIN; the CPU backend beside it is
# not tested here) and checks, from the op x backend matrix it writes:
#   - the run fails nothing (exit status 0, no FAIL cell);
#   - each op of the comma-separated OPS has its forward row "pass" on the backend;
#   - every other case that ran is "unsupported(...)" or "pass", and at least one is unsupported
#     (the path this test is about);
#   - for mini: CompositeOps.FailedPartLeavesTheGraphAsItWas ran and passed (it needs it).
set -u
if [ "$#" -lt 3 ] || [ "$#" -gt 4 ] || [ "$1" = "--help" ]; then
  echo "usage: vendor_mini.sh CONFORMANCE_EXE PLUGIN OPS [BACKEND] (comma-separated ops that must pass)"
  [ "$#" -eq 1 ] && [ "$1" = "--help" ] && exit 0
  exit 2
fi
exe=$1 plugin=$2 ops=$3 name=${4:-mini}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
matrix=$tmp/matrix.md

# The backend's name as the plugin reports it: the column of the matrix. Test names end in
# /<backend>_<row> (or /<backend> for per-backend tests).
CTN_CONFORMANCE_PLUGIN=$plugin CTN_CONFORMANCE_MATRIX=$matrix "$exe" \
  --gtest_filter="ConformanceSetup.*:CompositeOps.*:*/${name}_*:*/${name}" >"$tmp/log" 2>&1
status=$?
grep -E '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]' "$tmp/log"
fail=0
if [ "$status" -ne 0 ]; then
  echo "FAIL: the suite exited with $status"; grep -E 'Failure|FAILED' "$tmp/log" | head -n 40; fail=1
fi
# The composite rollback test needs the mini backend: it must have run here, not been skipped.
if [ "$name" != mini ]; then
  :
elif grep -q '^\[       OK \] CompositeOps.FailedPartLeavesTheGraphAsItWas' "$tmp/log"; then
  echo "ok: CompositeOps.FailedPartLeavesTheGraphAsItWas ran on mini"
else
  echo "FAIL: CompositeOps.FailedPartLeavesTheGraphAsItWas did not pass"; fail=1
fi
[ -s "$matrix" ] || { echo "FAIL: no matrix written"; exit 1; }
# Column of the backend in "| op | cpu | <name> |".
col=$(awk -F'|' -v b="$name" 'NR==3 { for (i = 2; i < NF; ++i) { gsub(/ /, "", $i); if ($i == b) print i } }' "$matrix")
[ -n "$col" ] || { echo "FAIL: no column for backend $name in the matrix"; sed -n 1,3p "$matrix"; exit 1; }
cell() { awk -F'|' -v row="$1" -v c="$col" '{ r = $2; gsub(/^ +| +$/, "", r); if (r == row) { v = $c; gsub(/^ +| +$/, "", v); print v } }' "$matrix"; }
for op in $(echo "$ops" | tr ',' ' '); do
  v=$(cell "$op")
  case "$v" in
    pass*) echo "ok: $op on $name: $v" ;;
    *) echo "FAIL: $op on $name: '$v', expected pass"; fail=1 ;;
  esac
done
n_fail=$(awk -F'|' -v c="$col" 'NR > 4 && $c ~ /FAIL/' "$matrix" | wc -l)
n_unsup=$(awk -F'|' -v c="$col" 'NR > 4 && $c ~ /unsupported/' "$matrix" | wc -l)
n_pass=$(awk -F'|' -v c="$col" 'NR > 4 && $c ~ /^ *pass/' "$matrix" | wc -l)
echo "$name: $n_pass rows pass, $n_unsup unsupported, $n_fail FAIL"
[ "$n_fail" -eq 0 ] || { echo "FAIL: rows failed on $name:"; awk -F'|' -v c="$col" 'NR > 4 && $c ~ /FAIL/ { print $2 }' "$matrix"; fail=1; }
[ "$n_unsup" -gt 0 ] || { echo "FAIL: no row was reported unsupported"; fail=1; }
exit $fail
