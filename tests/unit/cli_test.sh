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
# fail, pass, run NAME STATUS ARGS..., contains NAME SUFFIX TEXT (cli_lib.sh).
. "$(dirname "$0")/cli_lib.sh"

# --- help and usage errors ----------------------------------------------------------------
run help 0 --help && contains help out "usage: chutney"
for cmd in version plugins train eval graph; do
  run "help-$cmd" 0 "$cmd" --help && contains "help-$cmd" out "usage: chutney $cmd"
done
for sub in run info test export; do  # every subcommand of onnx answers --help on stdout, exit 0
  run "help-onnx-$sub" 0 onnx "$sub" --help && contains "help-onnx-$sub" out "usage: chutney onnx"
done
run unknown-command 2 frobnicate && contains unknown-command err "unknown command 'frobnicate'"
run unknown-option 2 train --no-such-option && contains unknown-option err "unknown option '--no-such-option'"
run bad-number 2 train --epochs many && contains bad-number err "--epochs"
run bad-widths 2 train --model cnn --cnn-widths 16,32,64,xx && contains bad-widths err "C1,C2[,C3],FC[,bn][,valid][,k3]"
run bad-budget 2 train --memory-budget lots && contains bad-budget err "--memory-budget"
run bad-precision 2 train --precision f8 && contains bad-precision err "--precision expects f32, bf16 or f16, got 'f8'"
run no-command 2

# --- version --------------------------------------------------------------------------------
run version 0 version && contains version out "ABI"

# --- ONNX models with a dynamic batch (tests/onnx/models/dynamic_batch.onnx: input [batch, 4]) ---
M=$(dirname "$0")/../onnx/models/dynamic_batch
# info with no --input: batch 1, the real op list and placement (not "folded", not "-").
if run onnx-info-dynamic 0 onnx info "$M.onnx"; then
  contains onnx-info-dynamic out "symbolic input dimension is taken as 1"
  contains onnx-info-dynamic out "matmul,add"
  if grep -E '^(Gemm|Relu) ' "$TMP/onnx-info-dynamic.out" | grep -qE 'folded at import| - '; then
    fail "onnx-info-dynamic: an op is shown as folded or unplaced"
  else
    pass "onnx-info-dynamic: Gemm and Relu placed on the backends"
  fi
fi
run onnx-info-input 0 onnx info "$M.onnx" --input "input=$M.in.npy" && contains onnx-info-input out "relu"
# A value that does not fit names the model's expected shape with its symbolic dims.
run onnx-run-misfit 1 onnx run "$M.onnx" --input "input=$M.bad.npy" --output-dir "$TMP/onnx-out" &&
  contains onnx-run-misfit err "has shape [2, 5], which does not fit the model's [batch, 4]"
run onnx-run-fit 0 onnx run "$M.onnx" --input "input=$M.in.npy" --output-dir "$TMP/onnx-out" &&
  contains onnx-run-fit out "y: f32[2, 3]"
# ABI 1.5 dtypes through the CLI's doors (models made with onnx.helper): numpy's float16 .npy in,
# the same bytes out of an Identity; a bf16 output (an int32_data initializer) has no .npy form
# and is refused by name.
L=$(dirname "$0")/../onnx
if run onnx-run-f16 0 onnx run "$L/models/identity_f16.onnx" --input "x=$L/data_f16.npy" --output-dir "$TMP/onnx-f16"; then
  contains onnx-run-f16 out "y: f16[2, 3]"
  if cmp -s "$TMP/onnx-f16/y.npy" "$L/data_f16.npy"; then
    pass "onnx-run-f16: y.npy is numpy's float16 file byte for byte"
  else
    fail "onnx-run-f16: y.npy differs from the float16 input"
  fi
fi
run onnx-run-bf16 1 onnx run "$L/models/const_bf16.onnx" --output-dir "$TMP/onnx-bf16" &&
  contains onnx-run-bf16 err "a bf16 tensor has no .npy dtype"

