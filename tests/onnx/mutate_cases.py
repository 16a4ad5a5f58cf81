#!/usr/bin/env python3
"""Structured fuzzing of the importer: copies the materialised backend cases with random hostile
attribute values (negative, zero, 2^31, 2^62, NaN, 1e30) and int64 initializers, for
`chutney onnx test OUT --timeout 20 --report r.tsv`; any 'crashed', 'timed out' or 'ended without'
line in the report is a bug (a refusal is the right answer). Not run by CI (needs the cases and a
few minutes); see docs/ONNX.md. Usage: mutate_cases.py SEED CASES_DIR OUT_DIR"""
import os
import random
import shutil
import sys

import onnx

INTS = [-(1 << 40), -3, -2, -1, 0, 1, 2, 3, 7, 1 << 31, 1 << 62]
FLOATS = [-1e30, -1.0, 0.0, float("nan"), 1e30]


def mutate(m):
    changed = False
    for n in m.graph.node:
        for a in n.attribute:
            if random.random() < 0.5:
                continue
            if a.type == onnx.AttributeProto.INT:
                a.i, changed = random.choice(INTS), True
            elif a.type == onnx.AttributeProto.INTS:
                for k in range(len(a.ints)):
                    if random.random() < 0.5:
                        a.ints[k], changed = random.choice(INTS), True
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f, changed = random.choice(FLOATS), True
    for t in m.graph.initializer:
        if t.data_type == onnx.TensorProto.INT64 and len(t.int64_data) and random.random() < 0.5:
            t.int64_data[0], changed = random.choice(INTS), True
    return changed


def main():
    random.seed(int(sys.argv[1]))
    src, dst = sys.argv[2], sys.argv[3]
    shutil.rmtree(dst, ignore_errors=True)
    for case in sorted(os.listdir(src)):
        model = onnx.load(os.path.join(src, case, "model.onnx"))
        if not mutate(model):
            continue
        os.makedirs(os.path.join(dst, case))
        onnx.save(model, os.path.join(dst, case, "model.onnx"))
        shutil.copytree(os.path.join(src, case, "test_data_set_0"), os.path.join(dst, case, "test_data_set_0"))


if __name__ == "__main__":
    main()
