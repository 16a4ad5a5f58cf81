#!/usr/bin/env python3
"""Generates the PyTorch-exported ONNX models of tests/onnx/models once; the small files it
writes are committed, so CI runs chutney against them without PyTorch.

Two phases, each in the Python that has the package it needs:
  export:    PyTorch 2.15 (the peer venv: `source shared/peers/torch2-venv.sh`; `onnx` and
             `onnxscript` importable, e.g. PYTHONPATH=DIR after `pip install --target DIR
             onnx onnxscript`) exports each model with torch.onnx.export (its default,
             dynamo-based exporter), and writes NAME.onnx, NAME.in.npz (inputs by ONNX name),
             NAME.torch.npy (PyTorch's output) and, for the gradient models, NAME.w.npy (the
             fixed weights W of the loss sum(output * W)) and NAME.grad.npz (PyTorch's gradient
             of that loss for every initializer, by ONNX initializer name).
             The models of TORCHSCRIPT go through the legacy TorchScript exporter
             (dynamo=False, dynamic batch and sequence axes), as older export scripts do.
  reference: onnxruntime (PyPI) runs each NAME.onnx on NAME.in.npz -> NAME.ort.npy.
Usage: make_models.py export|reference [OUT_DIR [NAME...]]   (OUT_DIR defaults to tests/onnx/models;
NAMEs limit the run to those models, so that adding one leaves the others' files as they are)."""
import os
import sys

import numpy as np

OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
GRAD_MODELS = {"mlp", "cnn_bn"}
KEEP_BN = {"cnn_bn", "residual"}
TORCHSCRIPT = {"llama_ts"}
ONLY = set(sys.argv[3:])


def llama_like(torch, nn):
    """A 2-layer Llama-shaped decoder: RMSNorm, rotary embeddings computed from positions (Cos,
    Sin), grouped-query causal attention, SwiGLU MLP, tied nothing; random weights."""
    import math

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w = nn.Parameter(1 + 0.1 * torch.randn(d))

        def forward(self, x):
            return self.w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def rotate_half(x):
        a, b = x.chunk(2, dim=-1)
        return torch.cat((-b, a), dim=-1)

    class Block(nn.Module):
        def __init__(self, d, heads, kv_heads, ff):
            super().__init__()
            self.h, self.kvh, self.hd = heads, kv_heads, d // heads
            self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
            self.q, self.o = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
            self.k, self.v = nn.Linear(d, kv_heads * self.hd, bias=False), nn.Linear(d, kv_heads * self.hd, bias=False)
            self.gate, self.up, self.down = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False), nn.Linear(ff, d, bias=False)

        def forward(self, x, cos, sin):
            b, t, d = x.shape
            h = self.n1(x)
            q = self.q(h).view(b, t, self.h, self.hd).transpose(1, 2)
            k = self.k(h).view(b, t, self.kvh, self.hd).transpose(1, 2)
            v = self.v(h).view(b, t, self.kvh, self.hd).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            k, v = k.repeat_interleave(self.h // self.kvh, dim=1), v.repeat_interleave(self.h // self.kvh, dim=1)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
            att = att.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf")).softmax(-1)
            x = x + self.o((att @ v).transpose(1, 2).reshape(b, t, d))
            h = self.n2(x)
            return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))

    class Llama(nn.Module):
        def __init__(self, vocab=128, d=32, heads=4, kv_heads=2, ff=88, layers=2):
            super().__init__()
            self.emb, self.norm, self.head = nn.Embedding(vocab, d), RMSNorm(d), nn.Linear(d, vocab, bias=False)
            self.blocks = nn.ModuleList([Block(d, heads, kv_heads, ff) for _ in range(layers)])
            self.hd = d // heads

        def forward(self, ids):
            inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
            f = torch.outer(torch.arange(ids.shape[1], dtype=torch.float32), inv)
            e = torch.cat((f, f), dim=-1)
            cos, sin = e.cos()[None, None], e.sin()[None, None]
            x = self.emb(ids)
            for blk in self.blocks:
                x = blk(x, cos, sin)
            return self.head(self.norm(x))

    return Llama()


