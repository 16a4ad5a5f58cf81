#!/usr/bin/env python3
"""An onnxruntime-quantized model in chutney (tools/test.d/40-onnx.sh; docs/ONNX.md, "Quantized
models").

Builds with onnx.helper a small f32 CNN (Conv+Relu, strided Conv+Relu, grouped Conv, a residual
Add, GlobalAveragePool, Flatten, Gemm; random weights from a fixed seed), quantizes it with
onnxruntime's quantize_static (QDQ format, per-channel int8 weights, per-tensor uint8
activations, calibrated on 8 batches), then runs the QDQ model in chutney (`chutney onnx run`)
and in onnxruntime on the same 256 inputs and checks:
  1. chutney imported the convolutions, the residual Add and the Gemm as its int8 ops:
     CHUTNEY_PROFILE's steps name qlinear_conv2d, qlinear_add and qlinear_matmul, and no float
     conv2d, add or matmul runs;
  2. >= 99 % of the output elements agree within one quantization step of the output (the scale
     of the DequantizeLinear that produces it), none by more than two steps;
  3. top-1 agreement >= 99 %;
  4. a copy whose first bias is dequantized with another scale than x_scale * w_scale (outside
     what the fusion may take) is not fused there: two qlinear_conv2d steps, not three, and its
     outputs agree within one step with onnxruntime's run of it without graph optimisations
     (the float Q/DQ semantics).
Usage: qdq_ort.py CHUTNEY WORKDIR. Exit 0 pass, 1 fail, 77 when onnx/onnxruntime are missing.
"""
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
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
except ImportError as e:
    print(f"qdq_ort: SKIP: {e}")
    sys.exit(77)

N_IN = 256
SHAPE = (3, 16, 16)


def fail(msg):
    print(f"qdq_ort: FAIL: {msg}")
    sys.exit(1)


def f32_model(path):
    rng = np.random.default_rng(7)
    inits = []

    def w(name, *shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        s = scale if scale is not None else np.sqrt(2.0 / fan_in)
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name))
        return name

    nodes = [
        helper.make_node("Conv", ["x", w("w1", 8, 3, 3, 3), w("b1", 8, scale=0.1)], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", w("w2", 16, 8, 3, 3), w("b2", 16, scale=0.1)], ["c2"],
                         pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", w("w3", 16, 4, 3, 3), w("b3", 16, scale=0.1)], ["c3"],
                         pads=[1, 1, 1, 1], group=4),
        helper.make_node("Add", ["r2", "c3"], ["a3"]),  # a residual add: qlinear_add
        helper.make_node("GlobalAveragePool", ["a3"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", w("w4", 10, 16), w("b4", 10, scale=0.1)], ["y"], transB=1),
    ]
    graph = helper.make_graph(nodes, "qdq_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *SHAPE])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


class Reader(CalibrationDataReader):
    def __init__(self, batches):
        self.it = iter([{"x": b} for b in batches])

    def get_next(self):
        return next(self.it, None)


def output_step(model):
    """The scale of the DequantizeLinear producing the graph's output."""
    out = model.graph.output[0].name
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] == out:
            return float(inits[n.input[1]])
    fail("the QDQ model's output is not produced by a DequantizeLinear")


def run_chutney(chutney, model, x_path, work):
    """Runs `model` on x with CHUTNEY_PROFILE=1; returns (y, steps per op)."""
    env = dict(os.environ, CHUTNEY_PROFILE="1")
    r = subprocess.run([chutney, "onnx", "run", model, "--input", "x=" + x_path, "--output-dir", work,
                        "--backend", "cpu"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        fail(f"chutney onnx run {model} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    prof = r.stdout + r.stderr
    steps = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+(\w+) @cpu\s+(\d+)", prof, re.M)}
    return np.load(os.path.join(work, "y.npy")), steps, prof


def agreement(y, ref, step, what):
    diff = np.abs(y - ref) / step
    within = float(np.mean(diff <= 1.0 + 1e-3))
    top1 = float(np.mean(np.argmax(y, 1) == np.argmax(ref, 1)))
    print(f"qdq_ort: {what}: {len(y)} inputs: {within * 100:.2f} % of outputs within one step ({step:.4g}), "
          f"max {diff.max():.2f} steps; top-1 agreement {top1 * 100:.2f} %")
    if within < 0.99 or diff.max() > 2.0 + 1e-3:
        fail(f"{what}: outputs differ from onnxruntime's by more than one quantization step")
    if top1 < 0.99:
        fail(f"{what}: top-1 agreement below 99 %")


def unfusable_bias(chutney, q, x, work):
    """Part 4: the first bias's scale changed; onnxruntime without optimisations as reference."""
    model = onnx.load(q)
    name = "b1_quantized_scale"
    init = next((i for i in model.graph.initializer if i.name == name), None)
    if init is None:
        fail(f"no initializer {name} in the QDQ model (quantize_static's naming changed?)")
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * np.float32(1.5), name))
    path = os.path.join(work, "cnn_qdq_bias.onnx")
    onnx.save(model, path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    x_path = os.path.join(work, "x64.npy")
    np.save(x_path, x)
    y, steps, prof = run_chutney(chutney, path, x_path, work)
    if steps.get("qlinear_conv2d") != 2:
        fail(f"expected 2 fused convolutions (the first stays float), got {steps}\n{prof}")
    agreement(y, ref, output_step(model), "bias scale not x_scale * w_scale")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    chutney, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    f32, q = os.path.join(work, "cnn_f32.onnx"), os.path.join(work, "cnn_qdq.onnx")
    f32_model(f32)
    rng = np.random.default_rng(11)
    calib = [rng.standard_normal((4, *SHAPE)).astype(np.float32) for _ in range(8)]
    quantize_static(f32, q, Reader(calib), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    x = rng.standard_normal((N_IN, *SHAPE)).astype(np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(q, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.save(os.path.join(work, "x.npy"), x)
    y, steps, prof = run_chutney(chutney, q, os.path.join(work, "x.npy"), work)
    if steps.get("qlinear_conv2d") != 3 or steps.get("qlinear_matmul") != 1 or steps.get("qlinear_add") != 1:
        fail(f"the QDQ pattern was not fused: expected 3 qlinear_conv2d, 1 qlinear_matmul and 1 qlinear_add steps, "
             f"got {steps}\n{prof}")
    float_ops = [op for op in steps if op.startswith("conv2d") or op.startswith("matmul") or op == "add"]
    if float_ops:
        fail(f"float {float_ops} steps still run\n{prof}")
    if y.shape != ref.shape:
        fail(f"output shape {y.shape}, onnxruntime's {ref.shape}")
    agreement(y, ref, output_step(onnx.load(q)), "QDQ model")
    unfusable_bias(chutney, q, x[:64], work)
    print("qdq_ort: PASS")


if __name__ == "__main__":
    main()
