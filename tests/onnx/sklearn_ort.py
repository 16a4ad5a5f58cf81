#!/usr/bin/env python3
"""scikit-learn models exported by skl2onnx, as a user exports them (tools/test.d/40-onnx.sh;
docs/ONNX.md, "ai.onnx.ml").

Trains, on synthetic data with a fixed seed, a LogisticRegression, a RandomForest and a
GradientBoosting classifier (3 classes, and a binary GradientBoosting), a RandomForest and a
GradientBoosting regressor, and a Pipeline(StandardScaler, MLPClassifier); converts each with
skl2onnx's defaults (classifiers end in ZipMap) and runs it with `chutney onnx run` and with
onnxruntime on the same 200 rows:
  - labels equal onnxruntime's exactly; probabilities (ZipMap's maps, in label order) and
    regressor outputs within rtol 1e-5 / atol 1e-5;
  - the same classifier exported with options={'zipmap': False} gives the same tensor;
  - a classifier with string labels is refused with a message naming the string labels.
Usage: sklearn_ort.py CHUTNEY WORKDIR. Exit 0 pass, 1 fail, 77 when scikit-learn, skl2onnx or
onnxruntime is missing.
"""
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import onnxruntime as ort
    from skl2onnx import to_onnx
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,
                                  RandomForestClassifier, RandomForestRegressor)
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
except ImportError as e:
    print(f"sklearn_ort: SKIP: {e}")
    sys.exit(77)

FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print(f"sklearn_ort: FAIL: {msg}")


def chutney_run(chutney, work, name, model, x):
    path = os.path.join(work, name + ".onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    xp = os.path.join(work, name + "_x.npy")
    np.save(xp, x)
    out = os.path.join(work, name)
    r = subprocess.run([chutney, "onnx", "run", path, "--input", model.graph.input[0].name + "=" + xp,
                        "--output-dir", out], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return {o.name: np.load(os.path.join(out, o.name + ".npy")) for o in model.graph.output}, ""


def ort_run(model, x):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, {s.get_inputs()[0].name: x})))


def close(a, b):
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-5)


def check_classifier(chutney, work, name, model, x, labels):
    ours, err = chutney_run(chutney, work, name, model, x)
    if ours is None:
        return check(False, f"{name}: chutney refused it: {err}")
    ref = ort_run(model, x)
    lab, prob = model.graph.output[0].name, model.graph.output[1].name  # zipmap=False: label, probabilities
    ref_prob = ref[prob]
    if isinstance(ref_prob, list):  # ZipMap: one {label: p} per row, columns in label order
        ref_prob = np.array([[row[k] for k in labels] for row in ref_prob], dtype=np.float32)
    check(np.array_equal(ours[lab], ref[lab]),
          f"{name}: labels differ from onnxruntime's in {int(np.sum(ours[lab] != ref[lab]))} of {len(x)} rows")
    check(close(ours[prob], ref_prob), f"{name}: probabilities differ from onnxruntime's by up to "
          f"{float(np.max(np.abs(ours[prob] - ref_prob))) if ours[prob].shape == ref_prob.shape else 'shape'}")
    print(f"sklearn_ort: {name}: {len(x)} rows, labels and probabilities match onnxruntime")
    return ours[prob]


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    chutney, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    x, y = make_classification(n_samples=400, n_features=8, n_informative=5, n_classes=3, random_state=0)
    xb, yb = make_classification(n_samples=400, n_features=6, n_informative=4, n_classes=2, random_state=1)
    xr, yr = make_regression(n_samples=400, n_features=8, random_state=0)
    x, xb, xr = x.astype(np.float32), xb.astype(np.float32), xr.astype(np.float32)
    test, testb, testr = x[200:], xb[200:], xr[200:]
    classifiers = {
        "logistic_regression": (LogisticRegression(max_iter=500), x, y, test),
        "random_forest_classifier": (RandomForestClassifier(n_estimators=12, max_depth=6, random_state=0), x, y, test),
        "gradient_boosting_classifier": (GradientBoostingClassifier(n_estimators=12, max_depth=3, random_state=0), x, y, test),
        "gradient_boosting_binary": (GradientBoostingClassifier(n_estimators=12, max_depth=3, random_state=0), xb, yb, testb),
        "pipeline_scaler_mlp": (Pipeline([("scale", StandardScaler()),
                                          ("mlp", MLPClassifier(hidden_layer_sizes=(16,), max_iter=400, random_state=0))]),
                                x, y, test),
    }
    for name, (est, xt, yt, xs) in classifiers.items():
        est.fit(xt[:200], yt[:200])
        labels = [int(v) for v in est.classes_]
        prob = check_classifier(chutney, work, name, to_onnx(est, xt[:1]), xs, labels)
        if name == "random_forest_classifier" and prob is not None:
            plain = to_onnx(est, xt[:1], options={id(est): {"zipmap": False}})
            again = check_classifier(chutney, work, name + "_nozipmap", plain, xs, labels)
            check(again is not None and np.array_equal(prob, again),
                  "zipmap=False gives another tensor than ZipMap's")
    for name, est in {"random_forest_regressor": RandomForestRegressor(n_estimators=12, max_depth=6, random_state=0),
                      "gradient_boosting_regressor": GradientBoostingRegressor(n_estimators=12, max_depth=3,
                                                                               random_state=0)}.items():
        est.fit(xr[:200], yr[:200])
        model = to_onnx(est, xr[:1])
        ours, err = chutney_run(chutney, work, name, model, testr)
        if ours is None:
            check(False, f"{name}: chutney refused it: {err}")
            continue
        ref = ort_run(model, testr)
        out = model.graph.output[0].name
        check(close(ours[out], ref[out]), f"{name}: outputs differ from onnxruntime's by up to "
              f"{float(np.max(np.abs(ours[out] - ref[out]))) if ours[out].shape == ref[out].shape else 'shape'}")
        print(f"sklearn_ort: {name}: {len(testr)} rows match onnxruntime")
    # String class labels: the label output would be a string tensor, which chutney has not.
    names = np.array(["cat", "dog", "owl"])[y[:200]]
    est = LogisticRegression(max_iter=500).fit(x[:200], names)
    ours, err = chutney_run(chutney, work, "string_labels", to_onnx(est, x[:1]), test)
    check(ours is None and "string class labels" in err, f"string labels: expected a refusal naming them, got {err!r}")
    if FAILURES:
        print(f"sklearn_ort: {len(FAILURES)} failure(s)")
        return 1
    print("sklearn_ort: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