def build_models():
    import torch
    from torch import nn

    torch.manual_seed(0)

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            return torch.relu(x + self.b2(self.c2(y)))

    class Lstm(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.fc = nn.LSTM(8, 16, batch_first=True), nn.Linear(16, 4)

        def forward(self, x):
            y, _ = self.lstm(x)
            return self.fc(y[:, -1])

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn, self.norm = nn.MultiheadAttention(16, 4, batch_first=True), nn.LayerNorm(16)

        def forward(self, x):
            y, _ = self.attn(x, x, x, need_weights=False)
            return self.norm(x + y)

    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.fc = nn.Embedding(50, 8), nn.Linear(8, 3)

        def forward(self, ids):
            return self.fc(self.emb(ids).mean(dim=1))

    def rand(*s):
        return torch.randn(*s)

    models = {
        "mlp": (nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10)), (rand(4, 16),)),
        "cnn_bn": (nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(8, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                 nn.Flatten(), nn.Linear(16, 10)), (rand(2, 3, 16, 16),)),
        "residual": (nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), Residual(8), Residual(8)), (rand(2, 3, 12, 12),)),
        "depthwise_dilated": (nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Conv2d(8, 16, 1), nn.ReLU(),
                                            nn.Conv2d(16, 16, 3, padding=2, dilation=2), nn.ReLU()), (rand(2, 8, 14, 14),)),
        "conv_transpose": (nn.Sequential(nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
                                         nn.ConvTranspose2d(4, 2, 4, stride=2, padding=1)), (rand(2, 8, 7, 7),)),
        "lstm": (Lstm(), (rand(2, 5, 8),)),
        "attention": (Attention(), (rand(2, 6, 16),)),
        "layernorm_gelu": (nn.Sequential(nn.Linear(12, 24), nn.LayerNorm(24), nn.GELU(), nn.Linear(24, 6)), (rand(3, 5, 12),)),
        "embedding": (Embed(), (torch.randint(0, 50, (2, 7)),)),
        "llama_ts": (llama_like(torch, nn), (torch.randint(0, 128, (2, 9)),)),
    }
    for m, _ in models.values():
        for mod in m.modules():  # non-trivial running statistics, so that inference BN matters
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
        m.eval()
    return models


def export():
    import onnx
    import torch

    os.makedirs(OUT, exist_ok=True)
    for name, (model, args) in build_models().items():
        if ONLY and name not in ONLY:
            continue
        path = os.path.join(OUT, name + ".onnx")
        if name in TORCHSCRIPT:
            torch.onnx.export(model, args, path, dynamo=False, opset_version=17, input_names=["input_ids"],
                              output_names=["logits"], dynamic_axes={"input_ids": {0: "batch", 1: "seq"}})
        else:
            # optimize=False keeps BatchNormalization nodes (the optimiser folds them into the convs),
            # so that the batch-norm models test batch norm and their gradients reach gamma and beta.
            torch.onnx.export(model, args, path, external_data=False, optimize=name not in KEEP_BN)
        proto = onnx.load(path)
        inputs = [i.name for i in proto.graph.input if i.name not in {t.name for t in proto.graph.initializer}]
        np.savez(os.path.join(OUT, name + ".in.npz"), **{n: a.numpy() for n, a in zip(inputs, args)})
        with torch.no_grad():
            np.save(os.path.join(OUT, name + ".torch.npy"), model(*args).numpy())
        if name in GRAD_MODELS:
            params = dict(model.named_parameters())
            y = model(*args)
            w = torch.randn(y.shape)
            (y * w).sum().backward()
            grads = {}
            for t in proto.graph.initializer:
                if t.name in params:
                    grads[t.name] = params[t.name].grad.numpy()
            missing = set(params) - set(grads)
            assert not missing, f"{name}: parameters without an initializer of the same name: {missing}"
            np.save(os.path.join(OUT, name + ".w.npy"), w.numpy())
            np.savez(os.path.join(OUT, name + ".grad.npz"), **grads)
        print(name, "exported:", sorted({n.op_type for n in proto.graph.node}))


def reference():
    import onnxruntime as ort

    for f in sorted(os.listdir(OUT)):
        if not f.endswith(".onnx"):
            continue
        name = f[:-5]
        if (ONLY and name not in ONLY) or not os.path.exists(os.path.join(OUT, name + ".in.npz")):
            continue
        sess = ort.InferenceSession(os.path.join(OUT, f), providers=["CPUExecutionProvider"])
        feeds = dict(np.load(os.path.join(OUT, name + ".in.npz")))
        out = sess.run(None, feeds)[0]
        np.save(os.path.join(OUT, name + ".ort.npy"), out)
        torch_out = np.load(os.path.join(OUT, name + ".torch.npy"))
        print(name, "onnxruntime vs PyTorch max abs diff", float(np.abs(out - torch_out).max()))


if __name__ == "__main__":
    {"export": export, "reference": reference}[sys.argv[1]]()
