#!/bin/sh
# The CLI's bad-input matrix (issue 12): corrupt, truncated, swapped, missing or foreign data and
# checkpoints, FIFOs and devices, bad flags and environment values. Each case runs under a
# timeout (a hang fails it), must exit 1 (a runtime error) or 2 (a usage error) as listed, must
# name the offending file, flag or variable on stderr, and must leave the existing checkpoints
# byte for byte as they were. Then the checkpoint directory's tidying: stale temporary files of
# dead writers are removed, live ones kept, and --keep-last retention keeps the best epoch.
#
# Usage: cli_bad_input_test.sh /path/to/chutney   (needs Debian's dataset-fashion-mnist; exit 77
# without it). Everything it writes is under one mktemp folder, removed at the end.
set -u

CHUTNEY=${1:?usage: cli_bad_input_test.sh /path/to/chutney}
DATA_DIR=${CHUTNEY_TEST_DATA_DIR:-/usr/share/datasets/fashion-mnist}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/chutney-bad-input.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
LIMIT=${CLI_CASE_TIMEOUT:-30}

if [ ! -d "$DATA_DIR" ]; then
  echo "skip: $DATA_DIR not found (install dataset-fashion-mnist)"
  exit 77
fi

failures=0 cases=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# A small run's checkpoints: the files every case must leave untouched.
CK=$TMP/ck
if ! "$CHUTNEY" train --model mlp --limit 256 --batch-size 64 --epochs 2 --seed 3 --quiet \
    --data-dir "$DATA_DIR" --eval-batch-size 1000 --checkpoint-dir "$CK" >"$TMP/setup.out" 2>&1; then
  cat "$TMP/setup.out"
  echo "FAIL: could not train the reference checkpoints"
  exit 1
fi
GOOD=$CK/mlp-epoch002.safetensors
sums() { (cd "$CK" && ls -A | sort && cat -- * | cksum); }
before=$(sums)

