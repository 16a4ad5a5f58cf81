#!/usr/bin/env python3
"""Off-the-shelf models, chutney vs onnxruntime (issue 25; docs/BENCHMARKS.md, "Model zoo").

Phases, each run with the peer venvs (source ../shared/peers/torch2-venv.sh, then
../shared/peers/ort-venv.sh: $ORT_PY sees PyTorch 2.15, torchvision, onnx and onnxruntime 1.32):

  export  PyTorch 2.15 exports every model of MODELS (random weights, torch.manual_seed(0); models
          with batch norm first run 3 train-mode batches so that the running statistics are not
          the initial 0/1) with torch.onnx.export (dynamo exporter, its optimiser on: batch norm is
          folded into the convolutions as onnxruntime users get it) once with a dynamic batch
          dimension, then writes per batch size a copy with static input and output shapes,
          CACHE/NAME_bB.onnx, with its input CACHE/NAME_bB.in.npz. Models already in the cache
          are kept.
  bench   For every model, batch and thread count: onnxruntime (CPUExecutionProvider, default graph
          optimisations, intra_op_num_threads = threads, inter_op 1, sequential) and chutney (the
          C API through ctypes on build/core/libchutney.so: ctn_onnx_load with
          CTN_ONNX_INITIALIZERS_AS_CONSTANTS, ctn_plan_compile with default options, only the CPU
          plugin, ctn_context num_threads = threads), each in its own process, one after the
          other (never both at once), alternated --rounds times, best and median wall ms per run
          after 2 warm-ups and the best process CPU ms per run (the figure a loaded machine
          disturbs least at 1 thread; the table gives its ratio too), best of the rounds. Each run feeds
          the input and copies the output out, on both sides. chutney's output is compared with
          onnxruntime's (max abs difference, and whether within rtol 1e-4 / atol 1e-5). The
          per-call overhead of each path is the time of a one-Add model ([1,4] f32) measured the
          same way. Writes JSON (--json) and prints a Markdown table with geometric means.
  quantize int8 QDQ copies of exported models with onnxruntime's quantize_static (per-channel
          int8 weights, uint8 activations), CACHE/NAME_int8_bB.onnx; bench them as NAME_int8.
  agree   top-1 agreement of chutney's and onnxruntime's runs of an int8 QDQ model (the same
          recipe on the dynamic-batch export) on --inputs inputs, and of both with the f32 model.
  profile chutney's run of one model under CHUTNEY_PROFILE=1 (per-op time, stderr).

CACHE defaults to build/onnx_zoo (not checked in). Examples:
  "$ORT_PY" bench/onnx_zoo.py export
  "$ORT_PY" bench/onnx_zoo.py bench --threads 1,2 --batches 1,8 --json build/onnx_zoo/result.json
  "$ORT_PY" bench/onnx_zoo.py profile --model squeezenet --batch 1 --threads 1
  "$ORT_PY" bench/onnx_zoo.py quantize --models resnet18,mobilenet_v2 --batches 1
  "$ORT_PY" bench/onnx_zoo.py bench --models resnet18_int8,mobilenet_v2_int8 --batches 1 --threads 1,2
"""
import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_CACHE = os.path.join(ROOT, "build", "onnx_zoo")
DEFAULT_LIB = os.path.join(ROOT, "build", "core", "libchutney.so")

# name -> input kind; the builders are in build_model (PyTorch is imported only to export).
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet",
          "shufflenet", "convnext_tiny", "vit_small", "transformer_encoder", "bert_tiny", "lstm"]


