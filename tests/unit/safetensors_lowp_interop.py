#!/usr/bin/env python3
"""chutney <-> PyTorch through safetensors files, for the ABI 1.5 dtypes F16, BF16 and I8.

Usage: safetensors_lowp_interop.py PATH/TO/safetensors_interop (the C++ helper).
PyTorch makes the values (its own f32 -> f16/bf16 rounding) and this script lays them out in
the safetensors format (8-byte length, JSON header, little-endian data), as the `safetensors`
package would; then:
1. `helper dump` loads the file in chutney and prints every value decoded from its bits; each
   must equal PyTorch's value (dtype names and shapes too), NaN for NaN.
2. `helper resave` loads it and saves it again with chutney; the new file's header must name
   the same safetensors dtypes and shapes and its data must be PyTorch's bytes exactly.
Runs under the interpreter given, or re-runs itself under $TORCH_PY or /tmp/torch2-venv's
Python (source /work/shared/peers/torch2-venv.sh) when that one lacks torch; exits 77 (meson:
SKIP) when no interpreter with torch is found.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_peer import torch_or_rerun  # noqa: E402

torch = torch_or_rerun()

ST_NAME = {torch.float16: "F16", torch.bfloat16: "BF16", torch.int8: "I8", torch.float32: "F32"}
CTN_NAME = {torch.float16: "f16", torch.bfloat16: "bf16", torch.int8: "i8", torch.float32: "f32"}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def tensors():
    inf, nan = float("inf"), float("nan")
    vals = [1.0, -2.0, 0.1, 1 / 3, 65504.0, 65520.0, 6e-8, 1e-40, -0.0, inf, -inf, nan, 3.0e38, 1.00390625]
    return {
        # f16: rounding, the largest finite, overflow to inf (65520), subnormals, underflow to 0
        "half": torch.tensor(vals, dtype=torch.float32).to(torch.float16),
        # bf16 from the same f32 values, as a 2-d tensor; 1.00390625 is a tie (rounds to even)
        "bfloat": torch.tensor(vals, dtype=torch.float32).to(torch.bfloat16).reshape(2, 7),
        "int8": torch.tensor([[-128, -1, 0], [1, 64, 127]], dtype=torch.int8),
        "scalar_bf16": torch.tensor(-3.5, dtype=torch.bfloat16),
        "empty_half": torch.zeros(0, 3, dtype=torch.float16),
        "f32": torch.linspace(-1, 1, 5, dtype=torch.float32),
    }


def raw_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def write_safetensors(path, ts):
    header, data = {}, b""
    for name, t in ts.items():
        b = raw_bytes(t)
        header[name] = {"dtype": ST_NAME[t.dtype], "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def main():
    if len(sys.argv) != 2:
        fail("usage: safetensors_lowp_interop.py HELPER")
    helper = sys.argv[1]
    ts = tensors()
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "torch.safetensors"), os.path.join(d, "chutney.safetensors")
        write_safetensors(src, ts)

        r = subprocess.run([helper, "dump", src], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"chutney could not read PyTorch's file: {r.stderr}")
        lines = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines()}
        if sorted(lines) != sorted(ts):
            fail(f"names {sorted(lines)} != {sorted(ts)}")
        for name, t in ts.items():
            dt, shape, *vals = lines[name]
            if dt != CTN_NAME[t.dtype] or shape != "[" + ",".join(map(str, t.shape)) + "]":
                fail(f"{name}: chutney says {dt} {shape}, PyTorch {t.dtype} {list(t.shape)}")
            want = t.float().reshape(-1).tolist()
            got = [float(v) for v in vals]
            if len(got) != len(want) or not all(same(g, w) for g, w in zip(got, want)):
                fail(f"{name}: chutney read {got}, PyTorch wrote {want}")
        print(f"PyTorch -> chutney: {len(ts)} tensors (f16, bf16, i8, f32) with PyTorch's values")

        r = subprocess.run([helper, "resave", src, out], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"chutney could not save the tensors again: {r.stderr}")
        back = read_safetensors(out)
        for name, t in ts.items():
            dt, shape, b = back[name]
            if dt != ST_NAME[t.dtype] or shape != list(t.shape):
                fail(f"{name}: chutney wrote {dt} {shape}, want {ST_NAME[t.dtype]} {list(t.shape)}")
            if b != raw_bytes(t):
                fail(f"{name}: chutney's bytes differ from PyTorch's")
        print(f"chutney -> PyTorch: {len(ts)} tensors bit for bit")


if __name__ == "__main__":
    main()
