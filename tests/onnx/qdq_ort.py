#!/usr/bin/env python3
"""An onnxruntime-quantized model in chutney (tools/test.d/40-onnx.sh; docs/ONNX.md, "Quantized
models").

Builds with onnx.helper a small f32 CNN (Conv+Relu, strided Conv+Relu, grouped Conv,
GlobalAveragePool, Flatten, Gemm; random weights from a fixed seed), quantizes it with
onnxruntime's quantize_static (QDQ format, per-channel int8 weights, per-tensor uint8
activations, calibrated on 8 batches), then runs the QDQ model in chutney (`chutney onnx run`)
and in onnxruntime on the same 256 inputs and checks:
  1. chutney imported the convolutions and the Gemm as its int8 ops: CHUTNEY_PROFILE's steps
     name qlinear_conv2d and qlinear_matmul, and no float conv2d or matmul runs;
  2. >= 99 % of the output elements agree within one quantization step of the output (the scale
     of the DequantizeLinear that produces it), none by more than two steps;
  3. top-1 agreement >= 99 %.
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
        helper.make_node("GlobalAveragePool", ["c3"], ["p"]),
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
    env = dict(os.environ, CHUTNEY_PROFILE="1")
    r = subprocess.run([chutney, "onnx", "run", q, "--input", "x=" + os.path.join(work, "x.npy"),
                        "--output-dir", work, "--backend", "cpu"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        fail(f"chutney onnx run exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    prof = r.stdout + r.stderr
    for op in ("qlinear_conv2d", "qlinear_matmul"):
        if not re.search(r"\b%s\b" % op, prof):
            fail(f"no {op} step in the profile: the QDQ pattern was not fused\n{prof}")
    for op in ("conv2d", "matmul"):
        if re.search(r"(?<![\w_])%s(?![\w_])" % op, prof):
            fail(f"a float {op} step still runs\n{prof}")
    y = np.load(os.path.join(work, "y.npy"))
    if y.shape != ref.shape:
        fail(f"output shape {y.shape}, onnxruntime's {ref.shape}")
    step = output_step(onnx.load(q))
    diff = np.abs(y - ref) / step
    within = float(np.mean(diff <= 1.0 + 1e-3))
    top1 = float(np.mean(np.argmax(y, 1) == np.argmax(ref, 1)))
    print(f"qdq_ort: {N_IN} inputs: {within * 100:.2f} % of outputs within one step ({step:.4g}), "
          f"max {diff.max():.2f} steps; top-1 agreement {top1 * 100:.2f} %")
    if within < 0.99 or diff.max() > 2.0 + 1e-3:
        fail("outputs differ from onnxruntime's by more than one quantization step")
    if top1 < 0.99:
        fail("top-1 agreement below 99 %")
    print("qdq_ort: PASS")


if __name__ == "__main__":
    main()