# ---------------------------------------------------------------------------------------------
# export (PyTorch)
# ---------------------------------------------------------------------------------------------
def build_model(name, batch):
    """(module, example inputs) for one model; random weights from torch.manual_seed(0)."""
    import torch
    import torchvision
    from torch import nn

    torch.manual_seed(0)
    tv = torchvision.models
    image = lambda: (torch.randn(batch, 3, 224, 224),)
    torchvision_names = {"resnet18": "resnet18", "resnet50": "resnet50", "mobilenet_v2": "mobilenet_v2",
                         "mobilenet_v3_small": "mobilenet_v3_small", "efficientnet_b0": "efficientnet_b0",
                         "squeezenet": "squeezenet1_1", "shufflenet": "shufflenet_v2_x1_0",
                         "convnext_tiny": "convnext_tiny"}
    if name in torchvision_names:
        return getattr(tv, torchvision_names[name])(), image()
    if name == "vit_small":
        # ViT-S/16 width (384, 6 heads) with 6 of its 12 layers, 224x224: 197 tokens. torchvision
        # zero-initialises the head (all outputs 0, nothing to compare): random weights instead.
        vit = tv.VisionTransformer(image_size=224, patch_size=16, num_layers=6, num_heads=6, hidden_dim=384,
                                   mlp_dim=1536, num_classes=1000)
        nn.init.normal_(vit.heads.head.weight, std=0.02)
        return vit, image()
    if name == "transformer_encoder":
        layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True,
                                           dropout=0.1)
        return nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False), (torch.randn(batch, 128, 256),)
    if name == "bert_tiny":
        class BertTiny(nn.Module):  # BERT-tiny's shape: 2 layers, hidden 128, 2 heads, vocab 30522
            def __init__(self):
                super().__init__()
                self.tok, self.pos = nn.Embedding(30522, 128), nn.Embedding(512, 128)
                self.norm = nn.LayerNorm(128)
                layer = nn.TransformerEncoderLayer(128, 2, 512, activation="gelu", batch_first=True)
                self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
                self.pool = nn.Linear(128, 128)

            def forward(self, ids):
                pos = torch.arange(ids.shape[1]).unsqueeze(0)
                h = self.enc(self.norm(self.tok(ids) + self.pos(pos)))
                return torch.tanh(self.pool(h[:, 0]))
        g = torch.Generator().manual_seed(1)
        return BertTiny(), (torch.randint(0, 30522, (batch, 128), generator=g),)
    if name == "lstm":
        class Lstm(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm, self.fc = nn.LSTM(128, 256, num_layers=2, batch_first=True), nn.Linear(256, 10)

            def forward(self, x):
                y, _ = self.lstm(x)
                return self.fc(y[:, -1])
        return Lstm(), (torch.randn(batch, 32, 128),)
    raise SystemExit(f"onnx_zoo: unknown model '{name}' (known: {', '.join(MODELS)})")


def export(a):
    """One export per model with a dynamic batch dimension (example batch 2: torch.export
    specialises 1), then per batch size a copy whose input and output shapes are static."""
    import onnx
    import torch

    os.makedirs(a.cache, exist_ok=True)
    for name in a.models:
        paths = {b: os.path.join(a.cache, f"{name}_b{b}.onnx") for b in a.batches}
        if all(os.path.exists(p) and os.path.exists(p[:-5] + ".in.npz") for p in paths.values()):
            continue
        t0 = time.time()
        model, args = build_model(name, 2)
        if any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
            model.train()
            with torch.no_grad():
                for _ in range(3):
                    model(torch.randn(4, *args[0].shape[1:]))
        model.eval()
        dyn = os.path.join(a.cache, f"{name}_dyn.onnx")
        batch_dim = torch.export.Dim("batch", min=1, max=1024)
        torch.onnx.export(model, args, dyn, external_data=False, dynamic_shapes=({0: batch_dim},))
        proto = onnx.load(dyn)
        inits = {t.name for t in proto.graph.initializer}
        inputs = [i for i in proto.graph.input if i.name not in inits]
        for b, path in paths.items():
            m = onnx.ModelProto()
            m.CopyFrom(proto)
            del m.graph.value_info[:]
            for v in list(m.graph.input) + list(m.graph.output):
                if v.name in inits:
                    continue
                d = v.type.tensor_type.shape.dim[0]
                if d.dim_param or not d.HasField("dim_value"):
                    d.dim_value = b
            onnx.save(m, path)
            _, bargs = build_model(name, b)
            np.savez(path[:-5] + ".in.npz", **{i.name: x.numpy() for i, x in zip(inputs, bargs)})
        print(f"{name}: exported in {time.time() - t0:.1f} s, ops {sorted({n.op_type for n in proto.graph.node})}",
              flush=True)


def quantize(a):
    """int8 copies of exported models (docs/BENCHMARKS.md, "int8"): onnxruntime's quantize_static,
    QDQ format, per-channel int8 weights, per-tensor uint8 activations, calibrated on --calib
    batches of standard-normal inputs (seed 0), written as CACHE/NAME_int8_bB.onnx with the fp32
    model's input file. `bench --models NAME_int8` then times them like any model."""
    rng = np.random.default_rng(0)
    for name in a.models:
        for b in a.batches:
            src = os.path.join(a.cache, f"{name}_b{b}.onnx")
            dst = os.path.join(a.cache, f"{name}_int8_b{b}.onnx")
            if os.path.exists(dst) or not os.path.exists(src):
                continue
            ins = dict(np.load(src[:-5] + ".in.npz"))
            feeds = [{k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in ins.items()} for _ in range(a.calib)]
            t0 = time.time()
            quantize_qdq(src, dst, feeds)
            np.savez(dst[:-5] + ".in.npz", **ins)
            print(f"{name} b{b}: quantized in {time.time() - t0:.1f} s -> {dst}", flush=True)


def agree(a):
    """Top-1 agreement on --inputs standard-normal inputs (seed 1, batches of 50) of chutney's run
    of NAME's int8 QDQ model (quantize's recipe on the dynamic-batch export, CACHE/NAME_int8_dyn.onnx)
    with onnxruntime's run of the same model, and of both with the f32 model."""
    import onnxruntime as ort
    for name in a.models:
        src, q = os.path.join(a.cache, f"{name}_dyn.onnx"), os.path.join(a.cache, f"{name}_int8_dyn.onnx")
        inp = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).get_inputs()[0]
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        if not os.path.exists(q):
            quantize_dyn(src, q, inp.name, shape, a.calib)
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads_one
        s8 = ort.InferenceSession(q, so, providers=["CPUExecutionProvider"])
        s32 = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(1)
        n = same = c32 = o32 = 0
        diff = 0.0
        x_path = os.path.join(a.cache, "agree.in.npy")
        while n < a.inputs:
            x = rng.standard_normal([min(50, a.inputs - n)] + shape[1:]).astype(np.float32)
            np.save(x_path, x)
            out_dir = os.path.join(a.cache, "agree_out")
            r = subprocess.run([os.path.join(ROOT, "build", "tools", "chutney", "chutney"), "onnx", "run", q, "--input",
                                f"{inp.name}={x_path}", "--output-dir", out_dir, "--backend", "cpu"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"{name}: chutney onnx run failed: {r.stderr.strip()}")
            yc = np.load(os.path.join(out_dir, sorted(os.listdir(out_dir))[0]))
            yo, yf = s8.run(None, {inp.name: x})[0], s32.run(None, {inp.name: x})[0]
            diff = max(diff, float(np.abs(yc - yo).max()))
            same += int((yc.argmax(1) == yo.argmax(1)).sum())
            c32 += int((yc.argmax(1) == yf.argmax(1)).sum())
            o32 += int((yo.argmax(1) == yf.argmax(1)).sum())
            n += len(x)
        print(f"{name}: {n} inputs: top-1 chutney int8 = onnxruntime int8 on {same / n * 100:.1f} % (max abs diff "
              f"{diff:.3g}); agreement with f32: chutney {c32 / n * 100:.1f} %, onnxruntime {o32 / n * 100:.1f} %",
              flush=True)


def quantize_qdq(src, dst, feeds):
    """onnxruntime's quantize_static of src into dst, calibrated on the list of input dicts `feeds`:
    QDQ format, per-channel int8 weights, per-tensor uint8 activations."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)


def quantize_dyn(src, dst, name, shape, calib):
    rng = np.random.default_rng(0)
    quantize_qdq(src, dst, [{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(calib)])


# ---------------------------------------------------------------------------------------------
# workers: one runtime, one model, one thread count per process
# ---------------------------------------------------------------------------------------------
def time_loop(run, reps, budget_s):
    """Best and median wall ms of run() after 2 warm-ups, over `reps` runs or until `budget_s`
    passed (at least 3 runs), the run count and the best process CPU ms per run (all threads:
    on a loaded machine, at 1 thread, the figure the load disturbs least)."""
    for _ in range(2):
        run()
    t, cpu, start = [], 1e30, time.perf_counter()
    while len(t) < reps and (len(t) < 3 or time.perf_counter() - start < budget_s):
        t0, c0 = time.perf_counter(), time.process_time()
        run()
        c1 = time.process_time()
        t.append(1e3 * (time.perf_counter() - t0))
        cpu = min(cpu, 1e3 * (c1 - c0))
    t.sort()
    return {"best_ms": t[0], "median_ms": t[len(t) // 2], "runs": len(t), "cpu_ms": cpu}


def worker_ort(model, npz, threads, reps, budget_s, out):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    load_ms = 1e3 * (time.perf_counter() - t0)
    feeds = dict(np.load(npz))
    y = sess.run(None, feeds)[0]
    r = time_loop(lambda: sess.run(None, feeds), reps, budget_s)
    if out:
        np.save(out, y)
    return dict(r, load_ms=load_ms, version=ort.__version__)


class Chutney:
    """The part of chutney's C API (abi/chutney/chutney.h, onnx.h) the bench uses, via ctypes."""

    class ContextOptions(ctypes.Structure):
        _fields_ = [("struct_size", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("plugin_path", ctypes.c_char_p),
                    ("backends", ctypes.c_char_p), ("num_threads", ctypes.c_int32), ("reserved", ctypes.c_int32)]

    class OnnxOptions(ctypes.Structure):
        _fields_ = [("struct_size", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("n_inputs", ctypes.c_uint32),
                    ("reserved", ctypes.c_uint32), ("inputs", ctypes.c_void_p), ("external_data_dir", ctypes.c_char_p)]

    # ctn_compile_options as ABI 1.2 laid it out (a smaller struct_size is an older caller's: the
    # later fields take their defaults).
    class CompileOptions(ctypes.Structure):
        _fields_ = [("struct_size", ctypes.c_uint32), ("disable", ctypes.c_uint32), ("backends", ctypes.c_char_p),
                    ("data_parallel", ctypes.c_void_p), ("dp_bucket_bytes", ctypes.c_uint64),
                    ("memory_budget", ctypes.c_uint64)]

    DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int32): 2, np.dtype(np.int64): 3,
              np.dtype(np.uint8): 4, np.dtype(np.bool_): 5}
    NP = {v: k for k, v in DTYPES.items()}

    def __init__(self, lib_path, threads):
        self.lib = ctypes.CDLL(lib_path)
        self.lib.ctn_last_error.restype = ctypes.c_char_p
        plugins = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(lib_path))), "backends", "cpu")
        o = self.ContextOptions(ctypes.sizeof(self.ContextOptions), 1, plugins.encode(), b"cpu", threads, 0)
        self.ctx = ctypes.c_void_p()
        self.ck(self.lib.ctn_context_create(ctypes.byref(o), ctypes.byref(self.ctx)), "ctn_context_create")
        # ONNX_ZOO_DISABLE_PASSES: CTN_PASS_* bits to skip (8: fusion), for A/B runs of a compile pass.
        self.disable = int(os.environ.get("ONNX_ZOO_DISABLE_PASSES", "0"))

    def ck(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: status {status}: {self.lib.ctn_last_error().decode(errors='replace')}")

    def tensor(self, a):
        a = np.ascontiguousarray(a)
        shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
        t = ctypes.c_void_p()
        self.ck(self.lib.ctn_tensor_create(self.DTYPES[a.dtype], a.ndim, shape, a.ctypes.data_as(ctypes.c_void_p),
                                           ctypes.byref(t)), "ctn_tensor_create")
        return t

    def read(self, t):
        nd, dt = ctypes.c_uint32(), ctypes.c_int32()
        shape = (ctypes.c_int64 * 8)()
        self.ck(self.lib.ctn_tensor_shape(t, ctypes.byref(nd), shape), "ctn_tensor_shape")
        self.ck(self.lib.ctn_tensor_dtype(t, ctypes.byref(dt)), "ctn_tensor_dtype")
        a = np.empty(tuple(shape[:nd.value]), self.NP[dt.value])
        self.ck(self.lib.ctn_tensor_read(t, a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.nbytes)),
                "ctn_tensor_read")
        return a

    def entries(self, m, kind):
        n = ctypes.c_uint32()
        self.ck(self.lib.ctn_onnx_model_count(m, kind, ctypes.byref(n)), "ctn_onnx_model_count")
        out = []
        for i in range(n.value):
            name, node = ctypes.c_char_p(), ctypes.c_uint32()
            self.ck(self.lib.ctn_onnx_model_entry(m, kind, i, ctypes.byref(name), ctypes.byref(node)),
                    "ctn_onnx_model_entry")
            out.append((name.value.decode(), node.value))
        return out

    def load(self, model, feeds):
        """(plan run closure, outputs) for `model` fed with the dict `feeds`; times load+compile."""
        o = self.OnnxOptions(ctypes.sizeof(self.OnnxOptions), 1, 0, 0, None, None)  # initializers as constants
        g, m = ctypes.c_void_p(), ctypes.c_void_p()
        self.ck(self.lib.ctn_onnx_load(self.ctx, model.encode(), ctypes.byref(o), ctypes.byref(g), ctypes.byref(m)),
                "ctn_onnx_load " + model)
        ins, outs = self.entries(m, 0), self.entries(m, 1)
        out_nodes = (ctypes.c_uint32 * len(outs))(*[n for _, n in outs])
        p = ctypes.c_void_p()
        opts = None
        if self.disable:  # the 1.2 layout of ctn_compile_options: struct_size, disable, then defaults
            opts = self.CompileOptions(ctypes.sizeof(self.CompileOptions), self.disable, None, None, 0, 0)
        self.ck(self.lib.ctn_plan_compile(g, len(outs), out_nodes, opts and ctypes.byref(opts), ctypes.byref(p)),
                "ctn_plan_compile")
        self.lib.ctn_graph_release(g)
        self.lib.ctn_onnx_model_release(m)
        self.keep = [self.tensor(feeds[name]) for name, _ in ins]
        feed_nodes = (ctypes.c_uint32 * len(ins))(*[n for _, n in ins])
        feed_vals = (ctypes.c_void_p * len(ins))(*[t.value for t in self.keep])
        out_t = []
        for i in range(len(outs)):
            t = ctypes.c_void_p()
            self.ck(self.lib.ctn_plan_output_create(p, i, ctypes.byref(t)), "ctn_plan_output_create")
            out_t.append(t)
        out_arr = (ctypes.c_void_p * len(out_t))(*[t.value for t in out_t])
        run_fn, n_in, n_out = self.lib.ctn_plan_run, len(ins), len(out_t)

        def run():
            st = run_fn(p, n_in, feed_nodes, feed_vals, n_out, out_arr)
            if st != 0:
                self.ck(st, "ctn_plan_run")
        self.plan = p
        return run, out_t

    def close(self):
        self.lib.ctn_plan_release(self.plan)  # prints the profile under CHUTNEY_PROFILE
        for t in self.keep:
            self.lib.ctn_tensor_release(t)


