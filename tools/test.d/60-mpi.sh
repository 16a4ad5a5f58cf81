#!/usr/bin/env bash
# Stage: data-parallel training over Open MPI (docs/DISTRIBUTED.md), `mpirun --oversubscribe` on
# this machine. Checks, each counted:
#   plugins      ctn-mpi.so loads; ctn-nccl.so is built and loads or says "unavailable: why"
#   ranks-2/4    after 2 epochs every rank's variables are bit-identical (tensor-data hashes of
#                the checkpoints) and within 1e-5 (relative, max-norm) of one process at the
#                same global batch
#   overlap      2 ranks, 4 buckets: overlapped allreduces (the default), --overlap off, a small
#                shared-memory ring and Open MPI's allreduce alone give bit-identical variables
#   cnn          the same for a small CNN (conv gradients, several buckets), 2 ranks, 1 epoch
#   kill         a rank SIGKILLed mid-epoch ends the job non-zero within 10 s naming rank 1;
#                resuming from the last checkpoint reproduces the uninterrupted run bit for bit
#   hang         a rank stopped (SIGSTOP) is named when the collective timeout expires
#   stop         a rank stopped from outside at a random moment is named too, 3 trials of 3
#   eval         an epoch's evaluation longer than the collective timeout does not abort the job
#   two-hosts    the 2-rank run again with rank 1 in another network namespace over a veth pair
#                (skipped, with the reason, where namespaces cannot be created)
# Budget: about 1-2 minutes on a 2-core machine.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BIN=$(cd "$BUILD_DIR" && pwd)/tools/chutney/chutney  # absolute: ranks may start elsewhere
if ! command -v mpirun >/dev/null 2>&1; then
  echo "mpirun not found: install openmpi-bin libopenmpi-dev (tools/deps/mpi.txt)" >&2
  exit 1
fi
if [[ ! -f $BUILD_DIR/plugins/collectives/ctn-mpi.so ]]; then
  echo "$BUILD_DIR/plugins/collectives/ctn-mpi.so was not built (meson -Dmpi=auto found no MPI?)" >&2
  exit 1
