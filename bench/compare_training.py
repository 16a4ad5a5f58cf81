#!/usr/bin/env python3
"""Training throughput and memory, chutney vs PyTorch, side by side in the same run.

For each model (mlp, cnn) and each thread count T (default 1 and 2) it runs, as separate child
processes, interleaved so that machine noise falls on both sides alike:

  chutney   <chutney> train --model M --epochs E --limit N --batch-size B --threads T --quiet
            --json FILE [--cnn-widths C1,C2,FC]
  pytorch   /usr/bin/python3 bench/torch_train.py (the same job in PyTorch: same data, same
            normalisation, same batch size, number of images, optimizer, lr schedule, per-step
            loss read and untimed test evaluation after each epoch; see that file's docstring)

Images/s is the last epoch's training-loop rate on both sides (with --epochs 1, the whole epoch,
first step included, on both sides: warm-up is equal; --epochs 2 excludes it on both). Each
child's peak RSS comes from os.wait4() on that child alone (ru_maxrss), so nothing of this
script or of another run is counted. The chutney planner's planned peak vs naive bytes come from
its JSON (planned_peak_bytes, naive_bytes) and its "training plan memory:" stdout line.

PyTorch's thread pools are pinned for every child: OMP_NUM_THREADS, MKL_NUM_THREADS and
OPENBLAS_NUM_THREADS = T in the child's environment before torch is imported, then
torch.set_num_threads(T) and torch.set_num_interop_threads(1). The same env vars are set for the
chutney child (its CPU backend keeps OpenBLAS single-threaded and splits GEMMs over its own pool). Each side's best
configuration (the T with the highest best-of-repeats images/s) is compared; same-T ratios are
reported too.

PyTorch side data: the IDX .gz files are read with gzip + numpy into uint8 tensors up front
(no torch DataLoader); batches are gathered and normalised inline, and the time that takes is
reported (torch data_seconds) to show the data path is not the bottleneck.

--precision bf16 runs both sides in mixed precision: `chutney train --precision bf16` and
bench/torch_train.py's forward pass and loss under torch.autocast("cpu", dtype=torch.bfloat16).

Usage (system interpreter; this script itself imports neither torch nor numpy):
    /usr/bin/python3 bench/compare_training.py --chutney build/tools/chutney/chutney \\
        --model both --limit 6400 --repeats 2 --json training.json
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_SCRIPT = os.path.join(HERE, "torch_train.py")
DEFAULT_BATCH = {"mlp": 128, "cnn": 64}
TARGETS = {  # measured, not asserted (issue 3)
    "mlp": {"images_per_s_ratio_min": 1.15, "peak_rss_ratio_max": 0.5},
    "cnn": {"images_per_s_ratio_min": 1.5},
}


def spawn(cmd, env, cwd=None):
    """Runs cmd; returns rc, stdout, stderr, wall seconds and the child's own peak RSS (KiB)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return {
            "rc": p.returncode,
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
            "wall_s": wall,
            "peak_rss_kib": usage.ru_maxrss,  # KiB on Linux
            "cpu_s": usage.ru_utime + usage.ru_stime,
        }


def child_env(threads):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    env.pop("CHUTNEY_NUM_THREADS", None)  # --threads decides
    return env


PLAN_RE = re.compile(r"training plan memory: planned peak (.+?) vs naive (.+?) \(([\d.]+)% of naive; "
                     r"(\d+) vs (\d+) bytes\), persistent (.+)")
TRAIN_RE = re.compile(r"training: (\d+) images in ([\d.]+) s, ([\d.]+) images/s")


def fail(what, r, cmd):
    sys.stderr.write(f"{what} failed (exit {r['rc']}): {' '.join(cmd)}\n{r['stdout'][-2000:]}\n"
                     f"{r['stderr'][-2000:]}\n")
    raise SystemExit(1)


