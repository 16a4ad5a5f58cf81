#!/usr/bin/env python3
"""chutney <-> safetensors interoperability.

Usage: safetensors_interop.py PATH/TO/safetensors_interop (the C++ helper).
1. The helper writes a checkpoint with every chutney dtype but bf16 (numpy has none; the
   PyTorch script safetensors_lowp_interop.py covers it); safetensors.numpy.load_file must
   read it with the exact values, dtypes and shapes, and the metadata must be visible.
2. This script writes a file with safetensors.numpy.save_file; the helper loads it in chutney
   and compares the values.
Exits 77 (meson: SKIP) when numpy or safetensors cannot be imported.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: safetensors interop needs numpy and safetensors for {sys.executable}: {e}")
    print("      (apt-get install python3-numpy; pip install --break-system-packages safetensors)")
    sys.exit(77)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    if len(sys.argv) != 2:
        fail("usage: safetensors_interop.py HELPER")
    helper = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        # chutney -> safetensors
        out = os.path.join(d, "chutney.safetensors")
        subprocess.run([helper, "write", out], check=True)
        got = load_file(out)
        want = {
            "f32": (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3),
            "f64": np.array([0.0, 1 / 3, 2 / 3, 1.0], dtype=np.float64),
            "i32": np.array([-1, 0, 2147483647], dtype=np.int32),
            "i64": np.array([-(1 << 62), 12345678901], dtype=np.int64),
            "u8": np.array([[0, 1], [254, 255]], dtype=np.uint8),
            "bool": np.array([True, False, True], dtype=np.bool_),
            "scalar": np.array(3.25, dtype=np.float32),
            "f16": np.array([[1.0, -0.5], [65504.0, 2.0**-24]], dtype=np.float16),
            "i8": np.array([-128, 5, 127], dtype=np.int8),
        }
        if sorted(got) != sorted(want):
            fail(f"names {sorted(got)} != {sorted(want)}")
        for name, w in want.items():
            g = got[name]
            if g.dtype != w.dtype or g.shape != w.shape or not np.array_equal(g, w):
                fail(f"{name}: got {g.dtype} {g.shape} {g!r}, want {w.dtype} {w.shape} {w!r}")
        with safe_open(out, framework="np") as f:
            meta = f.metadata()
        if meta != {"framework": "chutney", "epoch": "2"}:
            fail(f"metadata {meta}")
        print(f"chutney -> safetensors: {len(want)} tensors and metadata match")

        # safetensors -> chutney
        src = os.path.join(d, "numpy.safetensors")
        save_file(
            {
                "alpha": (np.arange(12, dtype=np.float32) * 0.25 - 1).reshape(3, 4),
                "beta": np.array([[1e-300, -2.0], [np.pi, 0.0]], dtype=np.float64),
                "gamma": np.arange(5, dtype=np.int64) * -3,
                "delta": np.array([7, -7], dtype=np.int32),
                "eps": np.array([[3], [2], [1]], dtype=np.uint8),
                "flag": np.array([True, False]),
                "half": np.array([1.5, -65504.0, 1e-7], dtype=np.float16),
                "small": np.array([[-128, -1], [0, 127]], dtype=np.int8),
            },
            src,
            metadata={"source": "numpy"},
        )
        r = subprocess.run([helper, "check", src])
        if r.returncode != 0:
            fail("chutney could not read the file written by safetensors")
        print("safetensors -> chutney: 8 tensors and metadata match")


if __name__ == "__main__":
    main()
