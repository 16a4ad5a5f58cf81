#!/usr/bin/env python3
"""Fine-tuning an ONNX model nobody here wrote (tools/test.d/40-onnx.sh; docs/MODELS.md).

Builds with onnx.helper an MLP with a symbolic batch ("N", Gemm + Relu + Gemm, random weights from
a fixed seed, as another exporter would write it), then checks `chutney train --model-onnx`:
  1. with --lr 1e-12 (no real update) chutney's test accuracy equals onnxruntime's accuracy of the
     original model on the same normalised test set within 1e-4: the model's own weights are the
     starting point, not a re-initialisation;
  2. one real epoch (--limit 12800) lifts the accuracy by at least 0.3 (random weights start near
     0.1), and the model written by --export-onnx has onnxruntime's accuracy = chutney's within
     2e-3 (the trained weights travel);
  3. --checkpoint-dir then --resume continues the run (the ONNX path comes from the checkpoint);
  4. a model whose input is not Fashion-MNIST-shaped is refused with a message naming its shape.
Usage: train_onnx.py CHUTNEY WORKDIR. Exit 0 pass, 1 fail, 77 when onnx/onnxruntime or the
dataset is missing.
"""
import gzip
import os
import re
import shutil
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import onnxruntime as ort
except ImportError as e:
    print(f"train_onnx: SKIP: {e}")
    sys.exit(77)

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # the CLI's normalisation (tools/chutney/models.h)


def fail(msg):
    print(f"train_onnx: FAIL: {msg}")
    sys.exit(1)


def run(*args, expect_ok=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if expect_ok and r.returncode != 0:
        fail(f"{' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def accuracy_of(out):
    m = re.search(r"final test accuracy: ([0-9.]+)", out)
    if not m:
        fail(f"no final accuracy in:\n{out}")
    return float(m.group(1))


def test_set():
    def read(name, offset):
        with gzip.open(os.path.join(DATA, name), "rb") as f:
            return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)
    x = read("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32)
    y = read("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)
    return ((x / 255.0 - MEAN) / STD).astype(np.float32), y


def ort_accuracy(path, x, y):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    batch = inp.shape[0] if isinstance(inp.shape[0], int) else 1000
    correct = 0
    for i in range(0, len(x), batch):
        logits = sess.run(None, {inp.name: x[i:i + batch]})[0]
        correct += int((logits.argmax(1) == y[i:i + batch]).sum())
    return correct / len(x)


def make_mlp(path, in_shape=("N", 784)):
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((in_shape[1], 64)) * 0.05).astype(np.float32)
    w2 = (rng.standard_normal((64, 10)) * 0.05).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "fc1.w"), numpy_helper.from_array(np.zeros(64, np.float32), "fc1.b"),
             numpy_helper.from_array(w2, "fc2.w"), numpy_helper.from_array(np.zeros(10, np.float32), "fc2.b")]
    nodes = [helper.make_node("Gemm", ["image", "fc1.w", "fc1.b"], ["h"]),
             helper.make_node("Relu", ["h"], ["hr"]),
             helper.make_node("Gemm", ["hr", "fc2.w", "fc2.b"], ["scores"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("image", TensorProto.FLOAT, list(in_shape))],
                          [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="train_onnx.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def main():
    if len(sys.argv) != 3:
        fail("usage: train_onnx.py CHUTNEY WORKDIR")
    cli, work = sys.argv[1], sys.argv[2]
    if not os.path.exists(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")):
        print(f"train_onnx: SKIP: no Fashion-MNIST in {DATA}")
        sys.exit(77)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = os.path.join(work, "mlp.onnx")
    make_mlp(model)
    x, y = test_set()
    common = ["--epochs", "1", "--batch-size", "64", "--eval-batch-size", "500", "--quiet", "--threads", "2"]

    # 1. The model's own weights are where training starts.
    base = ort_accuracy(model, x, y)
    got = accuracy_of(run(cli, "train", "--model-onnx", model, "--lr", "1e-12", "--limit", "640", *common).stdout)
    if abs(got - base) > 1e-4:
        fail(f"with lr 1e-12 chutney's accuracy {got} differs from onnxruntime's {base} of the model as given")
    print(f"train_onnx: untrained model: onnxruntime {base:.4f} = chutney {got:.4f}")

    # 2. Fine-tuning trains, and the exported model carries the trained weights.
    tuned = os.path.join(work, "tuned.onnx")
    acc = accuracy_of(run(cli, "train", "--model-onnx", model, "--limit", "12800", "--export-onnx", tuned,
                          *common).stdout)
    if acc < base + 0.3:
        fail(f"one epoch of fine-tuning reached {acc}, from {base}")
    exported = ort_accuracy(tuned, x, y)
    if abs(exported - acc) > 2e-3:
        fail(f"onnxruntime's accuracy of the exported model {exported} differs from chutney's {acc}")
    print(f"train_onnx: fine-tuned {base:.4f} -> {acc:.4f}; exported model in onnxruntime {exported:.4f}")

    # 3. Checkpoint and resume (the ONNX path is in the checkpoint's metadata).
    ck = os.path.join(work, "ck")
    run(cli, "train", "--model-onnx", model, "--limit", "1280", "--checkpoint-dir", ck, *common)
    first = os.path.join(ck, "onnx-epoch001.safetensors")
    if not os.path.exists(first):
        fail(f"no checkpoint {first}: {os.listdir(ck)}")
    out = run(cli, "train", "--resume", first, "--epochs", "2", "--quiet", "--threads", "2").stdout
    if "epoch 2/2" not in out:
        fail(f"--resume did not run epoch 2:\n{out}")
    print("train_onnx: --checkpoint-dir / --resume continue an ONNX model's run")

    # 4. A model that does not take Fashion-MNIST images is refused with its shape named.
    wrong = os.path.join(work, "wrong.onnx")
    make_mlp(wrong, in_shape=("N", 100))
    r = run(cli, "train", "--model-onnx", wrong, *common, expect_ok=False)
    if r.returncode == 0 or "[1, 100]" not in r.stderr or "Fashion-MNIST training needs" not in r.stderr:
        fail(f"a [N, 100] model: exit {r.returncode}, stderr {r.stderr!r}")
    print(f"train_onnx: a [N, 100] model is refused: {r.stderr.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