# --- plugins ----------------------------------------------------------------------------------
if CHUTNEY_CACHE_DIR="$TMP/cache" run plugins 0 plugins --explain; then
  contains plugins out "ctn-cpu.so"
  contains plugins out "loaded"
  contains plugins out "cpu"
  # Each available GPU backend explains its placement policy: measured (here, as the cache is
  # empty) and decided per op class.
  for dev in opencl vulkan; do
    if grep -Eq "^  $dev +available" "$TMP/plugins.out"; then
      contains plugins out "placement   $dev: auto, measured now in"
      contains plugins out "  gemm: "
      contains plugins out "  elementwise: "
    fi
  done
fi

# --- data errors name the package --------------------------------------------------------------
if run missing-data 1 train --data-dir "$TMP/nonexistent" --quiet; then
  contains missing-data err "dataset-fashion-mnist"
  contains missing-data err "train-images-idx3-ubyte.gz"
fi
mkdir -p "$TMP/corrupt"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  printf 'this is not an IDX file' | gzip >"$TMP/corrupt/$f.gz"
done
if run corrupt-data 1 train --data-dir "$TMP/corrupt" --quiet; then
  contains corrupt-data err "not an IDX file"
  contains corrupt-data err "train-images-idx3-ubyte.gz"
  contains corrupt-data err "dataset-fashion-mnist"
fi

# --- eval: unusable checkpoints are clear errors, never crashes ---------------------------------
run eval-no-checkpoint 2 eval && contains eval-no-checkpoint err "--checkpoint"
if run eval-missing 1 eval --checkpoint "$TMP/nonexistent.safetensors"; then
  contains eval-missing err "nonexistent.safetensors"
fi
printf '\377\377\377\377\377\377\377\377{"a":1}' >"$TMP/garbage.safetensors"
if run eval-corrupt 1 eval --checkpoint "$TMP/garbage.safetensors"; then
  contains eval-corrupt err "CTN_ERR_CORRUPT"
  contains eval-corrupt err "garbage.safetensors"
fi

# --- graph: the DOT writer on the real training graph -----------------------------------------
if run graph 0 graph --model mlp --out "$TMP/mlp.dot" --no-svg; then
  if grep -q 'digraph' "$TMP/mlp.dot"; then pass "graph: DOT file written"
  else fail "graph: $TMP/mlp.dot is not a DOT digraph"; fi
fi
run graph-no-out 2 graph --model mlp && contains graph-no-out err "--out"
if run graph-cnn 0 graph --model cnn --out "$TMP/cnn.dot" --no-svg; then
  # The training graph holds the backward pass: a convolution's gradient ops must be there.
  if grep -q 'conv2d' "$TMP/cnn.dot" && grep -qi 'grad\|backward' "$TMP/cnn.dot"; then
    pass "graph: cnn DOT file holds forward and backward convolutions"
  else
    fail "graph: $TMP/cnn.dot lacks conv2d forward/backward nodes"
  fi
fi
run graph-bad-model 2 graph --model resnet --out "$TMP/x.dot" && contains graph-bad-model err "cnn"

# json_field FILE EPOCH FIELD: the value of FIELD in the epoch log entry of EPOCH.
json_field() {
  sed -n "s/.*{\"epoch\": $2, .*\"$3\": \([-0-9.e+]*\).*/\1/p" "$1"
}
final_acc() { sed -n 's/^final test accuracy: \([0-9.]*\)$/\1/p' "$TMP/$1.out"; }
# eval_matches NAME LABEL ACC: run NAME (an `eval` run) printed "test accuracy: ACC" exactly.
eval_matches() {
  local a_eval
  a_eval=$(sed -n 's/^test accuracy: \([0-9.]*\)$/\1/p' "$TMP/$1.out")
  if [ -n "$a_eval" ] && [ "$a_eval" = "$3" ]; then
    pass "eval: $2 accuracy $a_eval equals the training run's"
  else
    fail "eval: $2 accuracy '$a_eval' differs from the training run's '$3'"
  fi
}

