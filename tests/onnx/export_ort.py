#!/usr/bin/env python3
"""ONNX export end to end (tools/test.d/40-onnx.sh; docs/MODELS.md).

Trains a small CNN (with batch norm) briefly with `chutney train --export-onnx m.onnx --save-model
m.ctn --checkpoint-dir ck`, then checks:
  1. m.onnx passes onnx.checker (full check, with shape inference);
  2. onnxruntime's logits on random images equal chutney's (`chutney onnx run` of m.onnx) within
     rtol 1e-4;
  3. `chutney onnx export` of the graph file m.ctn, of the epoch checkpoint and of m.onnx itself
     (import, export again) give models whose chutney outputs equal m.onnx's bit for bit;
  4. with ONNX_EXPORT_TEST (the onnx_export_test binary): the models of its test of the basic
     ops (elementwise, comparisons, Where, Clip, MatMul with transposes, reductions, Slice,
     Concat, Expand, Reshape, Transpose, Cast) and of an inference CNN with AveragePool run in
     onnxruntime with chutney's outputs (rtol 1e-4);
  5. float16 and bfloat16 models re-exported by chutney pass the checker and keep their bits
     (onnxruntime runs the float16 one).
Usage: export_ort.py CHUTNEY WORKDIR [ONNX_EXPORT_TEST]. Exit 0 pass, 1 fail, 77 when
onnxruntime is missing.
"""
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
except ImportError as e:
    print(f"export_ort: SKIP: {e}")
    sys.exit(77)

BATCH = 50


