#!/usr/bin/env python3
"""PyTorch twin of `chutney train` for the training benchmark (bench/compare_training.py).

One process = one training job, so that its peak RSS can be measured from outside. It mirrors
`chutney train --model mlp|cnn` (tools/chutney/models.cpp, cmd_train.cpp):

  data      Fashion-MNIST IDX .gz files read with gzip + numpy into uint8 torch tensors up front
            (the whole set is in memory before timing starts, as chutney's dataset is); each
            batch is gathered from a per-epoch random permutation (drop-last, like chutney's
            shuffling loader) and normalised ((x/255 - 0.2860) / 0.3530, chutney's constants)
            inline. That per-batch gather + normalise is timed separately (data_seconds) to show
            it is not the bottleneck. No torch DataLoader is used.
  model     mlp: 784-512-256-10 with ReLU; cnn: conv5x5(1->C1, pad 2) relu maxpool2,
            conv5x5(C1->C2, pad 2) relu maxpool2, flatten, fc(C2*49->FC) relu, fc(FC->10).
  loss      mean cross entropy.
  optimizer mlp: SGD lr 0.05 momentum 0.9; cnn: Adam lr 1e-3 (chutney's defaults), cosine
            learning-rate schedule over the run set every step (as chutney does).
  per step  zero_grad, forward, loss, backward, step, loss.item() (chutney reads the loss of
            every step too and checks it is finite).
  timing    the batch loop of each epoch (perf_counter); the test-set evaluation after each
            epoch runs but is not timed (as in chutney).

Thread pools are pinned: OMP/MKL/OpenBLAS env vars must be set by the caller before this
process starts (compare_training.py does); this script sets them again before importing torch
and calls torch.set_num_threads(T) and torch.set_num_interop_threads(1).

Run with the system interpreter (Debian's python3-torch):
    /usr/bin/python3 bench/torch_train.py --model mlp --threads 1 --limit 6400 --json out.json
"""
import argparse
import gzip
import json
import math
import os
import sys
import time

