#!/usr/bin/env python3
"""Step time vs memory for the CNN at batch 256: chutney's compiler-chosen recomputation
(`chutney train --memory-budget B`) against PyTorch's hand-placed `torch.utils.checkpoint`
(`bench/torch_train.py --checkpoint-segments S`) on the same model, side by side in one run.

Every configuration runs in a process of its own. Memory, two ways: the process's whole peak
resident size (os.wait4's ru_maxrss: libraries, data set, weights, optimizer state,
activations, allocator slack; PyTorch's libraries alone are several hundred MiB), and what a
training step's intermediates take: chutney's planned peak (its arena, from the compiler) and,
for PyTorch, how far the peak resident size grows during the training loop above the size
before it (torch_train.py resets the kernel's peak through /proc/self/clear_refs). The chart
plots the second. Time: the training images/s of the timed loop each side reports (test evaluation
excluded), best of --repeats runs, turned into milliseconds per step.

    source ../shared/peers/torch2-venv.sh
    python3 bench/memory_budget_curve.py --chutney build/tools/chutney/chutney \\
        --python "$TORCH_PY" --json mb.json --svg docs/memory_budget_curve.svg

Writes JSON (every run) and an SVG chart (step time against peak memory, one line per side).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

WIDTHS = "32,64,128,bn"
BATCH = 256


def run_measured(cmd, env):
    """Runs cmd; returns (exit status, stdout+stderr, peak RSS in MiB)."""
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    return p.returncode, text, ru.ru_maxrss / 1024.0


def pinned_env(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[k] = str(threads)
    return env


def best_of(a, cmd, js, read):
    """Runs cmd --repeats times; read(json) gives (images/s, extra fields). The fastest run's
    figures, with the lowest peak RSS seen."""
    best = None
    for _ in range(a.repeats):
        rc, text, rss = run_measured(cmd, pinned_env(a.threads))
        if rc != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({rc}):\n{text[-2000:]}")
        with open(js) as f:
            ips, extra = read(json.load(f))
        if best is None or ips > best["images_per_s"]:
            best = dict(extra, images_per_s=ips, peak_rss_mib=rss)
        best["peak_rss_mib"] = min(best["peak_rss_mib"], rss)
        if extra.get("step_memory_mib") is not None:
            best["step_memory_mib"] = min(best["step_memory_mib"], extra["step_memory_mib"])
    best["step_ms"] = 1000.0 * BATCH / best["images_per_s"]
    return best


def chutney_point(a, budget, tmp):
    js = os.path.join(tmp, "c.json")
    cmd = [a.chutney, "train", "--model", "cnn", "--cnn-widths", WIDTHS, "--batch-size", str(BATCH),
           "--epochs", "1", "--limit", str(a.limit), "--threads", str(a.threads), "--quiet", "--json", js]
    if budget:
        cmd += ["--memory-budget", budget]
    best = best_of(a, cmd, js, lambda r: (r["epochs"][0]["images_per_s"],
                                          {"planned_peak_mib": r["planned_peak_bytes"] / 2**20,
                                           "step_memory_mib": r["planned_peak_bytes"] / 2**20}))
    best["config"] = f"--memory-budget {budget}" if budget else "no budget"
    return best


def torch_point(a, segments, tmp):
    js = os.path.join(tmp, "t.json")
    cmd = [a.python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_train.py"), "--model", "cnn",
           "--cnn-widths", WIDTHS, "--batch-size", str(BATCH), "--limit", str(a.limit), "--threads",
           str(a.threads), "--no-eval", "--json", js, "--checkpoint-segments", str(segments)]
    best = best_of(a, cmd, js, lambda r: (r["images_per_s"], {"torch_version": r["torch_version"],
                                                               "step_memory_mib": r["train_peak_growth_mib"]}))
    best["config"] = f"checkpoint_sequential, {segments} segments" if segments else "no checkpointing"
    return best


def svg(points, path):
    """Step time (ms) against the memory of a training step's intermediates (MiB): chutney's
    planned peak, PyTorch's growth of the peak resident size over the training loop."""
    W, H, L, R, T, B = 640, 400, 70, 20, 40, 55
    xs = [p["step_memory_mib"] for s in points.values() for p in s]
    ys = [p["step_ms"] for s in points.values() for p in s]
    x0, x1 = min(xs) * 0.95, max(xs) * 1.05
    y0, y1 = 0.0, max(ys) * 1.15
    fx = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)
    fy = lambda y: H - B - (y - y0) / (y1 - y0) * (H - T - B)
    colors = {"chutney": "#c0392b", "pytorch": "#2c3e50"}
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">CNN 32,64,128+BN, batch {BATCH}: '
         f'step time vs memory</text>',
         f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
         f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
         f'<text x="{(L + W - R) / 2}" y="{H - 15}" text-anchor="middle">memory of a step&#8217;s intermediates (MiB): chutney planned peak, PyTorch peak RSS growth</text>',
         f'<text x="18" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 18 {(T + H - B) / 2})">'
         f'ms per training step</text>']
    for k in range(6):
        xv = x0 + (x1 - x0) * k / 5
        yv = y0 + (y1 - y0) * k / 5
        o.append(f'<text x="{fx(xv):.1f}" y="{H - B + 16}" text-anchor="middle">{xv:.0f}</text>')
        o.append(f'<text x="{L - 6}" y="{fy(yv) + 4:.1f}" text-anchor="end">{yv:.0f}</text>')
        o.append(f'<line x1="{L}" y1="{fy(yv):.1f}" x2="{W - R}" y2="{fy(yv):.1f}" stroke="#eee"/>')
    for i, (side, pts) in enumerate(points.items()):
        pts = sorted(pts, key=lambda p: p["step_memory_mib"])
        c = colors.get(side, "#888")
        o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' %
                 (c, " ".join(f"{fx(p['step_memory_mib']):.1f},{fy(p['step_ms']):.1f}" for p in pts)))
        for p in pts:
            o.append(f'<circle cx="{fx(p["step_memory_mib"]):.1f}" cy="{fy(p["step_ms"]):.1f}" r="4" fill="{c}">'
                     f'<title>{side}: {p["config"]}: {p["step_memory_mib"]:.0f} MiB, {p["step_ms"]:.0f} ms</title></circle>')
        o.append(f'<rect x="{W - R - 150}" y="{T + 8 + 18 * i}" width="12" height="12" fill="{c}"/>')
        o.append(f'<text x="{W - R - 132}" y="{T + 18 + 18 * i}">{side}</text>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chutney", default="build/tools/chutney/chutney", help="the chutney CLI")
    ap.add_argument("--python", default="", help="a Python with PyTorch (e.g. $TORCH_PY); empty: chutney only")
    ap.add_argument("--threads", type=int, default=2, help="threads of each side (default 2)")
    ap.add_argument("--limit", type=int, default=2560, help="training images per run (default 2560: 10 steps)")
    ap.add_argument("--repeats", type=int, default=2, help="runs per point; the best counts (default 2)")
    ap.add_argument("--budgets", default="none,128M,112M,104M,auto", help="chutney --memory-budget values")
    ap.add_argument("--segments", default="0,6,4,3,2", help="PyTorch checkpoint_sequential segment counts")
    ap.add_argument("--json", help="write every point here")
    ap.add_argument("--svg", help="write the chart here")
    a = ap.parse_args()
    points = {"chutney": []}
    with tempfile.TemporaryDirectory() as tmp:
        for b in a.budgets.split(","):
            p = chutney_point(a, "" if b == "none" else b, tmp)
            points["chutney"].append(p)
            print(f"chutney {p['config']:>22}: {p['step_ms']:7.1f} ms/step, planned peak {p['planned_peak_mib']:6.1f} MiB, "
                  f"process peak RSS {p['peak_rss_mib']:6.1f} MiB", flush=True)
        if a.python:
            points["pytorch"] = []
            for s in [int(v) for v in a.segments.split(",")]:
                p = torch_point(a, s, tmp)
                points["pytorch"].append(p)
                print(f"pytorch {p['config']:>34}: {p['step_ms']:7.1f} ms/step, training's peak RSS growth "
                      f"{p['step_memory_mib']:6.1f} MiB, process peak RSS {p['peak_rss_mib']:6.1f} MiB", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"batch_size": BATCH, "cnn_widths": WIDTHS, "threads": a.threads, "limit": a.limit,
                       "repeats": a.repeats, "points": points}, f, indent=2)
    if a.svg:
        svg(points, a.svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