def run_side(side, cmd, a, model, threads, jpath):
    """Runs one side's training command (`cmd` plus the options both sides share), reads the JSON
    it writes to `jpath`. Returns (process result, JSON, the fields both sides report)."""
    if model == "cnn":
        cmd = cmd + ["--cnn-widths", a.cnn_widths]
    if a.data_dir:
        cmd = cmd + ["--data-dir", a.data_dir]
    r = spawn(cmd, child_env(threads))
    if r["rc"] != 0:
        fail(side, r, cmd)
    with open(jpath) as f:
        j = json.load(f)
    last = j["epochs"][-1]
    common = {
        "side": side, "threads": threads, "images_per_s": last["images_per_s"],
        "train_images": j["train_images"], "train_seconds": last["train_seconds"],
        "train_loss": last["train_loss"], "test_accuracy": last["test_accuracy"],
        "peak_rss_kib": r["peak_rss_kib"], "wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
        "command": cmd,
    }
    return r, j, common


def run_chutney(a, model, threads, limit, batch, tmp):
    jpath = os.path.join(tmp, f"chutney-{model}-{threads}.json")
    cmd = [a.chutney, "train", "--model", model, "--epochs", str(a.epochs), "--limit", str(limit),
           "--batch-size", str(batch), "--threads", str(threads), "--quiet", "--json", jpath,
           "--precision", a.precision]
    r, j, run = run_side("chutney", cmd, a, model, threads, jpath)
    run.update({
        "loader_wait_seconds": j["epochs"][-1].get("loader_wait_seconds"),
        "planned_peak_bytes": j.get("planned_peak_bytes"), "naive_bytes": j.get("naive_bytes"),
        "placement": j.get("placement"), "optimizer": j.get("optimizer"),
        "batch_size": j.get("batch_size"),
    })
    m = PLAN_RE.search(r["stdout"])
    if m:
        run["plan_line"] = m.group(0)
        run["persistent"] = m.group(6)
        # The JSON and the printed line must agree; say so if they do not.
        if j.get("planned_peak_bytes") not in (None, int(m.group(4))):
            run["warning"] = "planned_peak_bytes differs between JSON and stdout"
    m = TRAIN_RE.search(r["stdout"])
    if m:
        run["stdout_images_per_s"] = float(m.group(3))
    header = r["stdout"].splitlines()[:2]
    run["header"] = header
    return run


def run_torch(a, model, threads, limit, batch, tmp):
    jpath = os.path.join(tmp, f"torch-{model}-{threads}.json")
    cmd = [a.python, TORCH_SCRIPT, "--model", model, "--epochs", str(a.epochs), "--limit",
           str(limit), "--batch-size", str(batch), "--threads", str(threads), "--json", jpath,
           "--precision", a.precision]
    _, j, run = run_side("pytorch", cmd, a, model, threads, jpath)
    run.update({
        "data_seconds": j["epochs"][-1]["data_seconds"],
        "torch_threads": j["threads"], "torch_interop_threads": j["interop_threads"],
        "torch_version": j["torch_version"], "optimizer": j["optimizer"],
        "batch_size": j["batch_size"], "model_repr": j["model_repr"],
    })
    return run


def summarise(runs, side, threads_list):
    configs = {}
    for t in threads_list:
        rs = [r for r in runs if r["side"] == side and r["threads"] == t]
        ips = [r["images_per_s"] for r in rs]
        configs[str(t)] = {
            "threads": t,
            "images_per_s_all": ips,
            "images_per_s_best": max(ips),
            "images_per_s_median": statistics.median(ips),
            "peak_rss_kib_max": max(r["peak_rss_kib"] for r in rs),
        }
    best = max(configs.values(), key=lambda c: c["images_per_s_best"])
    return configs, best


def baseline_rss(a):
    """Peak RSS of processes that do no work, to read the job figures against."""
    out = {}
    r = spawn(["/bin/true"], child_env(1))
    out["spawn_floor_kib"] = r["peak_rss_kib"]
    r = spawn([a.python, "-c", "import torch, numpy"], child_env(1))
    out["python_import_torch_kib"] = r["peak_rss_kib"] if r["rc"] == 0 else None
    r = spawn([a.chutney, "version"], child_env(1))
    out["chutney_version_kib"] = r["peak_rss_kib"] if r["rc"] == 0 else None
    return out


