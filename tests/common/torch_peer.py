"""The PyTorch peer for the interop tests: `torch_or_rerun()` returns the torch module, after
re-running the calling script under $TORCH_PY or /tmp/torch2-venv's Python (made by
/work/shared/peers/torch2-venv.sh) when this interpreter lacks torch; it exits 77 (meson: SKIP)
when no interpreter with torch is found."""
import os
import sys


def torch_or_rerun():
    try:
        import torch
        return torch
    except ImportError:
        for py in (os.environ.get("TORCH_PY"), "/tmp/torch2-venv/bin/python"):
            if py and os.path.realpath(py) != os.path.realpath(sys.executable) and os.access(py, os.X_OK):
                os.execv(py, [py] + sys.argv)
        print("SKIP: no Python with torch (source /work/shared/peers/torch2-venv.sh to make one)")
        sys.exit(77)