def sh(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"export_ort: FAIL: {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
        sys.exit(1)
    return r.stdout


def chutney_logits(cli, model, x_npy, out_dir):
    sh(cli, "onnx", "run", model, "--input", f"x={x_npy}", "--output-dir", out_dir)
    return np.load(os.path.join(out_dir, "logits.npy"))


def main():
    cli, work = sys.argv[1], sys.argv[2]
    # A fresh folder each run: a previous run's checkpoints would make `chutney train` refuse.
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    m_onnx, m_ctn, ck = (os.path.join(work, n) for n in ("m.onnx", "m.ctn", "ck"))
    for p in (m_onnx, m_ctn):
        if os.path.exists(p):
            os.remove(p)
    sh(cli, "train", "--model", "cnn", "--cnn-widths", "4,8,16,bn", "--epochs", "1", "--limit", "256",
       "--batch-size", "64", "--eval-batch-size", str(BATCH), "--quiet", "--keep-last", "0",
       "--checkpoint-dir", ck, "--export-onnx", m_onnx, "--save-model", m_ctn)
    onnx.checker.check_model(onnx.load(m_onnx), full_check=True)

    sess = ort.InferenceSession(m_onnx, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    if inp.name != "x" or list(inp.shape) != [BATCH, 1, 28, 28]:
        print(f"export_ort: FAIL: input {inp.name} {inp.shape}")
        return 1
    x = np.random.default_rng(7).standard_normal((BATCH, 1, 28, 28)).astype(np.float32)
    x_npy = os.path.join(work, "x.npy")
    np.save(x_npy, x)
    want = chutney_logits(cli, m_onnx, x_npy, os.path.join(work, "out"))
    got = sess.run(["logits"], {"x": x})[0]
    err = float(np.max(np.abs(got - want)))
    if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
        print(f"export_ort: FAIL: onnxruntime differs from chutney by up to {err}")
        return 1
    print(f"export_ort: onnxruntime {ort.__version__} = chutney within rtol 1e-4 (max |diff| {err:.2e}) "
          f"on logits {got.shape}")

    ckpts = sorted(f for f in os.listdir(ck) if f.endswith(".safetensors"))
    sources = {"graph file": [m_ctn], "checkpoint": [os.path.join(ck, ckpts[-1]), "--batch-size", str(BATCH)],
               "re-export of m.onnx": [m_onnx]}
    for what, args in sources.items():
        out = os.path.join(work, "re.onnx")
        sh(cli, "onnx", "export", args[0], out, *args[1:])
        again = chutney_logits(cli, out, x_npy, os.path.join(work, "out-re"))
        if not np.array_equal(again, want):
            print(f"export_ort: FAIL: the export of the {what} differs from m.onnx by "
                  f"{float(np.max(np.abs(again - want)))}")
            return 1
        print(f"export_ort: chutney onnx export of the {what}: same outputs bit for bit")
    if check_lowp_models(cli, work):
        return 1
    if len(sys.argv) > 3:
        return check_unit_models(cli, sys.argv[3], work)
    return 0


def check_lowp_models(cli, work):
    """5. ABI 1.5 dtypes: `chutney onnx export` of tests/onnx/models/identity_f16.onnx passes the
    checker and runs in onnxruntime, numpy's float16 file in, the same bits out; the bf16
    initializer of const_bf16.onnx (int32_data, as onnx.helper packs it) comes out as raw_data
    with the same bits. Returns 1 on failure."""
    here = os.path.dirname(os.path.abspath(__file__))
    f16, bf16 = os.path.join(work, "re_f16.onnx"), os.path.join(work, "re_bf16.onnx")
    sh(cli, "onnx", "export", os.path.join(here, "models", "identity_f16.onnx"), f16)
    sh(cli, "onnx", "export", os.path.join(here, "models", "const_bf16.onnx"), bf16)
    for path in (f16, bf16):
        onnx.checker.check_model(onnx.load(path), full_check=True)
    sess = ort.InferenceSession(f16, providers=["CPUExecutionProvider"])
    x = np.load(os.path.join(here, "data_f16.npy"))
    y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    if y.dtype != np.float16 or not np.array_equal(y.view(np.uint16), x.view(np.uint16)):
        print(f"export_ort: FAIL: the exported float16 identity gave {y.dtype} {y!r} for {x!r}")
        return 1
    orig = onnx.load(os.path.join(here, "models", "const_bf16.onnx")).graph.initializer[0]
    got = onnx.load(bf16).graph.initializer[0]
    if got.data_type != onnx.TensorProto.BFLOAT16 or list(np.frombuffer(got.raw_data, np.uint16)) != list(orig.int32_data):
        print(f"export_ort: FAIL: the bf16 initializer came back as {got}")
        return 1
    print("export_ort: float16 and bfloat16 models re-exported: checker, onnxruntime and the bits agree")
    return 0


def check_unit_models(cli, test_bin, work):
    keep = os.path.join(work, "unit")
    os.makedirs(keep, exist_ok=True)
    env = dict(os.environ, CTN_ONNX_EXPORT_KEEP=keep)
    r = subprocess.run([test_bin, "--gtest_filter=OnnxExport.CnnAndBasicOpsReimportWithTheOriginalsOutputs"],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"export_ort: FAIL: {test_bin}\n{r.stdout[-2000:]}")
        return 1
    for name in ("m0.onnx", "m1.onnx"):
        path = os.path.join(keep, name)
        onnx.checker.check_model(onnx.load(path), full_check=True)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        inp = sess.get_inputs()[0]
        n = int(np.prod(inp.shape))
        x = (np.sin(np.arange(n, dtype=np.float32) * np.float32(0.37)) * 2).astype(np.float32).reshape(inp.shape)
        x_npy = os.path.join(keep, "x.npy")
        np.save(x_npy, x)
        out_dir = os.path.join(keep, "out-" + name)
        sh(cli, "onnx", "run", path, "--input", f"{inp.name}={x_npy}", "--output-dir", out_dir)
        for o, got in zip(sess.get_outputs(), sess.run(None, {inp.name: x})):
            want = np.load(os.path.join(out_dir, o.name + ".npy"))
            if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                print(f"export_ort: FAIL: {name} {o.name}: onnxruntime {got.shape} differs from chutney {want.shape}")
                return 1
        print(f"export_ort: {name} of onnx_export_test: {len(sess.get_outputs())} outputs equal in onnxruntime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
