#!/usr/bin/env python3
"""Writes ONNX's backend node-test cases to disk, in the layout of ONNX's own test data:
  OUT/node/<case>/model.onnx, OUT/node/<case>/test_data_set_N/{input,output}_K.pb
and the light CNN models of onnx/backend/test/data/light as
  OUT/light/<case>/... (input: ONNX's runner's dummy input arange(n)/n; output: the reference
  output shipped with the package).

ONNX 1.23 no longer ships the node-test files; the generators (onnx.backend.test.case.node) are
what remains, so the cases are produced here from the installed `onnx` package, at test time,
and never committed. Usage: materialize.py OUT   (prints the number of cases written)."""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.case import node as node_cases

LIGHT = ["resnet50", "densenet121", "inception_v2", "shufflenet", "squeezenet", "vgg19",
         "bvlc_alexnet", "inception_v1", "zfnet512"]


def write_tensor(path, value, name):
    if isinstance(value, onnx.TensorProto):
        data = value.SerializeToString()
    elif isinstance(value, np.ndarray) or np.isscalar(value):
        data = numpy_helper.from_array(np.asarray(value), name).SerializeToString()
    else:
        return False  # sequences, maps, optionals: chutney takes tensors only
    with open(path, "wb") as f:
        f.write(data)
    return True


def write_case(out, model, data_sets):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for i, (inputs, outputs) in enumerate(data_sets):
        d = os.path.join(out, f"test_data_set_{i}")
        os.makedirs(d, exist_ok=True)
        ins = [v for v in model.graph.input]
        for k, value in enumerate(inputs):
            write_tensor(os.path.join(d, f"input_{k}.pb"), value, ins[k].name if k < len(ins) else f"input_{k}")
        for k, value in enumerate(outputs):
            write_tensor(os.path.join(d, f"output_{k}.pb"), value, model.graph.output[k].name)


def main():
    out = sys.argv[1]
    if os.path.exists(out):
        shutil.rmtree(out)
    n = 0
    for case in node_cases.collect_testcases():
        write_case(os.path.join(out, "node", case.name), case.model, case.data_sets)
        n += 1
    light_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    for name in LIGHT:
        path = os.path.join(light_dir, f"light_{name}.onnx")
        ref = os.path.join(light_dir, f"light_{name}_output_0.pb")
        if not (os.path.exists(path) and os.path.exists(ref)):
            continue
        model = onnx.load(path)
        inits = {t.name for t in model.graph.initializer}
        inputs = []
        for x in model.graph.input:
            if x.name in inits:
                continue
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
            count = int(np.prod(shape))
            inputs.append((np.arange(count).reshape(shape) / count).astype(np.float32))
        expected = onnx.TensorProto()
        with open(ref, "rb") as f:
            expected.ParseFromString(f.read())
        write_case(os.path.join(out, "light", f"test_{name}"), model, [(inputs, [expected])])
        n += 1
    print(n)


if __name__ == "__main__":
    main()
