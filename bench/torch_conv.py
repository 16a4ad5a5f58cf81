#!/usr/bin/env python3
"""PyTorch's side of bench/conv_bench: conv2d, its input gradient and its weight gradient for the
built-in CNN's layers (batch 64, 5x5, padding 2: conv1 1->32 on 28x28, conv2 32->64 on 14x14),
median ms per call after warm-up, with every thread pool pinned to --threads. The forward runs
with autograd recording (weights requiring grad), as in a training step.

    /usr/bin/python3 bench/torch_conv.py --threads 2 [--json FILE]
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", help="write the results as JSON to this file")
    a = ap.parse_args()
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[v] = str(a.threads)
    import torch  # after the environment: the pools read it at import
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    F = torch.nn.functional

    def median_ms(f):
        for _ in range(3):
            f()
        ts = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        ts.sort()
        return ts[len(ts) // 2] * 1e3

    out = {"bench": "torch_conv", "torch": torch.__version__, "threads": a.threads,
           "mkldnn": torch.backends.mkldnn.is_available(), "ops": []}
    for name, c, h, o in (("conv1", 1, 28, 32), ("conv2", 32, 14, 64)):
        # As in training: the weights require grad, and so does conv2's input (an activation);
        # with autograd recording, PyTorch picks its training path (no-grad inference differs).
        x = torch.randn(64, c, h, h, requires_grad=(name == "conv2"))
        w = torch.randn(o, c, 5, 5, requires_grad=True)
        dy = torch.randn(64, o, h, h)
        flops = 2.0 * 64 * o * h * h * c * 25
        for op, f in (("conv2d", lambda: F.conv2d(x, w, padding=2)),
                      ("conv2d_grad_input", lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, padding=2)),
                      ("conv2d_grad_weight", lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, padding=2))):
            ms = median_ms(f)
            out["ops"].append({"layer": name, "op": op, "wall_ms": round(ms, 3), "gflops": round(flops / ms / 1e6, 2)})
            print(f"{name:6s} {op:20s} {ms:9.3f} ms {flops / ms / 1e6:8.2f} GFLOP/s", file=sys.stderr)
    text = json.dumps(out, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