def worker_chutney(lib, model, npz, threads, reps, budget_s, out):
    c = Chutney(lib, threads)
    feeds = dict(np.load(npz))
    t0 = time.perf_counter()
    run, outs = c.load(model, feeds)
    load_ms = 1e3 * (time.perf_counter() - t0)
    run()
    y = c.read(outs[0])
    r = time_loop(run, reps, budget_s)
    if out:
        np.save(out, y)
    c.close()
    return dict(r, load_ms=load_ms)


def add_model(cache):
    """A one-Add model ([1,4] f32): its time is each path's per-call overhead."""
    import onnx
    from onnx import TensorProto, helper
    path = os.path.join(cache, "tiny_add.onnx")
    if not os.path.exists(path):
        vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4])
        g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "add", [vi("x")], [vi("y")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, path)
        np.savez(path[:-5] + ".in.npz", x=np.ones((1, 4), np.float32))
    return path


# ---------------------------------------------------------------------------------------------
# bench driver
# ---------------------------------------------------------------------------------------------
def spawn(args, env=None):
    r = subprocess.run([sys.executable, os.path.abspath(__file__)] + args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]}, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def gmean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def bench(a):
    rows = []
    tiny = add_model(a.cache)
    overhead = {}
    for t in a.threads:
        for rt in ("ort", "chutney"):
            r, _ = spawn(["_worker", rt, tiny, tiny[:-5] + ".in.npz", str(t), "2000", "2", "", a.lib])
            overhead[f"{rt}_{t}t"] = r
    print("per-call overhead (one-Add [1,4] model):",
          {k: round(v.get("best_ms", float("nan")) * 1e3, 1) for k, v in overhead.items()}, "us", flush=True)
    for name in a.models:
        for batch in a.batches:
            model = os.path.join(a.cache, f"{name}_b{batch}.onnx")
            npz = model[:-5] + ".in.npz"
            if not os.path.exists(model):
                print(f"{name} b{batch}: not exported (run the export phase)", flush=True)
                continue
            for t in a.threads:
                row = {"model": name, "batch": batch, "threads": t}
                ort_out, ctn_out = model[:-5] + f".ort{t}.npy", model[:-5] + f".ctn{t}.npy"
                for _ in range(a.rounds):  # alternated; per figure the best round
                    for rt, out in (("ort", ort_out), ("chutney", ctn_out)):
                        r, _ = spawn(["_worker", rt, model, npz, str(t), str(a.reps), str(a.budget), out, a.lib])
                        prev = row.get(rt)
                        if prev is None or "error" in r or "error" in prev:
                            row[rt] = r if prev is None or "error" in r else prev
                        else:
                            row[rt] = {k: min(v, r[k]) if k.endswith("_ms") else v for k, v in prev.items()}
                if "error" not in row["ort"] and "error" not in row["chutney"]:
                    yo, yc = np.load(ort_out), np.load(ctn_out)
                    row["max_abs_diff"] = float(np.max(np.abs(yo.astype(np.float64) - yc)))
                    row["within_1e-4"] = bool(np.allclose(yc, yo, rtol=1e-4, atol=1e-5))
                    row["ratio"] = row["chutney"]["best_ms"] / row["ort"]["best_ms"]
                    row["cpu_ratio"] = row["chutney"]["cpu_ms"] / row["ort"]["cpu_ms"]
                rows.append(row)
                print(json.dumps(row), flush=True)
    result = {"machine": os.uname().nodename, "cpus": os.cpu_count(), "load_avg": os.getloadavg(), "reps": a.reps,
              "budget_s": a.budget, "rounds": a.rounds, "overhead": overhead, "rows": rows,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    print(table(result))


def table(result):
    rows = result["rows"]
    cfgs = sorted({(r["batch"], r["threads"]) for r in rows})
    head = "| model | " + " | ".join(f"b{b} {t}t: chutney / ORT ms (x)" for b, t in cfgs) + " | max abs diff |"
    lines = [head, "|---" * (len(cfgs) + 2) + "|"]
    for name in dict.fromkeys(r["model"] for r in rows):
        cells, diff = [], 0.0
        for b, t in cfgs:
            r = next((r for r in rows if r["model"] == name and r["batch"] == b and r["threads"] == t), None)
            if r is None:
                cells.append("-")
            elif "ratio" not in r:
                cells.append("error: " + (r["chutney"].get("error") or r["ort"].get("error", ""))[:60])
            else:
                cpu = f", CPU {r['cpu_ratio']:.2f}x" if t == 1 else ""
                cells.append(f"{r['chutney']['best_ms']:.2f} / {r['ort']['best_ms']:.2f} ({r['ratio']:.2f}x{cpu})")
                diff = max(diff, r["max_abs_diff"])
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {diff:.1e} |")
    gm = [gmean([r.get("ratio") for r in rows if r["batch"] == b and r["threads"] == t]) for b, t in cfgs]
    worst = [max((r.get("ratio", 0), r["model"]) for r in rows if r["batch"] == b and r["threads"] == t) for b, t in cfgs]
    lines.append("| **geomean chutney/ORT** | " + " | ".join(f"**{g:.2f}x** (worst {w[1]} {w[0]:.2f}x)"
                                                     for g, w in zip(gm, worst)) + " | |")
    gc = [gmean([r.get("cpu_ratio") for r in rows if r["batch"] == b and r["threads"] == t]) if t == 1 else None
          for b, t in cfgs]
    lines.append("| geomean by CPU time (1 thread) | " + " | ".join(f"{g:.2f}x" if g else "" for g in gc) + " | |")
    return "\n".join(lines)


def profile(a):
    model = os.path.join(a.cache, f"{a.model}_b{a.batch}.onnx")
    env = dict(os.environ, CHUTNEY_PROFILE="1")
    r, err = spawn(["_worker", "chutney", model, model[:-5] + ".in.npz", str(a.threads), str(a.reps), str(a.budget), "",
                    a.lib], env)
    print(json.dumps(r))
    print(err)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        rt, model, npz, threads, reps, budget, out, lib = sys.argv[2:10]
        if rt == "ort":
            r = worker_ort(model, npz, int(threads), int(reps), float(budget), out)
        else:
            r = worker_chutney(lib, model, npz, int(threads), int(reps), float(budget), out)
        print(json.dumps(r))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=["export", "quantize", "agree", "bench", "profile", "table"])
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    ap.add_argument("--lib", default=DEFAULT_LIB)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=20, help="runs per case at most")
    ap.add_argument("--budget", type=float, default=3.0, help="seconds per case at most (3 runs at least)")
    ap.add_argument("--rounds", type=int, default=2, help="ORT and chutney alternated this many times per case")
    ap.add_argument("--json", default=None, help="bench: write the results here; table: read them from here")
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--calib", type=int, default=8, help="quantize, agree: calibration batches")
    ap.add_argument("--inputs", type=int, default=1000, help="agree: inputs compared")
    a = ap.parse_args()
    a.models = [m for m in a.models.split(",") if m]
    a.batches = [int(b) for b in a.batches.split(",")]
    a.threads = [int(t) for t in a.threads.split(",")]
    a.threads_one = a.threads[0]
    if a.phase == "export":
        export(a)
    elif a.phase == "quantize":
        quantize(a)
    elif a.phase == "agree":
        agree(a)
    elif a.phase == "bench":
        bench(a)
    elif a.phase == "table":  # --json A.json,B.json: the rows of several runs in one table
        rows = []
        for path in a.json.split(","):
            with open(path) as f:
                rows += json.load(f)["rows"]
        print(table({"rows": rows}))
    else:
        a.threads = a.threads[0]
        profile(a)


if __name__ == "__main__":
    main()