def fmt_kib(k):
    return f"{k / 1024:.1f} MiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chutney", default="build/tools/chutney/chutney", help="the chutney CLI")
    ap.add_argument("--model", choices=["mlp", "cnn", "both"], default="both")
    ap.add_argument("--limit", type=int, default=6400, help="training images per epoch (mlp)")
    ap.add_argument("--cnn-limit", type=int, default=0, help="training images per epoch for the cnn "
                    "(default: --limit)")
    ap.add_argument("--epochs", type=int, default=1,
                    help="epochs per job; the last one is timed (2 excludes warm-up on both sides)")
    ap.add_argument("--repeats", type=int, default=1, help="jobs per side and thread count")
    ap.add_argument("--threads", default="1,2", help="thread counts to try on both sides")
    ap.add_argument("--cnn-widths", default="32,64,128", help="C1,C2,FC[,bn][,valid], honoured by both sides")
    ap.add_argument("--data-dir", default="", help="Fashion-MNIST directory (default: each side's)")
    ap.add_argument("--python", default="/usr/bin/python3", help="interpreter that has torch")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="bf16: chutney train --precision bf16 and PyTorch under "
                         "torch.autocast('cpu', dtype=torch.bfloat16), both sides")
    ap.add_argument("--json", help="write the full result here")
    a = ap.parse_args()

    if not os.access(a.chutney, os.X_OK):
        raise SystemExit(f"--chutney {a.chutney}: not an executable (build it: ninja -C build)")
    threads_list = [int(t) for t in a.threads.split(",")]
    models = ["mlp", "cnn"] if a.model == "both" else [a.model]
    a.chutney = os.path.abspath(a.chutney)

    vr = subprocess.run([a.chutney, "version"], capture_output=True, text=True)
    chutney_version = " / ".join(l.strip() for l in vr.stdout.strip().splitlines())
    tr = subprocess.run([a.python, "-c", "import torch, numpy; print(torch.__version__, numpy.__version__)"],
                        capture_output=True, text=True, env=child_env(1))
    if tr.returncode != 0:
        raise SystemExit(f"{a.python} cannot import torch:\n{tr.stderr}")
    torch_version, numpy_version = tr.stdout.split()

    result = {
        "benchmark": "training throughput and peak RSS, chutney vs PyTorch (bench/compare_training.py)",
        "command": [sys.executable] + sys.argv,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "loadavg_start": os.getloadavg()},
        "versions": {"chutney": chutney_version, "torch": torch_version, "numpy": numpy_version,
                     "python_torch_side": a.python},
        "settings": {"epochs": a.epochs, "repeats": a.repeats, "threads": threads_list,
                     "cnn_widths": a.cnn_widths, "timed": "last epoch's training loop, both sides",
                     "torch_data": "uint8 tensors loaded up front (gzip+numpy), per-batch gather + "
                                   "normalise inline, no DataLoader",
                     "thread_pinning": "OMP/MKL/OPENBLAS_NUM_THREADS=T in child env; "
                                       "torch.set_num_threads(T), set_num_interop_threads(1)"},
        "baselines": baseline_rss(a),
        "models": {},
    }
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="ctn-train-bench-") as tmp:
        for model in models:
            limit = a.cnn_limit if (model == "cnn" and a.cnn_limit) else a.limit
            batch = DEFAULT_BATCH[model]
            runs = []
            for rep in range(a.repeats):
                for t in threads_list:
                    # Alternate which side goes first so slow drifts of the machine even out.
                    order = [run_chutney, run_torch] if (rep + t) % 2 == 0 else [run_torch, run_chutney]
                    for fn in order:
                        r = fn(a, model, t, limit, batch, tmp)
                        r["repeat"] = rep
                        runs.append(r)
                        print(f"  {model} {r['side']:8s} T={t} rep {rep}: {r['images_per_s']:8.1f} images/s, "
                              f"peak RSS {fmt_kib(r['peak_rss_kib'])}, loss {r['train_loss']:.4f}",
                              file=sys.stderr, flush=True)
            cfg_c, best_c = summarise(runs, "chutney", threads_list)
            cfg_t, best_t = summarise(runs, "pytorch", threads_list)
            entry = {
                "batch_size": batch, "train_images": runs[0]["train_images"], "limit": limit,
                "runs": runs,
                "configs": {"chutney": cfg_c, "pytorch": cfg_t},
                "best": {"chutney": best_c, "pytorch": best_t},
                "images_per_s_ratio": best_c["images_per_s_best"] / best_t["images_per_s_best"],
                "images_per_s_ratio_same_threads": {
                    str(t): cfg_c[str(t)]["images_per_s_best"] / cfg_t[str(t)]["images_per_s_best"]
                    for t in threads_list},
                "peak_rss_ratio": best_c["peak_rss_kib_max"] / best_t["peak_rss_kib_max"],
                "peak_rss_ratio_same_threads": {
                    str(t): cfg_c[str(t)]["peak_rss_kib_max"] / cfg_t[str(t)]["peak_rss_kib_max"]
                    for t in threads_list},
                "targets": TARGETS[model],
            }
            c0 = next(r for r in runs if r["side"] == "chutney")
            if c0.get("planned_peak_bytes") is not None:
                entry["planner"] = {
                    "planned_peak_bytes": c0["planned_peak_bytes"],
                    "naive_bytes": c0["naive_bytes"],
                    "planned_over_naive": c0["planned_peak_bytes"] / c0["naive_bytes"] if c0["naive_bytes"] else None,
                    "persistent": c0.get("persistent"),
                    "line": c0.get("plan_line"),
                }
            tg = TARGETS[model]
            entry["meets"] = {"images_per_s_ratio": entry["images_per_s_ratio"] >= tg["images_per_s_ratio_min"]}
            if "peak_rss_ratio_max" in tg:
                entry["meets"]["peak_rss_ratio"] = entry["peak_rss_ratio"] <= tg["peak_rss_ratio_max"]
            result["models"][model] = entry
    result["machine"]["loadavg_end"] = os.getloadavg()
    result["elapsed_s"] = time.time() - started

    # ---- table ----
    print(f"chutney: {chutney_version}; torch {torch_version} ({a.python}); "
          f"epochs {a.epochs}, repeats {a.repeats}, threads {a.threads}; "
          f"load avg {result['machine']['loadavg_start'][0]:.2f} -> {result['machine']['loadavg_end'][0]:.2f}")
    print(f"{'model':5s} {'side':8s} {'T':>2s} {'images/s best':>14s} {'median':>9s} {'peak RSS':>11s}")
    for model, e in result["models"].items():
        for side in ("chutney", "pytorch"):
            for t in threads_list:
                c = e["configs"][side][str(t)]
                mark = "*" if c is e["best"][side] else " "
                print(f"{model:5s} {side:8s} {t:2d} {c['images_per_s_best']:14.1f} "
                      f"{c['images_per_s_median']:9.1f} {fmt_kib(c['peak_rss_kib_max']):>11s} {mark}")
        tg = e["targets"]
        line = (f"{model}: {e['train_images']} images, batch {e['batch_size']}; best vs best: "
                f"images/s x{e['images_per_s_ratio']:.2f} (target >= {tg['images_per_s_ratio_min']})")
        line += f", peak RSS x{e['peak_rss_ratio']:.2f}"
        if "peak_rss_ratio_max" in tg:
            line += f" (target <= {tg['peak_rss_ratio_max']})"
        print(line)
        same = ", ".join(f"T={t}: x{v:.2f}" for t, v in e["images_per_s_ratio_same_threads"].items())
        print(f"{model}: same-thread images/s ratios {same}")
        if "planner" in e:
            p = e["planner"]
            print(f"{model}: chutney planner: planned peak {p['planned_peak_bytes']} B vs naive "
                  f"{p['naive_bytes']} B ({100 * p['planned_over_naive']:.1f}% of naive), persistent {p['persistent']}")
    b = result["baselines"]
    print(f"baseline peak RSS: spawn floor {fmt_kib(b['spawn_floor_kib'])}, "
          f"`python -c 'import torch, numpy'` {fmt_kib(b['python_import_torch_kib'] or 0)}, "
          f"`chutney version` {fmt_kib(b['chutney_version_kib'] or 0)}")
    print("(* = the side's best configuration, used for best-vs-best; ratios are chutney / PyTorch)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