PIXEL_MEAN = 0.2860  # tools/chutney/models.h kPixelMean
PIXEL_STD = 0.3530   # kPixelStd
DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """An IDX file (gzip) as a numpy array of its declared shape (uint8 data only)."""
    import numpy as np

    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise SystemExit(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != math.prod(dims):
        raise SystemExit(f"{path}: {data.size} bytes of data, header says {dims}")
    return data.reshape(dims)


def load_split(torch, data_dir, prefix):
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    # torch.from_numpy on a read-only buffer warns; copy once into torch-owned memory.
    return torch.tensor(images), torch.tensor(labels).long()


# ---- models ------------------------------------------------------------------------------------
# One list of layer specs per model, mirroring the ctn_layer arrays of tools/chutney/models.cpp.
# To follow a change of the chutney model (e.g. batch norm after each conv), edit the list here:
# ("bn2d",) and ("bn1d",) are already understood by build_layers.

def mlp_spec():
    return [("linear", 512), ("relu",), ("linear", 256), ("relu",), ("linear", 10)]


def cnn_spec(c1, c2, fc, bn=False, valid=False):
    """Mirrors tools/chutney/models.cpp: ",bn" puts a batch norm after each conv (the conv then
    has no bias), ",valid" drops the padding (28-24-12-8-4 instead of 28-14-7)."""
    pad = 0 if valid else 2
    spec = []
    for ch in (c1, c2):
        spec.append(("conv", ch, 5, 1, pad, not bn))
        if bn:
            spec.append(("bn2d",))
        spec += [("relu",), ("maxpool", 2)]
    return spec + [("flatten",), ("linear", fc), ("relu",), ("linear", 10)]


def build_layers(torch, spec, in_shape):
    """nn.Sequential from a spec; input sizes follow the running shape like ctn_nn_sequential."""
    nn = torch.nn
    shape = list(in_shape)  # without the batch dimension
    layers = []
    for item in spec:
        kind = item[0]
        if kind == "linear":
            layers.append(nn.Linear(shape[-1], item[1]))
            shape = [item[1]]
        elif kind == "conv":
            out, k, stride, pad = item[1:5]
            bias = item[5] if len(item) > 5 else True
            layers.append(nn.Conv2d(shape[0], out, k, stride=stride, padding=pad, bias=bias))
            shape = [out, (shape[1] + 2 * pad - k) // stride + 1, (shape[2] + 2 * pad - k) // stride + 1]
        elif kind == "maxpool":
            layers.append(nn.MaxPool2d(item[1]))
            shape = [shape[0], shape[1] // item[1], shape[2] // item[1]]
        elif kind == "avgpool":
            layers.append(nn.AvgPool2d(item[1]))
            shape = [shape[0], shape[1] // item[1], shape[2] // item[1]]
        elif kind == "flatten":
            layers.append(nn.Flatten())
            shape = [math.prod(shape)]
        elif kind == "relu":
            layers.append(nn.ReLU())
        elif kind == "bn2d":
            layers.append(nn.BatchNorm2d(shape[0]))
        elif kind == "bn1d":
            layers.append(nn.BatchNorm1d(shape[0]))
        else:
            raise SystemExit(f"unknown layer kind {kind!r}")
    return nn.Sequential(*layers)


def build_model(torch, name, widths):
    if name == "mlp":
        return build_layers(torch, mlp_spec(), [784]), True
    if name == "cnn":
        return build_layers(torch, cnn_spec(*widths[:3], bn="bn" in widths[3:], valid="valid" in widths[3:]),
                            [1, 28, 28]), False
    raise SystemExit(f"unknown model {name!r}")


def cosine_lr(base, step, total):
    """ctn_nn_lr_at with CTN_LR_COSINE, no warm-up, min_lr 0 (core/nn/optim.cpp)."""
    t = min(step - 1, total)
    return base * 0.5 * (1.0 + math.cos(math.pi * t / total))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["mlp", "cnn"], required=True)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (interop is 1)")
    ap.add_argument("--limit", type=int, default=0, help="training images per epoch (0: all)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=0, help="default: mlp 128, cnn 64")
    ap.add_argument("--cnn-widths", default="32,64,128", help="C1,C2,FC")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    ap.add_argument("--no-eval", action="store_true", help="skip the (untimed) test evaluation")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--checkpoint-segments", type=int, default=0,
                    help="train through torch.utils.checkpoint.checkpoint_sequential with this many "
                         "segments (activations inside a segment are recomputed in backward; 0: off)")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16) "
                         "(training and evaluation), as chutney train --precision bf16")
    a = ap.parse_args()

    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import torch  # after the environment is pinned
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)

    try:
        parts = a.cnn_widths.split(",")
        flags = [p for p in parts[3:]]
        widths = [int(v) for v in parts[:3]] + flags
        assert len(parts) >= 3 and min(widths[:3]) > 0 and all(f in ("bn", "valid") for f in flags)
    except (ValueError, AssertionError):
        raise SystemExit(f"--cnn-widths expects C1,C2,FC[,bn][,valid], got {a.cnn_widths!r}")
    batch = a.batch_size or (128 if a.model == "mlp" else 64)
    from torch.utils.checkpoint import checkpoint_sequential

    train_x, train_y = load_split(torch, a.data_dir, "train")
    test_x, test_y = load_split(torch, a.data_dir, "t10k")
    model, flat = build_model(torch, a.model, widths)
    item_shape = [784] if flat else [1, 28, 28]
    train_x = train_x.reshape([train_x.shape[0]] + item_shape)
    test_x = test_x.reshape([test_x.shape[0]] + item_shape)

    if a.model == "mlp":
        base_lr = 0.05
        opt = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=0.9)
    else:
        base_lr = 1e-3
        opt = torch.optim.Adam(model.parameters(), lr=base_lr)

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16")

    n_train = train_x.shape[0]
    full = n_train // batch
    batches = min(full, a.limit // batch) if a.limit else full
    if batches == 0:
        raise SystemExit("--limit is smaller than one batch")
    total_steps = a.epochs * batches

    def normalise(u8):
        return u8.float().div_(255.0).sub_(PIXEL_MEAN).div_(PIXEL_STD)

    def rss_kib(field):
        """VmRSS / VmHWM of this process in KiB (Linux), or None."""
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    # The memory training itself adds: the peak resident size during the batch loops minus the
    # size before them (data, model and libraries loaded). Writing 5 to clear_refs resets the
    # peak (VmHWM) to the current size (Linux >= 4.0).
    rss_before = rss_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        rss_before = None

    epochs = []
    step = 0
    for epoch in range(1, a.epochs + 1):
        gen = torch.Generator().manual_seed(a.seed * 1000003 + epoch)
        perm = torch.randperm(n_train, generator=gen)
        model.train()
        loss_sum = 0.0
        data_s = 0.0
        t0 = time.perf_counter()
        for b in range(batches):
            d0 = time.perf_counter()
            idx = perm[b * batch:(b + 1) * batch]
            x = normalise(train_x.index_select(0, idx))
            y = train_y.index_select(0, idx)
            data_s += time.perf_counter() - d0
            step += 1
            lr = cosine_lr(base_lr, step, total_steps)
            for g in opt.param_groups:
                g["lr"] = lr
            opt.zero_grad(set_to_none=True)
            with autocast():
                if a.checkpoint_segments:
                    out = checkpoint_sequential(model, a.checkpoint_segments, x, use_reentrant=False)
                else:
                    out = model(x)
                loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            value = loss.item()
            if not math.isfinite(value):
                raise SystemExit(f"training diverged at epoch {epoch}, batch {b + 1}")
            loss_sum += value
        t1 = time.perf_counter()
        acc = None
        if not a.no_eval:
            model.eval()
            correct = 0
            with torch.no_grad(), autocast():
                for i in range(0, test_x.shape[0], batch):
                    logits = model(normalise(test_x[i:i + batch]))
                    correct += int((logits.argmax(1) == test_y[i:i + batch]).sum())
            acc = correct / test_x.shape[0]
        t2 = time.perf_counter()
        e = {
            "epoch": epoch,
            "train_loss": loss_sum / batches,
            "test_accuracy": acc,
            "train_seconds": t1 - t0,
            "eval_seconds": t2 - t1,
            "data_seconds": data_s,
            "images_per_s": batches * batch / (t1 - t0),
        }
        epochs.append(e)
        print(f"epoch {epoch}/{a.epochs}: train loss {e['train_loss']:.4f}, test accuracy "
              f"{acc if acc is not None else float('nan'):.4f}, {e['images_per_s']:.0f} images/s, "
              f"train {e['train_seconds']:.2f} s (data {data_s:.3f} s)", flush=True)

    result = {
        "side": "pytorch",
        "torch_version": torch.__version__,
        "python": sys.version.split()[0],
        "model": a.model,
        "model_repr": str(model).replace("\n", " "),
        "cnn_widths": widths if a.model == "cnn" else None,
        "batch_size": batch,
        "optimizer": type(opt).__name__,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "train_images": batches * batch,
        "checkpoint_segments": a.checkpoint_segments,
        "precision": a.precision,
        "train_peak_growth_mib": (rss_kib("VmHWM") - rss_before) / 1024.0 if rss_before is not None else None,
        "epochs": epochs,
        "images_per_s": epochs[-1]["images_per_s"],
        "parallel_info": torch.__config__.parallel_info(),
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
