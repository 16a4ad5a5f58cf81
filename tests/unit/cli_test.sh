#!/bin/sh
# Tests of the `chutney` command-line tool, run against the built binary.
#
# Meson registration (tests/unit/meson.build; also in tests/unit/cli.meson.txt):
#   if is_variable('chutney_cli')
#     test('cli', find_program('sh'),
#       args: [files('cli_test.sh'), chutney_cli], env: test_env, suite: 'unit', timeout: 300)
#   endif
#
# Usage: cli_test.sh /path/to/chutney
# The training check needs Debian's dataset-fashion-mnist; without it that check is skipped
# (and the whole test reports "skipped", exit 77, if nothing else failed).
set -u

CHUTNEY=${1:?usage: cli_test.sh /path/to/chutney}
DATA_DIR=${CHUTNEY_TEST_DATA_DIR:-/usr/share/datasets/fashion-mnist}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/chutney-cli-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM

failures=0
skipped=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok:   $*"; }

# run NAME EXPECTED_STATUS ARGS...: runs the tool, keeps stdout/stderr in $TMP/NAME.{out,err}.
run() {
  name=$1 expected=$2
  shift 2
  "$CHUTNEY" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  status=$?
  if [ "$status" -ne "$expected" ]; then
    fail "$name: 'chutney $*' exited $status, expected $expected"
    sed 's/^/    | /' "$TMP/$name.out" "$TMP/$name.err" | tail -20
    return 1
  fi
  return 0
}

# contains NAME FILE-SUFFIX TEXT: the output contains TEXT (fixed string).
contains() {
  if grep -qF -- "$3" "$TMP/$1.$2"; then
    pass "$1: std$2 mentions '$3'"
  else
    fail "$1: std$2 does not mention '$3'"
    sed 's/^/    | /' "$TMP/$1.$2" | tail -20
  fi
}

# --- help and usage errors ----------------------------------------------------------------
run help 0 --help && contains help out "usage: chutney"
for cmd in version plugins train graph; do
  run "help-$cmd" 0 "$cmd" --help && contains "help-$cmd" out "usage: chutney $cmd"
done
run unknown-command 2 frobnicate && contains unknown-command err "unknown command 'frobnicate'"
run unknown-option 2 train --no-such-option && contains unknown-option err "unknown option '--no-such-option'"
run bad-number 2 train --epochs many && contains bad-number err "--epochs"
run no-command 2

# --- version --------------------------------------------------------------------------------
run version 0 version && contains version out "ABI"

# --- plugins ----------------------------------------------------------------------------------
if run plugins 0 plugins --explain; then
  contains plugins out "ctn-cpu.so"
  contains plugins out "loaded"
  contains plugins out "cpu"
fi

# --- data errors name the package --------------------------------------------------------------
if run missing-data 1 train --data-dir "$TMP/nonexistent" --quiet; then
  contains missing-data err "dataset-fashion-mnist"
  contains missing-data err "train-images-idx3-ubyte.gz"
fi
mkdir -p "$TMP/corrupt"
printf 'this is not an IDX file' | gzip >"$TMP/corrupt/train-images-idx3-ubyte.gz"
if run corrupt-data 1 train --data-dir "$TMP/corrupt" --quiet; then
  contains corrupt-data err "bad IDX magic"
  contains corrupt-data err "dataset-fashion-mnist"
fi

# --- graph: the DOT writer on the real training graph -----------------------------------------
if run graph 0 graph --model mlp --out "$TMP/mlp.dot" --no-svg; then
  if grep -q 'digraph' "$TMP/mlp.dot"; then pass "graph: DOT file written"
  else fail "graph: $TMP/mlp.dot is not a DOT digraph"; fi
fi
run graph-no-out 2 graph --model mlp && contains graph-no-out err "--out"

# --- a small real training run ------------------------------------------------------------------
if [ -r "$DATA_DIR/train-images-idx3-ubyte.gz" ]; then
  if run train 0 train --model mlp --epochs 1 --limit 2048 --data-dir "$DATA_DIR" \
      --json "$TMP/log.json"; then
    acc=$(sed -n 's/^final test accuracy: \([0-9.]*\)$/\1/p' "$TMP/train.out")
    if [ -z "$acc" ]; then
      fail "train: no 'final test accuracy: X' line"
      sed 's/^/    | /' "$TMP/train.out"
    elif awk -v a="$acc" 'BEGIN { exit !(a > 0.5 && a <= 1.0) }'; then
      pass "train: final test accuracy $acc > 0.5"
    else
      fail "train: final test accuracy $acc is not > 0.5"
    fi
    contains train out "planned peak"
    # The test set (10000) is not a multiple of 128: the padded last evaluation batch must give
    # the same accuracy as one batch of all 10000 images (a few images of slack for rounding).
    if run train-eval-batch 0 train --model mlp --epochs 1 --limit 2048 --data-dir "$DATA_DIR" \
        --eval-batch-size 10000 --quiet; then
      acc2=$(sed -n 's/^final test accuracy: \([0-9.]*\)$/\1/p' "$TMP/train-eval-batch.out")
      if [ -n "$acc" ] && [ -n "$acc2" ] &&
          awk -v a="$acc" -v b="$acc2" 'BEGIN { d = a - b; exit !(d <= 0.0002 && d >= -0.0002) }'; then
        pass "train: accuracy with eval batches of 128 ($acc) equals one batch of 10000 ($acc2)"
      else
        fail "train: accuracy with eval batches of 128 ($acc) differs from one batch of 10000 ($acc2)"
      fi
    fi
    if grep -q '"test_accuracy"' "$TMP/log.json" 2>/dev/null; then
      pass "train: --json wrote the epoch log"
    else
      fail "train: --json did not write a log with test_accuracy"
    fi
  fi
else
  echo "skip: $DATA_DIR not found (install dataset-fashion-mnist): training checks skipped"
  skipped=1
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
if [ "$skipped" -ne 0 ]; then exit 77; fi
echo "all checks passed"