fi
if [[ $(id -u) == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Containers often forbid the cross-memory attach that vader's single copy uses.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/chutney-mpi.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
rc=0
pass() { echo "PASS $*"; record 1 0 0; }
failed() { echo "FAIL $*"; record 0 1 0; rc=1; }
skip() { echo "SKIP $*"; record 0 0 1; }

# Common training options: the MLP, 2 epochs of 2048 images, 16 global batches of 128.
TRAIN=(train --model mlp --epochs 2 --limit 2048 --seed 7 --threads 1 --quiet)
MPIRUN=(mpirun --oversubscribe --bind-to none)

# safetensors helper: "hash FILE" prints the SHA-256 of the tensors (names, shapes, data) and not
# the metadata (which holds timings); "compare A B TOL" checks max|a-b| / max|b| <= TOL per tensor.
st() {
  python3 - "$@" <<'PY'
import array, hashlib, json, struct, sys
def load(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    hdr = json.loads(raw[8:8 + n]); base = 8 + n
    out = {}
    for k, v in sorted(hdr.items()):
        if k == '__metadata__': continue
        a, b = v['data_offsets']
        out[k] = (v['dtype'], v['shape'], raw[base + a: base + b])
    return out
if sys.argv[1] == 'hash':
    h = hashlib.sha256()
    for k, (dt, shape, data) in load(sys.argv[2]).items():
        h.update(f'{k}:{dt}:{shape}:'.encode()); h.update(data)
    print(h.hexdigest())
else:
    a, b, tol = load(sys.argv[2]), load(sys.argv[3]), float(sys.argv[4])
    assert a.keys() == b.keys(), 'different tensors'
    worst = 0.0
    for k in a:
        assert a[k][0] == 'F32', k + ' is not F32'
        x, y = array.array('f', a[k][2]), array.array('f', b[k][2])
        scale = max(max((abs(v) for v in y), default=0.0), 1e-30)
        worst = max(worst, max((abs(p - q) for p, q in zip(x, y)), default=0.0) / scale)
    print(f'max relative difference {worst:.3g} (tolerance {tol:g})')
    sys.exit(0 if worst <= tol else 1)
PY
}

echo "== plugins"
"$BIN" plugins --explain >"$WORK/plugins.txt" 2>&1 || true
if grep -q 'loaded .*ctn-mpi.so: collective "mpi"' "$WORK/plugins.txt"; then pass "plugins: ctn-mpi.so loads"; else cat "$WORK/plugins.txt"; failed "plugins: ctn-mpi.so"; fi
if [[ ! -f $BUILD_DIR/plugins/collectives/ctn-nccl.so ]]; then
  skip "plugins: ctn-nccl.so not built (no nccl.h in the CUDA toolkit)"
elif grep -qE 'ctn-nccl.so: collective "nccl"|unavailable .*ctn-nccl.so: collective "nccl": unavailable: ' "$WORK/plugins.txt"; then
  pass "plugins: ctn-nccl.so built; $(grep 'ctn-nccl.so' "$WORK/plugins.txt" | sed 's/  */ /g')"
else
  cat "$WORK/plugins.txt"; failed "plugins: ctn-nccl.so neither loads nor reports unavailable"
fi

echo "== one process at batch 128"
if ! "$BIN" "${TRAIN[@]}" --batch-size 128 --checkpoint-dir "$WORK/one" >"$WORK/one.log" 2>&1; then
  cat "$WORK/one.log"; failed "single-process reference run"
fi
ref=$WORK/one/mlp-epoch002.safetensors

# ranks N BATCH NAME [extra...]: N ranks at BATCH images each (global batch 128).
ranks() {
  local n=$1 b=$2 name=$3; shift 3
  local t0=$SECONDS
  if ! timeout 150 "${MPIRUN[@]}" -np "$n" "$BIN" "${TRAIN[@]}" --distributed mpi --batch-size "$b" \
      --checkpoint-dir "$WORK/$name" --rank-checkpoints "$@" >"$WORK/$name.log" 2>&1; then
    cat "$WORK/$name.log"; failed "ranks-$n: mpirun failed"; return
  fi
  echo "   ($n ranks: $((SECONDS - t0)) s)"
  local h0 hr same=1 r
  h0=$(st hash "$WORK/$name/mlp-epoch002.safetensors")
  for ((r = 1; r < n; ++r)); do
    hr=$(st hash "$WORK/$name/rank-$r/mlp-epoch002.safetensors")
    [[ $hr == "$h0" ]] || { same=0; echo "rank $r: $hr, rank 0: $h0"; }
  done
  if [[ $same == 1 ]]; then pass "ranks-$n: variables bit-identical on all $n ranks ($h0)"; else failed "ranks-$n: ranks differ"; fi
  if [[ -f $ref ]] && st compare "$WORK/$name/mlp-epoch002.safetensors" "$ref" 1e-5; then
    pass "ranks-$n: equal to one process at global batch 128 within 1e-5"
  else
    failed "ranks-$n: differs from one process at global batch 128"
  fi
  if [[ $(grep -c '^epoch' "$WORK/$name.log") == 2 ]]; then pass "ranks-$n: rank 0 alone printed the 2 epoch lines"; else grep '^epoch' "$WORK/$name.log"; failed "ranks-$n: epoch lines"; fi
}
echo "== 2 ranks x 64 (default 64 MiB buckets: one bucket)"
ranks 2 64 two
echo "== 4 ranks x 32 (100 kB buckets: several)"
ranks 4 32 four --bucket-bytes 100000
grep -h '^data-parallel\|buckets' "$WORK/four.log" || true

echo "== overlap and transports: 2 ranks x 64, 100 kB buckets"
# ov-on: overlapped (the default), shared-memory allreduce; ov-off: --overlap off; ov-ring:
# a 12000-byte ring (the 10 kB bucket fits, but each step's later small buckets wrap onto it
# while it is pending, so starts wait for ring space; the 1.6 MB and 512 kB gradients take MPI's
# allreduce); ov-mpi: CHUTNEY_MPI_SHM_BYTES=0, Open MPI's allreduce only. Two ranks sum a + b in
# every case, so all four must give the same bits on both ranks.
ovrun() {
  local name=$1 ov=$2 ring=$3
  CHUTNEY_MPI_SHM_BYTES=$ring timeout 150 "${MPIRUN[@]}" -np 2 "$BIN" "${TRAIN[@]}" --distributed mpi --batch-size 64 \
    --bucket-bytes 100000 --overlap "$ov" --checkpoint-dir "$WORK/$name" --rank-checkpoints >"$WORK/$name.log" 2>&1 ||
    cat "$WORK/$name.log"
}
ovrun ov-on on 33554432; ovrun ov-off off 33554432; ovrun ov-ring on 12000; ovrun ov-mpi on 0
h_on=$(st hash "$WORK/ov-on/mlp-epoch002.safetensors" 2>/dev/null) || h_on=missing
same=1
for name in ov-on ov-off ov-ring ov-mpi; do
  for f in "$WORK/$name/mlp-epoch002.safetensors" "$WORK/$name/rank-1/mlp-epoch002.safetensors"; do
    h=$(st hash "$f" 2>/dev/null) || h=missing
    [[ $h == "$h_on" && $h != missing ]] || { same=0; echo "$f: $h, ov-on rank 0: $h_on"; }
  done
done
if grep -q 'averaged in 4 buckets of <= 100000 bytes, overlapped with backward' "$WORK/ov-on.log" &&
   grep -q 'averaged in 4 buckets of <= 100000 bytes, blocking' "$WORK/ov-off.log" &&
   grep -q 'allreduce over shared memory' "$WORK/ov-ring.log" && ! grep -q 'allreduce over shared memory' "$WORK/ov-mpi.log" &&
   [[ $same == 1 ]]; then
  pass "overlap: overlapped, blocking, small-ring and MPI-only runs give bit-identical variables on both ranks ($h_on)"
else
  grep -h '^distributed\|^data-parallel' "$WORK"/ov-*.log; failed "overlap: the runs differ"
fi

echo "== CNN (8,16,32, no batch norm): 2 ranks x 16 vs one process at 32, 20 kB buckets"
CNN=(train --model cnn --cnn-widths 8,16,32 --epochs 1 --limit 512 --seed 3 --threads 1 --quiet)
if "$BIN" "${CNN[@]}" --batch-size 32 --checkpoint-dir "$WORK/cnn1" >"$WORK/cnn1.log" 2>&1 &&
   timeout 120 "${MPIRUN[@]}" -np 2 "$BIN" "${CNN[@]}" --distributed mpi --batch-size 16 --bucket-bytes 20000 \
     --checkpoint-dir "$WORK/cnn2" --rank-checkpoints >"$WORK/cnn2.log" 2>&1 &&
   [[ $(st hash "$WORK/cnn2/cnn-epoch001.safetensors") == $(st hash "$WORK/cnn2/rank-1/cnn-epoch001.safetensors") ]] &&
   st compare "$WORK/cnn2/cnn-epoch001.safetensors" "$WORK/cnn1/cnn-epoch001.safetensors" 1e-5; then
  pass "cnn: 2 ranks bit-identical and within 1e-5 of one process ($(grep -o 'averaged in [0-9]* buckets' "$WORK/cnn2.log"))"
else
  cat "$WORK/cnn1.log" "$WORK/cnn2.log"; failed "cnn: 2 ranks differ from each other or from one process"
fi

echo "== kill: rank 1 sends itself SIGKILL at update 20 (epoch 2)"
mkdir -p "$WORK/kill"
t0=$(date +%s.%N)
timeout 60 "${MPIRUN[@]}" -np 2 "$BIN" "${TRAIN[@]}" --distributed mpi --batch-size 64 --checkpoint-dir "$WORK/kill" \
  --fault 20:1:kill >"$WORK/kill.log" 2>&1 &
job=$!
# The kill's moment: when the rank's "sending itself SIGKILL" line appears (polled every 50 ms).
tk=""
while kill -0 "$job" 2>/dev/null; do
  if [[ -z $tk ]] && grep -q 'sending itself SIGKILL' "$WORK/kill.log"; then tk=$(date +%s.%N); fi
  sleep 0.05
done
st_kill=0
wait "$job" || st_kill=$?
t1=$(date +%s.%N)
[[ -n $tk ]] || tk=$t0
after=$(python3 -c "print(f'{$t1 - $tk:.1f}')")
if [[ $st_kill != 0 && $st_kill != 124 ]] && grep -qi 'rank 1' "$WORK/kill.log" && grep -q 'SIGKILL' "$WORK/kill.log"; then
  pass "kill: job exited $st_kill, naming rank 1: $(grep -i 'rank 1' "$WORK/kill.log" | grep -v 'sending itself' | head -1)"
else
  cat "$WORK/kill.log"; failed "kill: exit $st_kill, or no message naming rank 1"
fi
if python3 -c "import sys; sys.exit(0 if $t1 - $tk <= 10 else 1)"; then
  pass "kill: the job ended $after s after the kill (bound 10 s; whole run $(python3 -c "print(f'{$t1 - $t0:.1f}')") s)"
else
  failed "kill: the job ended $after s after the kill (more than 10 s)"
fi
if [[ -f $WORK/kill/mlp-epoch001.safetensors && ! -f $WORK/kill/mlp-epoch002.safetensors ]] &&
   timeout 120 "${MPIRUN[@]}" -np 2 "$BIN" train --resume "$WORK/kill/mlp-epoch001.safetensors" --threads 1 --quiet \
     --distributed mpi --checkpoint-dir "$WORK/kill" >"$WORK/resume.log" 2>&1 &&
   [[ $(st hash "$WORK/kill/mlp-epoch002.safetensors") == $(st hash "$WORK/two/mlp-epoch002.safetensors") ]]; then
  pass "kill: resuming from epoch 1 reproduces the uninterrupted 2-rank run bit for bit"
else
  cat "$WORK/resume.log" 2>/dev/null || true; failed "kill: resume does not reproduce the uninterrupted run"
fi

echo "== hang: rank 1 stops (SIGSTOP) at update 5; collective timeout 3 s"
st_hang=0
t0=$SECONDS
timeout 60 "${MPIRUN[@]}" -np 2 "$BIN" "${TRAIN[@]}" --distributed mpi --batch-size 64 --collective-timeout 3 \
  --fault 5:1:stop >"$WORK/hang.log" 2>&1 || st_hang=$?
if [[ $st_hang != 0 && $st_hang != 124 ]] && grep -q 'not responding: 1 ' "$WORK/hang.log"; then
  pass "hang: exit $st_hang after $((SECONDS - t0)) s: $(grep -o 'rank 0: allreduce.*' "$WORK/hang.log" | head -1)"
else
  cat "$WORK/hang.log"; failed "hang: exit $st_hang, or rank 1 not named"
fi

echo "== stop: rank 1 stopped from outside (SIGSTOP) at a moment of its own, 3 trials; collective timeout 3 s"
# Unlike --fault (which stops before the step's collectives), a signal from outside often lands
# after the rank announced a collective and before it completed it: the heartbeats name it then.
named=0
for trial in 1 2 3; do
  timeout 60 "${MPIRUN[@]}" -np 2 "$BIN" train --model mlp --epochs 50 --limit 2048 --seed 7 --threads 1 --quiet \
    --distributed mpi --batch-size 64 --collective-timeout 3 >"$WORK/stop$trial.log" 2>&1 &
  job=$!
  victim=""
  for _ in $(seq 100); do  # rank 1's pid, from its environment, once it runs
    for p in $(pgrep -f "$BIN train --model mlp --epochs 50" || true); do
      tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && victim=$p
    done
    [[ -n $victim ]] && break
    sleep 0.05
  done
  for _ in $(seq 600); do grep -q '^epoch 2/' "$WORK/stop$trial.log" && break; sleep 0.05; done  # training
  sleep "0.$((RANDOM % 10))"
  [[ -n $victim ]] && kill -STOP "$victim" 2>/dev/null
  st_stop=0
  wait "$job" || st_stop=$?
  if [[ -n $victim && $st_stop != 0 && $st_stop != 124 ]] && grep -q 'not responding: 1 ' "$WORK/stop$trial.log"; then
    named=$((named + 1))
  else
    echo "trial $trial (exit $st_stop, rank 1 pid '${victim}'):"; cat "$WORK/stop$trial.log"
  fi
done
if [[ $named == 3 ]]; then
  pass "stop: rank 1 named in 3 of 3 trials: $(grep -oh 'not responding: .*' "$WORK"/stop?.log | sort -u | head -2 | tr '\n' ';')"
else
  failed "stop: rank 1 named in only $named of 3 trials"
fi

echo "== eval: each epoch's evaluation (~3 s on one rank) is longer than the 2 s collective timeout"
# Every rank evaluates a share of the test set and rank 0 writes its checkpoint off the training
# thread, so no rank waits in the next collective while another works alone.
if timeout 120 "${MPIRUN[@]}" -np 2 "$BIN" train --model cnn --cnn-widths 32,64,256 --epochs 2 --limit 256 --seed 3 \
     --threads 1 --quiet --distributed mpi --batch-size 32 --eval-batch-size 1000 --collective-timeout 2 \
     --checkpoint-dir "$WORK/evalck" >"$WORK/eval.log" 2>&1 && [[ -f $WORK/evalck/cnn-epoch002.safetensors ]]; then
  pass "eval: the 2-rank run finished; $(grep '^epoch 2' "$WORK/eval.log" | grep -o 'test accuracy [0-9.]*, .*eval [0-9.]* s')"
else
  cat "$WORK/eval.log"; failed "eval: the job failed while a rank evaluated or saved"
fi

echo "== two hosts: rank 1 in its own network namespace over a veth pair"
bash "$(dirname "${BASH_SOURCE[0]}")/mpi-two-hosts.sh" "$BIN" "$WORK" && th=0 || th=$?
case $th in
  0) if [[ $(st hash "$WORK/hosts/mlp-epoch002.safetensors") == $(st hash "$WORK/two/mlp-epoch002.safetensors") ]]; then
       pass "two-hosts: 2 ranks over veth reproduce the 2-rank run bit for bit"
     else
       failed "two-hosts: the result differs from the 2-rank run on one host"
     fi ;;
  77) skip "two-hosts: $(tail -1 "$WORK/hosts.skip" 2>/dev/null)" ;;
  *) failed "two-hosts: the run failed (exit $th)" ;;
esac
exit "$rc"
