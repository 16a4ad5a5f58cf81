#!/bin/sh
# `chutney quantize` (post-training static int8 quantization) and `chutney eval --model-file`:
# a briefly trained CNN (batch norm, folded at quantization) and MLP are quantized, reloaded from
# the graph file and scored on the test set; the int8 model must run int8 ops and stay within
# 1.5 points of the f32 accuracy. Bad input: clear errors and nothing written.
#
# Usage: cli_quantize_test.sh /path/to/chutney (meson test 'cli_quantize', tests/unit/meson.build)
# Needs Debian's dataset-fashion-mnist; without it the test reports "skipped" (exit 77).
set -u

CHUTNEY=${1:?usage: cli_quantize_test.sh /path/to/chutney}
DATA_DIR=${CHUTNEY_TEST_DATA_DIR:-/usr/share/datasets/fashion-mnist}
[ -d "$DATA_DIR" ] || { echo "skip: $DATA_DIR not found (install dataset-fashion-mnist)"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/chutney-quantize-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM

failures=0
# fail, pass, run NAME STATUS ARGS..., contains NAME SUFFIX TEXT (cli_lib.sh).
. "$(dirname "$0")/cli_lib.sh"
acc_of() { sed -n 's/^test accuracy: \([0-9.]*\)$/\1/p' "$TMP/$1.out"; }
# within A B POINTS: |A - B| <= POINTS / 100
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= p / 100) }'; }

run help 0 quantize --help && contains help out "usage: chutney quantize"

for model in cnn mlp; do
  widths=""
  [ "$model" = cnn ] && widths="--cnn-widths 8,16,32,bn"
  # shellcheck disable=SC2086
  run "train-$model" 0 train --model $model $widths --epochs 1 --limit 2048 --data-dir "$DATA_DIR" --quiet \
    --eval-batch-size 1000 --checkpoint-dir "$TMP/ck-$model" || continue
  ck="$TMP/ck-$model/$model-epoch001.safetensors"
  run "eval-$model" 0 eval --checkpoint "$ck" --data-dir "$DATA_DIR" || continue
  f32=$(acc_of "eval-$model")
  run "quantize-$model" 0 quantize --checkpoint "$ck" --calib 4 --out "$TMP/$model.ctn" --data-dir "$DATA_DIR" || continue
  contains "quantize-$model" out "calibrated on 4 batches"
  run "eval-int8-$model" 0 eval --model-file "$TMP/$model.ctn" --data-dir "$DATA_DIR" || continue
  i8=$(acc_of "eval-int8-$model")
  if within "$f32" "$i8" 1.5; then pass "$model: int8 accuracy $i8 within 1.5 points of f32 $f32"; else
    fail "$model: int8 accuracy '$i8' is not within 1.5 points of f32 '$f32'"
  fi
  if [ "$model" = cnn ]; then
    contains "eval-int8-$model" out "qlinear_conv2d 2"
    contains "eval-int8-$model" out "qlinear_matmul 1"
  else
    contains "eval-int8-$model" out "qlinear_matmul 2"
  fi
  contains "eval-int8-$model" out "matmul_integer 1"
done

# --eval and --bench print both accuracies and the timing; the f32 accuracy of the folded network
# is the checkpoint's (batch norm folding is exact up to rounding).
ck="$TMP/ck-cnn/cnn-epoch001.safetensors"
if [ -f "$ck" ] && run bench 0 quantize --checkpoint "$ck" --calib 2 --out "$TMP/b.ctn" --eval --bench 2 --data-dir "$DATA_DIR"; then
  contains bench out "CPU time per batch of 1000"
  folded=$(sed -n 's/^test accuracy: f32 \([0-9.]*\), .*/\1/p' "$TMP/bench.out")
  if within "$folded" "$(acc_of eval-cnn)" 0.1; then pass "folded f32 accuracy $folded matches eval"; else
    fail "folded f32 accuracy '$folded' differs from eval's '$(acc_of eval-cnn)'"
  fi
fi

# Bad input: a clear error, exit 1 or 2, nothing written.
run no-ckpt 1 quantize --checkpoint "$TMP/missing.safetensors" --out "$TMP/x.ctn" && contains no-ckpt err "missing.safetensors"
run calib0 2 quantize --checkpoint "$ck" --calib 0 --out "$TMP/x.ctn" && contains calib0 err "--calib"
run no-out 2 quantize --checkpoint "$ck" && contains no-out err "--out"
mkfifo "$TMP/fifo"
run fifo 1 quantize --checkpoint "$ck" --out "$TMP/fifo" && contains fifo err "not a regular file"
[ -p "$TMP/fifo" ] && pass "fifo: still a FIFO" || fail "fifo: the FIFO was replaced"
run nodir 1 quantize --checkpoint "$ck" --out "$TMP/no/such/dir/x.ctn" && contains nodir err "does not exist"
run wrong-model 1 quantize --checkpoint "$ck" --model mlp --out "$TMP/x.ctn" && contains wrong-model err "linear1.weight"
run eval-not-graph 1 eval --model-file "$ck" --data-dir "$DATA_DIR" && contains eval-not-graph err "not a chutney graph file"
run eval-both 2 eval --model-file "$TMP/cnn.ctn" --checkpoint "$ck" && contains eval-both err "exclude each other"
# A checkpoint whose weights hold a NaN: refused, naming the tensor.
if python3 - "$ck" "$TMP/nan.safetensors" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
start = 8 + n + json.loads(data[8:8 + n])["conv1.weight"]["data_offsets"][0]
open(sys.argv[2], "wb").write(data[:start] + struct.pack("<f", float("nan")) + data[start + 4:])
PY
then
  run nan-weights 1 quantize --checkpoint "$TMP/nan.safetensors" --out "$TMP/x.ctn" --data-dir "$DATA_DIR" &&
    contains nan-weights err "conv1.weight holds NaN"
else
  fail "could not write a NaN checkpoint with python3"
fi
[ -e "$TMP/x.ctn" ] && fail "a failed quantize left $TMP/x.ctn" || pass "failed runs wrote nothing"
if ls -a "$TMP" | grep -q 'tmp'; then fail "temporary files left in $TMP: $(ls -a "$TMP")"; else pass "no temporaries left"; fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