# Data sets built from the real files: truncated, corrupt, swapped, foreign.
D=$TMP/data
mkdir -p "$D/trunc" "$D/swapped" "$D/garbage" "$D/empty" "$D/fifo" "$D/dir" "$D/zero" "$D/mixed"
for f in "$DATA_DIR"/*; do
  b=$(basename "$f")
  gz=""
  case "$b" in *.gz) gz=1 ;; esac
  head -c 3000 "$f" >"$D/trunc/$b"
  printf 'not an idx file at all' >"$D/garbage/$b"
  : >"$D/empty/$b"
  mkfifo "$D/fifo/$b"
  mkdir -p "$D/dir/$b"
  ln -s /dev/zero "$D/zero/$b"
done
# swapped: images where labels should be and the other way round
for s in train t10k; do
  for ext in "" .gz; do
    [ -e "$DATA_DIR/$s-images-idx3-ubyte$ext" ] || continue
    cp "$DATA_DIR/$s-images-idx3-ubyte$ext" "$D/swapped/$s-labels-idx1-ubyte$ext"
    cp "$DATA_DIR/$s-labels-idx1-ubyte$ext" "$D/swapped/$s-images-idx3-ubyte$ext"
    # mixed: the test set's labels with the training images
    cp "$DATA_DIR/$s-images-idx3-ubyte$ext" "$D/mixed/$s-images-idx3-ubyte$ext"
  done
done
for ext in "" .gz; do
  [ -e "$DATA_DIR/t10k-labels-idx1-ubyte$ext" ] && cp "$DATA_DIR/t10k-labels-idx1-ubyte$ext" "$D/mixed/train-labels-idx1-ubyte$ext"
  [ -e "$DATA_DIR/train-labels-idx1-ubyte$ext" ] && cp "$DATA_DIR/train-labels-idx1-ubyte$ext" "$D/mixed/t10k-labels-idx1-ubyte$ext"
done

# Checkpoints: truncated, corrupt, foreign, special files.
C=$TMP/c
mkdir -p "$C"
size=$(wc -c <"$GOOD")
head -c 7 "$GOOD" >"$C/short.safetensors"
head -c 1000 "$GOOD" >"$C/truncated.safetensors"
head -c $((size - 1)) "$GOOD" >"$C/minus1.safetensors"
{ cat "$GOOD"; printf 'x'; } >"$C/trailing.safetensors"
printf '\377\377\377\377\377\377\377\377{}' >"$C/hugeheader.safetensors"
printf '\020\000\000\000\000\000\000\000{"a":1,"a":2}  ' >"$C/dupkey.safetensors"
printf '\002\000\000\000\000\000\000\000{]' >"$C/badjson.safetensors"
printf '\002\000\000\000\000\000\000\000{}' >"$C/nothing.safetensors"
: >"$C/empty.safetensors"
cp "$DATA_DIR/$(ls "$DATA_DIR" | head -n 1)" "$C/idx-as-checkpoint.safetensors"
python3 - "$GOOD" "$C" <<'PY' || fail "could not build the hostile checkpoints"
import json, struct, sys
good, out = sys.argv[1], sys.argv[2]
raw = open(good, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
data = raw[8 + n:]
def write(name, h, d=data):
    b = json.dumps(h).encode()
    open(f"{out}/{name}.safetensors", "wb").write(struct.pack("<Q", len(b)) + b + d)
names = [k for k in hdr if k != "__metadata__"]
h = dict(hdr); h[names[0]] = dict(h[names[0]], dtype="F16"); write("f16", h)
h = dict(hdr); h[names[0]] = dict(h[names[0]], shape=[3, 3]); write("wrongshape", h)
h = dict(hdr); h[names[0]] = dict(h[names[0]], data_offsets=[0, len(data) + 4096]); write("pastend", h)
h = dict(hdr); del h[names[0]]; write("missingtensor", h)
h = dict(hdr); h["__metadata__"] = dict(h.get("__metadata__", {}), model="resnet"); write("foreignmodel", h)
h = {k: v for k, v in hdr.items() if k != "__metadata__"}; write("nometadata", h)
h = dict(hdr); h["__metadata__"] = dict(h.get("__metadata__", {}), epoch="-4"); write("badepoch", h)
h = dict(hdr); h[names[0]] = dict(h[names[0]], shape=[-1, 2]); write("negshape", h)
h = dict(hdr); h["__metadata__"] = dict(h.get("__metadata__", {}), batch_size="0"); write("badbatch", h)
h = dict(hdr); h["__metadata__"] = dict(h.get("__metadata__", {}), optimizer="rmsprop"); write("badoptimizer", h)
PY
mkfifo "$C/fifo.safetensors"
mkdir -p "$C/dir.safetensors"
cp "$C/minus1.safetensors" "$C/unreadable.safetensors" && chmod 000 "$C/unreadable.safetensors"  # unreadable unless root: truncated then

# bad NAME STATUS TEXT ARGS...: chutney ARGS exits STATUS within the limit and says TEXT on stderr.
bad() {
  name=$1 want=$2 text=$3
  shift 3
  cases=$((cases + 1))
  timeout -k 5 "$LIMIT" "$CHUTNEY" "$@" </dev/null >"$TMP/$name.out" 2>"$TMP/$name.err"
  got=$?
  if [ "$got" -eq 124 ] || [ "$got" -eq 137 ]; then
    fail "$name: 'chutney $*' did not finish within ${LIMIT}s"
    return
  fi
  if [ "$got" -ne "$want" ]; then
    fail "$name: 'chutney $*' exited $got, expected $want"
    sed 's/^/    | /' "$TMP/$name.err" | tail -5
    return
  fi
  if ! grep -qF -- "$text" "$TMP/$name.err"; then
    fail "$name: stderr does not name '$text'"
    sed 's/^/    | /' "$TMP/$name.err" | tail -5
    return
  fi
  echo "ok:   $name (exit $got, names '$text')"
}
# benv NAME STATUS TEXT VAR=VALUE ARGS...: the same with one environment variable set.
benv() {
  name=$1 want=$2 text=$3 assign=$4
  shift 4
  cases=$((cases + 1))
  env "$assign" timeout -k 5 "$LIMIT" "$CHUTNEY" "$@" </dev/null >"$TMP/$name.out" 2>"$TMP/$name.err"
  got=$?
  if [ "$got" -eq 124 ] || [ "$got" -eq 137 ]; then
    fail "$name: '$assign chutney $*' did not finish within ${LIMIT}s"
  elif [ "$got" -ne "$want" ]; then
    fail "$name: '$assign chutney $*' exited $got, expected $want"
    sed 's/^/    | /' "$TMP/$name.err" | tail -5
  elif ! grep -qF -- "$text" "$TMP/$name.err"; then
    fail "$name: stderr does not name '$text'"
    sed 's/^/    | /' "$TMP/$name.err" | tail -5
  else
    echo "ok:   $name (exit $got, names '$text')"
  fi
}

T="train --model mlp --limit 128 --batch-size 64 --epochs 1 --quiet --eval-batch-size 1000"
E="eval --batch-size 1000"

# --- data sets -------------------------------------------------------------------------------
for kind in trunc swapped garbage empty fifo dir zero mixed; do
  bad "train-data-$kind" 1 "$D/$kind" $T --data-dir "$D/$kind"
  bad "eval-data-$kind" 1 "$D/$kind" $E --checkpoint "$GOOD" --data-dir "$D/$kind"
done
bad train-data-missing 1 "$TMP/nowhere" $T --data-dir "$TMP/nowhere"
bad train-data-file 1 "$GOOD" $T --data-dir "$GOOD"

# --- checkpoints -------------------------------------------------------------------------------
for c in short truncated minus1 trailing hugeheader dupkey badjson nothing empty idx-as-checkpoint \
    f16 wrongshape pastend missingtensor negshape fifo dir unreadable; do
  bad "eval-ckpt-$c" 1 "$C/$c.safetensors" $E --checkpoint "$C/$c.safetensors" --data-dir "$DATA_DIR"
  bad "resume-ckpt-$c" 1 "$C/$c.safetensors" $T --resume "$C/$c.safetensors" --data-dir "$DATA_DIR"
  bad "quantize-ckpt-$c" 1 "$C/$c.safetensors" quantize --checkpoint "$C/$c.safetensors" --out "$TMP/q.ctn" --data-dir "$DATA_DIR"
  bad "eval-model-file-$c" 1 "$C/$c.safetensors" eval --model-file "$C/$c.safetensors" --data-dir "$DATA_DIR"
done
[ -e "$TMP/q.ctn" ] && fail "a failed chutney quantize wrote $TMP/q.ctn"
bad eval-ckpt-missing 1 "$TMP/none.safetensors" $E --checkpoint "$TMP/none.safetensors" --data-dir "$DATA_DIR"
bad eval-ckpt-foreign-model 2 "resnet" $E --checkpoint "$C/foreignmodel.safetensors" --data-dir "$DATA_DIR"
bad eval-ckpt-as-cnn 1 "$GOOD" $E --checkpoint "$GOOD" --model cnn --data-dir "$DATA_DIR"
bad resume-bad-epoch 1 "epoch" $T --resume "$C/badepoch.safetensors" --data-dir "$DATA_DIR"
# Bad metadata is the file's fault (exit 1, the file and the key named), not a bad flag (issue 30).
bad resume-bad-batch 1 "$C/badbatch.safetensors: metadata \"batch_size\"" train --model mlp --limit 128 --epochs 3 --quiet --resume "$C/badbatch.safetensors" --data-dir "$DATA_DIR"
bad resume-bad-optimizer 1 "$C/badoptimizer.safetensors: metadata \"optimizer\"" train --model mlp --limit 128 --epochs 3 --quiet --resume "$C/badoptimizer.safetensors" --data-dir "$DATA_DIR"
bad eval-ckpt-required 2 "--checkpoint" eval --data-dir "$DATA_DIR"
bad ckpt-dir-is-file 1 "$GOOD" $T --data-dir "$DATA_DIR" --checkpoint-dir "$GOOD"
bad ckpt-dir-unmakeable 1 "$GOOD/sub" $T --data-dir "$DATA_DIR" --checkpoint-dir "$GOOD/sub"

# --- flags ---------------------------------------------------------------------------------------
bad flag-epochs-zero 2 "--epochs" $T --data-dir "$DATA_DIR" --epochs 0
bad flag-epochs-text 2 "--epochs" $T --data-dir "$DATA_DIR" --epochs many
bad flag-batch-neg 2 "--batch-size" $T --data-dir "$DATA_DIR" --batch-size -5
bad flag-lr-nan 2 "--lr" $T --data-dir "$DATA_DIR" --lr nan
bad flag-lr-huge 2 "--lr" $T --data-dir "$DATA_DIR" --lr 1e300
bad flag-threads-huge 2 "--threads" $T --data-dir "$DATA_DIR" --threads 100000
bad flag-threads-zero 2 "--threads" $T --data-dir "$DATA_DIR" --threads 0
bad flag-workers-huge 2 "--workers" $T --data-dir "$DATA_DIR" --workers 100000
bad flag-model 2 "transformer" $T --data-dir "$DATA_DIR" --model transformer
bad flag-optimizer 2 "rmsprop" $T --data-dir "$DATA_DIR" --optimizer rmsprop
bad flag-schedule 2 "exponential" $T --data-dir "$DATA_DIR" --schedule exponential
bad flag-widths 2 "--cnn-widths" $T --data-dir "$DATA_DIR" --model cnn --cnn-widths 0,0,0
bad flag-time-budget 2 "--time-budget" $T --data-dir "$DATA_DIR" --time-budget -1
bad flag-limit-small 2 "--limit" $T --data-dir "$DATA_DIR" --limit 3
bad flag-keep-last-neg 2 "--keep-last" $T --data-dir "$DATA_DIR" --keep-last -1
bad flag-missing-value 2 "--epochs" $T --data-dir "$DATA_DIR" --epochs
bad flag-backend 1 "warp-drive" $T --data-dir "$DATA_DIR" --backend warp-drive
bad flag-json-dir 1 "$TMP" $T --data-dir "$DATA_DIR" --json "$TMP"
bad flag-plot-nowhere 1 "$TMP/no/such/dir/p.svg" $T --data-dir "$DATA_DIR" --plot "$TMP/no/such/dir/p.svg"
bad graph-out-nowhere 1 "$TMP/no/such/g.dot" graph --out "$TMP/no/such/g.dot" --no-svg
bad plugins-path 2 "$TMP/no-plugins" plugins --path "$TMP/no-plugins"
# chutney onnx export (docs/MODELS.md): a damaged input is named, nothing is written.
bad onnx-export-args 2 "takes IN and OUT.onnx" onnx export "$C/badjson.safetensors"
bad onnx-export-corrupt 1 "CTN_ERR_CORRUPT" onnx export "$C/badjson.safetensors" "$TMP/out.onnx"
if [ -e "$TMP/out.onnx" ]; then fail "onnx-export-corrupt: wrote $TMP/out.onnx"; fi
# An empty value is a mistake (an unset shell variable), never "not given" (issue 30).
for flag in checkpoint-dir json plot memory-budget data-dir backend resume; do
  bad "flag-empty-$flag" 2 "--$flag' needs a value" $T --data-dir "$DATA_DIR" --$flag ""
done
bad flag-empty-inline 2 "--json' needs a value" $T --data-dir "$DATA_DIR" --json=
# --model-onnx: a missing file, a file that is not ONNX, a FIFO, and --model onnx without a file.
TO="train --limit 128 --batch-size 64 --epochs 1 --quiet --eval-batch-size 1000 --data-dir $DATA_DIR"
bad onnx-missing 1 "$TMP/none.onnx" $TO --model-onnx "$TMP/none.onnx"
printf 'not a protobuf' >"$TMP/junk.onnx"
bad onnx-junk 1 "junk.onnx" $TO --model-onnx "$TMP/junk.onnx"
mkfifo "$TMP/fifo.onnx"
bad onnx-fifo 1 "fifo.onnx" $TO --model-onnx "$TMP/fifo.onnx"
bad onnx-run-fifo 1 "is a FIFO" onnx run "$TMP/fifo.onnx" --output-dir "$TMP/onnx-out"
bad onnx-info-fifo 1 "is a FIFO" onnx info "$TMP/fifo.onnx"
bad onnx-input-fifo 1 "fifo.onnx" onnx run "$(dirname "$0")/../onnx/models/cnn_bn.onnx" --input "x=$TMP/fifo.onnx" --output-dir "$TMP/onnx-out"
bad onnx-no-file 2 "--model onnx needs --model-onnx" $TO --model onnx
bad onnx-and-model 2 "leave out --model cnn" $TO --model cnn --model-onnx "$TMP/junk.onnx"
# Output paths are checked before training starts, not when first written (issue 30).
: >"$TMP/plainfile"
for flag in json plot export-onnx save-model; do
  bad "flag-$flag-under-file" 1 "$TMP/plainfile" $T --data-dir "$DATA_DIR" --$flag "$TMP/plainfile/x.out"
  if grep -q "^epoch " "$TMP/flag-$flag-under-file.out"; then fail "flag-$flag-under-file: trained before failing"; fi
done
bad ckpt-dir-under-file 1 "$TMP/plainfile" $T --data-dir "$DATA_DIR" --checkpoint-dir "$TMP/plainfile/ck"
if grep -q "^epoch " "$TMP/ckpt-dir-under-file.out"; then fail "ckpt-dir-under-file: trained before failing"; fi

# --- environment ---------------------------------------------------------------------------------
benv env-threads-huge 1 "CHUTNEY_NUM_THREADS" CHUTNEY_NUM_THREADS=1000000 plugins
benv env-threads-text 1 "CHUTNEY_NUM_THREADS" CHUTNEY_NUM_THREADS=lots $E --checkpoint "$GOOD" --data-dir "$DATA_DIR"
benv env-threads-neg 1 "CHUTNEY_NUM_THREADS" CHUTNEY_NUM_THREADS=-2 plugins
benv env-backend 1 "nonesuch" CHUTNEY_BACKEND=nonesuch $E --checkpoint "$GOOD" --data-dir "$DATA_DIR"
# Every CHUTNEY_* variable is checked the same way when a context is made (issue 30).
benv env-backend-typo 1 'unknown backend "cdua"' CHUTNEY_BACKEND=cdua,cpu plugins
benv env-backend-commas 1 "CHUTNEY_BACKEND" CHUTNEY_BACKEND=,,, plugins
benv env-log 1 "CHUTNEY_LOG='bogus'" CHUTNEY_LOG=bogus plugins
benv env-profile 1 "CHUTNEY_PROFILE='bogus'" CHUTNEY_PROFILE=bogus plugins
benv env-vulkan-range 1 "CHUTNEY_VULKAN_MAX_RANGE='-1'" CHUTNEY_VULKAN_MAX_RANGE=-1 plugins
benv env-flag 1 "CHUTNEY_OPENCL_NO_CACHE='yes'" CHUTNEY_OPENCL_NO_CACHE=yes plugins
benv env-typo 0 "CHUTNEY_BACKNED is not one chutney reads (did you mean CHUTNEY_BACKEND?)" CHUTNEY_BACKNED=cpu plugins

# --- the CPU backend cannot start (1000 threads under a 3 GB address-space limit): the placement
# error says so and why, instead of blaming only the backends that remain (issue 30). Skipped
# where the limit alone stops the program (an emulator, a sanitizer).
if sh -c 'ulimit -v 3000000 && exec "$1" --help' sh "$CHUTNEY" >/dev/null 2>&1; then
  cases=$((cases + 1))
  CHUTNEY_NUM_THREADS=1000 timeout -k 5 "$LIMIT" sh -c 'ulimit -v 3000000 && exec "$@"' sh "$CHUTNEY" $T \
    --data-dir "$DATA_DIR" </dev/null >"$TMP/cpu-unavailable.out" 2>&1
  # With GPU backends loaded, placement fails and names the CPU backend's failure; with none, the
  # context has no backend and says why the CPU backend is not one.
  if grep -qF "cpu: cannot run 1000 threads" "$TMP/cpu-unavailable.out"; then
    echo "ok:   cpu-unavailable (the error names the CPU backend's failure)"
  else
    fail "cpu-unavailable: the error does not say that the CPU backend failed: $(tail -2 "$TMP/cpu-unavailable.out")"
  fi
else
  echo "skip: cpu-unavailable (the program does not start under ulimit -v here)"
fi

# --- a FIFO among the plugin candidates is refused, never opened (issue 30) ------------------------
mkdir -p "$TMP/fifo-plugins" && mkfifo "$TMP/fifo-plugins/ctn-x.so"
cases=$((cases + 1))
CHUTNEY_PLUGIN_PATH="$TMP/fifo-plugins" timeout -k 5 "$LIMIT" "$CHUTNEY" plugins --explain </dev/null >"$TMP/fifo-plugin.out" 2>&1
got=$?
if [ "$got" -ne 0 ]; then
  fail "fifo-plugin: 'chutney plugins' with a FIFO in CHUTNEY_PLUGIN_PATH exited $got (124: it blocked)"
elif ! grep -qF "ctn-x.so: not a regular file (a FIFO)" "$TMP/fifo-plugin.out"; then
  fail "fifo-plugin: the report does not name the FIFO"
else
  echo "ok:   fifo-plugin (a FIFO plugin candidate is rejected and reported)"
fi

# --- nothing changed ------------------------------------------------------------------------------
if [ "$(sums)" = "$before" ]; then
  echo "ok:   the reference checkpoints are unchanged after $cases cases"
else
  fail "the reference checkpoints changed"
fi
if [ "$cases" -lt 50 ]; then fail "only $cases bad-input cases ran (at least 50 expected)"; fi

# --- the checkpoint directory tidies up ------------------------------------------------------------
R=$TMP/retain
mkdir -p "$R"
sleep 1000 &
live=$!
dead=$(sh -c 'echo $$')  # a process that has exited
head -c 4096 /dev/urandom >"$R/.mlp-epoch009.safetensors.tmp-$dead-0"
head -c 4096 /dev/urandom >"$R/.mlp-epoch009.safetensors.tmp-$live-3"
printf 'mine' >"$R/.notes.tmp-x-1"
if "$CHUTNEY" train --model mlp --limit 256 --batch-size 64 --epochs 4 --seed 5 --quiet --keep-last 2 \
    --data-dir "$DATA_DIR" --eval-batch-size 1000 --checkpoint-dir "$R" --json "$TMP/retain.json" \
    >"$TMP/retain.out" 2>"$TMP/retain.err"; then
  [ ! -e "$R/.mlp-epoch009.safetensors.tmp-$dead-0" ] && grep -qF ".tmp-$dead-0" "$TMP/retain.err" &&
    echo "ok:   a dead writer's temporary file is removed (and reported)" ||
    fail "the dead writer's temporary file is still there or was not reported"
  [ -e "$R/.mlp-epoch009.safetensors.tmp-$live-3" ] && echo "ok:   a live writer's temporary file is kept" ||
    fail "a live writer's temporary file was removed"
  [ -e "$R/.notes.tmp-x-1" ] && echo "ok:   a file not of the writer's pattern is kept" ||
    fail "a file not of the writer's pattern was removed"
  best=$(python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["epochs"]; print(max(l, key=lambda e: e["test_accuracy"])["epoch"])' "$TMP/retain.json" 2>/dev/null)
  want=$( (echo 3; echo 4; [ -n "$best" ] && echo "$best") | sort -u | sed 's/^/mlp-epoch00/; s/$/.safetensors/')
  have=$(cd "$R" && ls mlp-epoch*.safetensors | sort)
  if [ -n "$best" ] && [ "$have" = "$want" ]; then
    echo "ok:   --keep-last 2 keeps epochs 3, 4 and the best ($best)"
  else
    fail "--keep-last 2 left '$(echo $have)', expected '$(echo $want)'"
  fi
else
  fail "the retention run failed: $(tail -3 "$TMP/retain.err")"
fi
kill "$live" 2>/dev/null
wait "$live" 2>/dev/null

# --- retention and overwriting never touch another run's checkpoints (issue 30) --------------------
# Run A's files sit at epochs 7-10 (above anything run B writes, as in the report: sorting every
# run's files by epoch deleted B's newest and A's older ones). B, --keep-last 1, may remove only
# its own older epochs, must keep the one it just wrote, and says what it removed.
K=$TMP/keep
mkdir -p "$K"
for e in 7 8 9 10; do cp "$GOOD" "$K/mlp-epoch$(printf %03d "$e").safetensors"; done
others() { (cd "$K" && cat mlp-epoch007.safetensors mlp-epoch008.safetensors mlp-epoch009.safetensors mlp-epoch010.safetensors | cksum); }
others_before=$(others)
if "$CHUTNEY" train --model mlp --limit 256 --batch-size 64 --epochs 3 --seed 3 --keep-last 1 \
    --data-dir "$DATA_DIR" --eval-batch-size 1000 --checkpoint-dir "$K" --quiet >"$TMP/keep.out" 2>"$TMP/keep.err"; then
  [ "$(others)" = "$others_before" ] && echo "ok:   another run's checkpoints are untouched by --keep-last" ||
    fail "--keep-last changed or removed another run's checkpoints: $(cd "$K" && ls | tr '\n' ' ')"
  [ -e "$K/mlp-epoch003.safetensors" ] && echo "ok:   the checkpoint just written is kept" ||
    fail "the checkpoint just written (epoch 3) was removed"
  if grep -q "^removed checkpoint $K/mlp-epoch00[12].safetensors" "$TMP/keep.out" &&
      ! grep "^removed checkpoint" "$TMP/keep.out" | grep -q "epoch0[01][0-9][0-9]*7\|epoch00[789]\|epoch010"; then
    echo "ok:   retention says which of its own files it removed"
  else
    fail "retention did not report removing only its own files: $(grep removed "$TMP/keep.out" | tr '\n' ' ')"
  fi
else
  fail "the retention run beside another run's files failed: $(tail -3 "$TMP/keep.err")"
fi
# A second run whose epochs collide with the first run's files refuses before training instead of
# replacing them; the first run's files are byte for byte as they were.
firsts() { (cd "$K" && cat mlp-epoch003.safetensors | cksum); }
first_before=$(firsts)
bad overwrite-other-run 1 "a checkpoint of another training run" train --model mlp --limit 128 --batch-size 64 \
  --epochs 3 --seed 4 --quiet --data-dir "$DATA_DIR" --eval-batch-size 1000 --checkpoint-dir "$K"
if grep -q "^epoch " "$TMP/overwrite-other-run.out"; then fail "overwrite-other-run: trained before refusing"; fi
[ "$(firsts)" = "$first_before" ] && [ "$(others)" = "$others_before" ] &&
  echo "ok:   the refused run left every file as it was" || fail "the refused run changed a checkpoint"
# Resuming a run continues it: its own files may be replaced.
if "$CHUTNEY" train --model mlp --limit 256 --batch-size 64 --epochs 4 --keep-last 0 --quiet --data-dir "$DATA_DIR" \
    --eval-batch-size 1000 --checkpoint-dir "$K" --resume "$K/mlp-epoch003.safetensors" >"$TMP/resume-own.out" 2>&1 &&
    [ -e "$K/mlp-epoch004.safetensors" ] && [ "$(others)" = "$others_before" ]; then
  echo "ok:   a resumed run writes its next epoch beside the others"
else
  fail "resuming into the same directory failed: $(tail -3 "$TMP/resume-own.out")"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures of $cases+ checks failed"
  exit 1
fi
echo "all $cases bad-input cases and the tidying checks passed"
