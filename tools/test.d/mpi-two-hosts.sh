#!/usr/bin/env bash
# Helper of 60-mpi.sh (not a stage): runs the 2-rank MLP training with rank 1 on a second "host",
# a network namespace joined to this one by a veth pair (10.77.0.1 <-> 10.77.0.2), so gradients
# cross a real network stack (Open MPI's TCP transport). mpirun starts the remote rank through a
# launcher (plm_rsh_agent) that enters the namespace instead of ssh.
# Usage: mpi-two-hosts.sh CHUTNEY_BINARY WORKDIR. Exit 0: trained, checkpoints in WORKDIR/hosts;
# 77: skipped (the reason is the last line of WORKDIR/hosts.skip); other: failed.
set -uo pipefail
BIN=$1 WORK=$2
NS=ctn-host2-$$
VA=ctnva$$ VB=ctnvb$$
skip() { echo "$1" | tee -a "$WORK/hosts.skip"; exit 77; }
command -v ip >/dev/null 2>&1 || skip "no \`ip\` command (apt-get install iproute2)"
ip netns add "$NS" 2>"$WORK/hosts.err" || skip "network namespaces cannot be created here: $(head -1 "$WORK/hosts.err")"
cleanup() {
  ip link del "$VA" 2>/dev/null
  ip netns del "$NS" 2>/dev/null
}
trap cleanup EXIT
if ! { ip link add "$VA" type veth peer name "$VB" && ip link set "$VB" netns "$NS" &&
       ip addr add 10.77.0.1/24 dev "$VA" && ip link set "$VA" up &&
       ip netns exec "$NS" ip addr add 10.77.0.2/24 dev "$VB" && ip netns exec "$NS" ip link set "$VB" up &&
       ip netns exec "$NS" ip link set lo up; } 2>"$WORK/hosts.err"; then
  skip "a veth pair cannot be set up here: $(head -1 "$WORK/hosts.err")"
fi
# Reachability without ping: a TCP connection to a closed port is refused by 10.77.0.2 itself.
timeout 3 bash -c 'echo >/dev/tcp/10.77.0.2/9' 2>"$WORK/hosts.err"
grep -q refused "$WORK/hosts.err" || skip "the veth pair does not carry traffic (TCP to 10.77.0.2: $(head -1 "$WORK/hosts.err"))"
# The "remote shell": mpirun calls it as `agent [options] HOST COMMAND...`; host 10.77.0.2 is the
# namespace, anything else runs here.
agent=$WORK/netns-agent.sh
cat >"$agent" <<AG
#!/usr/bin/env bash
while [[ \$1 == -* ]]; do shift; done
host=\$1; shift
echo "launch on \$host" >>"$WORK/agent.log"
if [[ \$host == 10.77.0.2 ]]; then exec ip netns exec $NS /bin/sh -c "\$*"; fi
exec /bin/sh -c "\$*"
AG
chmod +x "$agent"
mkdir -p "$WORK/hosts"
pass_env=(-x PATH)
[[ -n ${OMPI_ALLOW_RUN_AS_ROOT:-} ]] && pass_env+=(-x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM)
timeout 150 mpirun --oversubscribe --bind-to none -np 2 --host 10.77.0.1:1,10.77.0.2:1 \
  --mca plm_rsh_agent "$agent" --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
  --mca oob_tcp_if_include 10.77.0.0/24 \
  "${pass_env[@]}" \
  "$BIN" train --model mlp --epochs 2 --limit 2048 --seed 7 --threads 1 --quiet --distributed mpi \
  --batch-size 64 --checkpoint-dir "$WORK/hosts" >"$WORK/hosts.log" 2>&1
st=$?
[[ $st == 0 ]] || { cat "$WORK/hosts.log"; exit 1; }
grep -h 'distributed:' "$WORK/hosts.log"
# mpirun started its daemon for rank 1 through the launcher, inside the namespace.
grep -q 'launch on 10.77.0.2' "$WORK/agent.log" || { echo "rank 1 was not launched in the namespace"; exit 1; }
exit 0