# same_epoch_loss TAG EPOCH: the train loss of EPOCH is the same in $TMP/full$TAG.json (an
# uninterrupted run) and $TMP/resumed$TAG.json (a run resumed from a checkpoint).
same_epoch_loss() {
  l_full=$(json_field "$TMP/full$1.json" "$2" train_loss)
  l_res=$(json_field "$TMP/resumed$1.json" "$2" train_loss)
  if [ -n "$l_full" ] && [ "$l_full" = "$l_res" ]; then
    pass "resume$1: epoch-$2 train loss $l_res equals the uninterrupted run's"
  else
    fail "resume$1: epoch-$2 train loss '$l_res' differs from the uninterrupted run's '$l_full'"
  fi
}

# resume_matches TAG TRAIN-OPTIONS...: trains with the options (two epochs) uninterrupted
# (full$TAG, with --json and --plot), for one epoch with checkpoints in $TMP/ckpt$TAG
# (part$TAG), and resumed from that epoch-1 checkpoint (resumed$TAG); then checks epoch 2's loss.
# Non-zero status when one of the runs failed.
resume_matches() {
  tag=$1
  shift
  run "full$tag" 0 train "$@" --json "$TMP/full$tag.json" --plot "$TMP/full$tag.svg" &&
    run "part$tag" 0 train "$@" --stop-after 1 --checkpoint-dir "$TMP/ckpt$tag" &&
    run "resumed$tag" 0 train --resume "$TMP/ckpt$tag/mlp-epoch001.safetensors" \
      --data-dir "$DATA_DIR" --quiet --eval-batch-size 1000 --json "$TMP/resumed$tag.json" ||
    return 1
  same_epoch_loss "$tag" 2
  return 0
}

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
        --eval-batch-size 10000 --quiet --print-steps; then
      # --print-steps: one line per update (16 of 128), whose mean is the epoch's train loss.
      steps=$(grep -cE '^step [0-9]+ lr [0-9.e+-]+ loss [0-9.e+-]+$' "$TMP/train-eval-batch.out")
      mean=$(awk '/^step / { s += $6; n++ } END { if (n) printf "%.4f", s / n }' "$TMP/train-eval-batch.out")
      if [ "$steps" -eq 16 ] && grep -qF "train loss $mean," "$TMP/train-eval-batch.out"; then
        pass "train: --print-steps printed 16 updates averaging the epoch loss $mean"
      else
        fail "train: --print-steps printed $steps step lines (mean $mean)"
      fi
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

  # --memory-budget: the CNN (batch norm) trained with recomputation prints the same updates
  # as without; a budget below the minimum fails at compile time naming the minimum.
  common="--model cnn --cnn-widths 8,16,32,bn --epochs 1 --limit 256 --data-dir $DATA_DIR --quiet --print-steps"
  if run cnn-nobudget 0 train $common && run cnn-budget 0 train $common --memory-budget auto; then
    contains cnn-budget out "steps recomputed"
    contains cnn-budget out "recomputed: "
    if grep '^step ' "$TMP/cnn-nobudget.out" >"$TMP/steps0" && grep '^step ' "$TMP/cnn-budget.out" >"$TMP/steps1" &&
        cmp -s "$TMP/steps0" "$TMP/steps1"; then
      pass "train --memory-budget auto: $(wc -l <"$TMP/steps1") updates identical to the unbudgeted run"
    else
      fail "train --memory-budget auto: the updates differ from the unbudgeted run"
    fi
    min=$(sed -n 's/^memory budget .* (\([0-9]*\) bytes): .*/\1/p' "$TMP/cnn-budget.out")
    if [ -n "$min" ] && run cnn-below 1 train $common --memory-budget $((min - 1)); then
      contains cnn-below err "below the minimum this plan reaches by recomputation, $min bytes"
    else
      fail "train --memory-budget: no minimum in the report"
    fi
  fi

  # --precision: matmuls and convolutions in bf16/f16 (f16 with loss scaling); the precision is
  # saved in the checkpoint and a resumed run takes it from there.
  common="--model cnn --cnn-widths 8,16,32,bn --limit 256 --data-dir $DATA_DIR --quiet --eval-batch-size 1000"
  for prec in bf16 f16; do
    if run "cnn-$prec" 0 train $common --epochs 2 --stop-after 1 --precision $prec --json "$TMP/cnn-$prec.json" \
        --checkpoint-dir "$TMP/ck-$prec"; then
      contains "cnn-$prec" out "training plan autocast $prec: "
      contains "cnn-$prec" json "\"precision\": \"$prec\""
      if run "cnn-$prec-resumed" 0 train --resume "$TMP/ck-$prec/cnn-epoch001.safetensors" --data-dir "$DATA_DIR" --quiet \
          --eval-batch-size 1000; then
        contains "cnn-$prec-resumed" out "training plan autocast $prec: "
        contains "cnn-$prec-resumed" out "final test accuracy"
      fi
    fi
  done

  # The same with AdamW: its moments and the step (bias correction) come back from the checkpoint.
  common="--model mlp --limit 512 --seed 5 --data-dir $DATA_DIR --quiet --eval-batch-size 1000"
  common="$common --optimizer adamw --epochs 2"
  resume_matches -adamw $common

  # A short CNN run (narrow, for speed, with batch norm): the convolution path trains end to end
  # and beats chance clearly; eval rebuilds the same widths and batch norm from the checkpoint's
  # metadata and, with the saved running statistics, reproduces the accuracy exactly.
  if run train-cnn 0 train --model cnn --cnn-widths 16,32,64,bn --epochs 1 --limit 1024 \
      --data-dir "$DATA_DIR" --quiet --eval-batch-size 1000 --checkpoint-dir "$TMP/ckcnn"; then
    acc=$(final_acc train-cnn)
    if [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a > 0.4 && a <= 1.0) }'; then
      pass "train: cnn final test accuracy $acc > 0.4"
    else
      fail "train: cnn final test accuracy '$acc' is not > 0.4"
    fi
    contains train-cnn out "loader wait"
    contains train-cnn out "conv5x5(16->32) batchnorm"
    if run eval-cnn 0 eval --checkpoint "$TMP/ckcnn/cnn-epoch001.safetensors" --data-dir "$DATA_DIR"; then
      eval_matches eval-cnn "cnn checkpoint" "$acc"
    fi
  fi

  # Three conv blocks with 3x3 kernels: trains, names its layers, and eval rebuilds the same
  # network from the checkpoint's "cnn_widths" metadata (the accuracy reproduces exactly).
  if run train-cnn3 0 train --model cnn --cnn-widths 8,16,16,32,bn,k3 --epochs 1 --limit 512 \
      --data-dir "$DATA_DIR" --quiet --eval-batch-size 1000 --checkpoint-dir "$TMP/ckcnn3"; then
    contains train-cnn3 out "conv3x3(16->16) batchnorm relu maxpool2, fc 144-32"
    acc3=$(final_acc train-cnn3)
    if run eval-cnn3 0 eval --checkpoint "$TMP/ckcnn3/cnn-epoch001.safetensors" --data-dir "$DATA_DIR"; then
      eval_matches eval-cnn3 "3-block k3 cnn checkpoint" "$acc3"
    fi
  fi

  # --time-budget: training stops when the budget is spent (0.3 s is well under one MLP epoch of
  # 60000 images) and the cosine schedule follows the clock: the rate falls from the first update.
  if run budget 0 train --model mlp --epochs 3 --time-budget 0.3 --data-dir "$DATA_DIR" --quiet \
      --eval-batch-size 1000 --print-steps; then
    contains budget out "time budget of 0.3 s reached after"
    contains budget out "final test accuracy:"
    lr_first=$(sed -n 's/^step 1 lr \([^ ]*\) .*/\1/p' "$TMP/budget.out")
    lr_last=$(sed -n 's/^step [0-9]* lr \([^ ]*\) .*/\1/p' "$TMP/budget.out" | tail -n 1)
    steps=$(grep -c '^step ' "$TMP/budget.out")
    if [ -n "$lr_first" ] && [ -n "$lr_last" ] && [ "$steps" -lt 1406 ] &&
        awk -v a="$lr_first" -v b="$lr_last" 'BEGIN { exit !(b < a) }'; then
      pass "time budget: stopped after $steps updates (< 3 epochs), lr $lr_first -> $lr_last"
    else
      fail "time budget: $steps updates, lr '$lr_first' -> '$lr_last' (expected < 1406 updates and a falling rate)"
    fi
  fi
  # A budget the run does not need changes nothing: the same updates, bit for bit.
  if run nobudget 0 train --model mlp --epochs 1 --limit 1280 --data-dir "$DATA_DIR" --quiet \
        --eval-batch-size 1000 --print-steps &&
      run bigbudget 0 train --model mlp --epochs 1 --limit 1280 --time-budget 1000 --data-dir "$DATA_DIR" \
        --quiet --eval-batch-size 1000 --print-steps; then
    if grep '^step ' "$TMP/nobudget.out" > "$TMP/nobudget.steps" && grep '^step ' "$TMP/bigbudget.out" > "$TMP/bigbudget.steps" &&
        cmp -s "$TMP/nobudget.steps" "$TMP/bigbudget.steps"; then
      pass "time budget: an unneeded budget leaves the $(wc -l < "$TMP/nobudget.steps") updates identical"
    else
      fail "time budget: an unneeded budget changed the updates"
    fi
  fi
  run budget-zero 2 train --time-budget 0 && contains budget-zero err "--time-budget"
  run budget-dist 2 train --time-budget 10 --distributed mpi && contains budget-dist err "--time-budget cannot be combined with --distributed"

  # Checkpoint + resume: epoch 2 of a resumed run reproduces the uninterrupted run's loss (with
  # momentum state, a cosine schedule with warm-up, and the options taken from the checkpoint).
  common="--model mlp --limit 1024 --seed 7 --data-dir $DATA_DIR --quiet --eval-batch-size 1000"
  common="$common --optimizer sgd --schedule cosine --warmup 3 --epochs 2"
  if resume_matches "" $common; then
    # The resumed log carries epoch 1 from the checkpoint.
    same_epoch_loss "" 1
    contains resumed out "resumed from"
    # eval on the epoch-1 checkpoint gives the accuracy that training printed for epoch 1.
    if run eval 0 eval --checkpoint "$TMP/ckpt/mlp-epoch001.safetensors" --data-dir "$DATA_DIR"; then
      eval_matches eval checkpoint "$(final_acc part)"
    fi
    # A truncated checkpoint is an error, not a crash.
    head -c 1000 "$TMP/ckpt/mlp-epoch001.safetensors" >"$TMP/truncated.safetensors"
    run eval-truncated 1 eval --checkpoint "$TMP/truncated.safetensors" --data-dir "$DATA_DIR" &&
      contains eval-truncated err "truncated.safetensors"
    # The SVG plot: a well-formed document with both series.
    if [ -s "$TMP/full.svg" ] && [ "$(grep -c '<polyline' "$TMP/full.svg")" -eq 2 ] &&
        grep -q '</svg>' "$TMP/full.svg"; then
      pass "plot: SVG written with two series"
    else
      fail "plot: $TMP/full.svg is missing or lacks the two series"
    fi
    if command -v python3 >/dev/null 2>&1; then
      if python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' \
          "$TMP/full.svg" 2>"$TMP/svg.err"; then
        pass "plot: SVG parses as XML"
      else
        fail "plot: SVG does not parse: $(cat "$TMP/svg.err")"
      fi
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
