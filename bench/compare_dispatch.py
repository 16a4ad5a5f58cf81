#!/usr/bin/env python3
"""Dispatch overhead, chutney vs PyTorch eager, in the same run.

Runs build/bench/dispatch_bench (chutney: compiled plan and eager) and the same op sequence in
PyTorch eager mode, then prints one JSON object with both and the ratios.

PyTorch's thread pools are pinned before torch is imported (OMP/MKL/OpenBLAS env vars and
torch.set_num_threads): on this 2-core machine the default pools fight each other, which would
make the peer look slower than it is. For 16-element tensors one thread is PyTorch's best
configuration (measured: see docs/BENCHMARKS.md), and that is what is compared.

Use the system interpreter, which sees Debian's python3-torch:
    /usr/bin/python3 bench/compare_dispatch.py [--bench build/bench/dispatch_bench] [--json FILE]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time


def torch_eager(nodes, size, reps, threads):
    import torch  # imported after the environment is pinned

    torch.set_num_threads(threads)
    x = torch.arange(size, dtype=torch.float32) * 0.01
    y = 0.5 + 0.001 * torch.arange(size, dtype=torch.float32)

    def chain(h):
        # Same sequence as bench_util.h's bench_elementwise_chain (dispatch_bench).
        for i in range(nodes):
            k = i % 6
            if k == 0:
                h = h + y
            elif k == 1:
                h = h * y
            elif k == 2:
                h = torch.tanh(h)
            elif k == 3:
                h = h - y
            elif k == 4:
                h = torch.relu(h)
            else:
                h = -h
        return h

    for _ in range(2):
        chain(x)
    times = []
    out = None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = chain(x)
        times.append((time.perf_counter() - t0) * 1e6)
    times.sort()
    med = times[len(times) // 2]
    return {
        "version": torch.__version__,
        "threads": threads,
        "eager_us_per_op": med / nodes,
        "eager_pass_us_median": med,
        "last_value": float(out[-1]),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default="build/bench/dispatch_bench", help="path to dispatch_bench")
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--reps", type=int, default=20, help="eager passes per side")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--json", help="also write the JSON here")
    a = ap.parse_args()

    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(a.torch_threads)

    proc = subprocess.run([a.bench, "--nodes", str(a.nodes), "--size", str(a.size), "--reps", str(a.reps * 10)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"compare_dispatch: {a.bench} failed: {proc.stderr.strip()}")
    ours = json.loads(proc.stdout)
    try:
        peer = torch_eager(a.nodes, a.size, a.reps, a.torch_threads)
    except ImportError as e:
        sys.exit(f"compare_dispatch: PyTorch is not importable here ({e}); use /usr/bin/python3 with python3-torch")
    result = {
        "benchmark": "dispatch_vs_pytorch",
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "chutney": ours,
        "pytorch": peer,
        "eager_speedup_vs_pytorch": peer["eager_us_per_op"] / ours["eager_us_per_op"],
        "plan_speedup_vs_pytorch_eager": peer["eager_us_per_op"] / ours["plan_us_per_node"],
        # Both sides computed the same chain: their last elements must agree (float32 rounding).
        "same_result": abs(peer["last_value"] - ours["last_value"]) <= 1e-4 * max(1.0, abs(peer["last_value"])),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
