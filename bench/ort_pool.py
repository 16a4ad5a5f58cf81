#!/usr/bin/env python3
"""onnxruntime's side of bench/pool_bench: the same pooling cases as one-node ONNX models
(MaxPool / AveragePool, f32, NCHW), each timed with intra_op_num_threads 1 and 2 (inter-op 1,
sequential execution), best and median ms per session.run over --reps runs after 3 warm-ups,
at 1 thread the best process CPU time per run, and from onnxruntime's profiler the pooling
node's best time (pool_kernel_ms_1t) and the best sum over a run's nodes (all_kernels_ms_1t: with
NCHWc, onnxruntime reorders the input and the output around the pooling node), i.e. the run
without Python's and the session's overhead.
Prints JSON, one line per case. Run with the peer venv: source ../shared/peers/ort-venv.sh; "$ORT_PY" bench/ort_pool.py
"""
import argparse
import json
import os
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

# (name, max, [n, c, h, w], k, s, p, count_include_pad): the list in bench/pool_bench.cpp.
CASES = [
    ("resnet_stem_max3x3s2p1", True, [1, 64, 112, 112], 3, 2, 1, 0),
    ("shufflenet_stem_max3x3s2p1", True, [1, 24, 112, 112], 3, 2, 1, 0),
    ("squeezenet_max3x3s2", True, [1, 96, 109, 109], 3, 2, 0, 0),
    ("max2x2s2", True, [1, 64, 112, 112], 2, 2, 0, 0),
    ("max3x3s1p1", True, [1, 64, 56, 56], 3, 1, 1, 0),
    ("avg3x3s1p1_excl", False, [1, 64, 56, 56], 3, 1, 1, 0),
    ("avg3x3s2p1_incl", False, [1, 64, 112, 112], 3, 2, 1, 1),
    ("avg2x2s2", False, [1, 64, 56, 56], 2, 2, 0, 0),
    ("global_avg7x7", False, [1, 512, 7, 7], 7, 1, 0, 0),
    ("batch8_max3x3s2p1", True, [8, 64, 56, 56], 3, 2, 1, 0),
    ("global_avg7x7_mean", False, [1, 512, 7, 7], 0, 1, 0, 0),  # k 0: GlobalAveragePool
]


def model(is_max, shape, k, s, p, incl):
    n, c, h, w = shape
    if k == 0:
        ho = wo = 1
        node = helper.make_node("GlobalAveragePool", ["x"], ["y"])
    else:
        ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p])
        if not is_max:
            attrs["count_include_pad"] = incl
        node = helper.make_node("MaxPool" if is_max else "AveragePool", ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, c, ho, wo])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m.SerializeToString()


def time_case(blob, shape, threads, reps, profile=False):
    so = ort.SessionOptions()
    so.enable_profiling = profile
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).uniform(-0.5, 0.5, shape).astype(np.float32)
    t, cpu = [], 1e30
    for r in range(reps + 3):
        t0, c0 = time.perf_counter(), time.process_time()
        sess.run(None, {"x": x})
        c1 = time.process_time()
        if r >= 3:
            t.append(1e3 * (time.perf_counter() - t0))
            cpu = min(cpu, 1e3 * (c1 - c0))
    t.sort()
    kernels = None
    if profile:
        with open(sess.end_profiling()) as f:
            ev = [e for e in json.load(f) if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
        os.remove(f.name)
        # Per run, the pooling node alone and all nodes (with NCHWc, onnxruntime reorders the
        # input and output around the pooling node: ReorderInput, MaxPool, ReorderOutput).
        per_run = len(ev) // (reps + 3)
        runs = [ev[i * per_run:(i + 1) * per_run] for i in range(3, reps + 3)]
        pool = min(e["dur"] for r in runs for e in r if e["args"]["op_name"] in ("MaxPool", "AveragePool", "GlobalAveragePool"))
        kernels = (pool / 1e3, min(sum(e["dur"] for e in r) for r in runs) / 1e3, [e["args"]["op_name"] for e in runs[0]])
    return t[0], t[len(t) // 2], cpu, kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--case", default=None)
    a = ap.parse_args()
    out = {"onnxruntime": ort.__version__, "reps": a.reps, "cases": []}
    for name, is_max, shape, k, s, p, incl in CASES:
        if a.case and a.case != name:
            continue
        blob = model(is_max, shape, k, s, p, incl)
        r = {"name": name, "op": "GlobalAveragePool" if k == 0 else "MaxPool" if is_max else "AveragePool", "shape": shape, "k": k, "s": s, "p": p,
             "count_include_pad": incl}
        for t in (1, 2):
            best, med, cpu, _ = time_case(blob, shape, t, a.reps)
            r["ms_%dt" % t], r["ms_%dt_median" % t] = round(best, 4), round(med, 4)
            if t == 1:
                r["cpu_ms_1t"] = round(cpu, 4)
                pool, nodes, ops = time_case(blob, shape, 1, a.reps, profile=True)[3]
                r["pool_kernel_ms_1t"], r["all_kernels_ms_1t"], r["nodes"] = round(pool, 4), round(nodes, 4), ops
        out["cases"].append(r)
    print("{\n \"onnxruntime\": \"%s\", \"reps\": %d,\n \"cases\": [" % (out["onnxruntime"], a.reps))
    print(",\n".join("  " + json.dumps(r) for r in out["cases"]))
    print(" ]\n}")


if __name__ == "__main__":
    main()
