#!/usr/bin/env bash
# Stage: the ONNX backend test suite. ONNX's node-test generators (pip `onnx`, pinned) write the
# cases into the build folder at test time (never committed); `chutney onnx test` runs them
# against tests/onnx/expected_pass.txt (must pass) and tests/onnx/skip.txt (not run, each with a
# reason), with a floor on the number of cases found. Then the DLPack interop test (ctypes +
# NumPy >= 2.1 from the same venv), then ONNX export: a briefly trained CNN exported by
# `chutney train --export-onnx` runs in onnxruntime (pinned, ~20 MB from PyPI, same venv) with
# chutney's outputs (tests/onnx/export_ort.py, a few seconds); last, `chutney train --model-onnx`
# fine-tunes an MLP written with onnx.helper and its export runs in onnxruntime
# (tests/onnx/train_onnx.py, a few seconds); then scikit-learn models exported by skl2onnx (pinned,
# same venv) run in chutney and onnxruntime with the same labels and probabilities
# (tests/onnx/sklearn_ort.py, a few seconds); and a CNN quantized by onnxruntime's quantize_static
# (QDQ) runs in chutney as int8 ops with onnxruntime's outputs (tests/onnx/qdq_ort.py, a few
# seconds). The venv is cached in the build folder between runs.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
venv=$BUILD_DIR/onnx-venv
want="onnx==1.23.2 numpy==2.4.6 onnxruntime==1.32.0 scikit-learn==1.9.1 skl2onnx==1.20.0"
if [[ "$(cat "$venv/.wanted" 2>/dev/null)" != "$want" ]] || ! "$venv/bin/python" -c 'import onnx, numpy' 2>/dev/null; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $want
  echo "$want" >"$venv/.wanted"
fi
cases=$BUILD_DIR/onnx-cases
found=$("$venv/bin/python" tests/onnx/materialize.py "$cases" 2>/dev/null)
echo "onnx: materialised $found cases from $want"
rc=0
out=$("$BUILD_DIR/tools/chutney/chutney" onnx test "$cases/node" "$cases/light" \
  --expected tests/onnx/expected_pass.txt --skip tests/onnx/skip.txt --min-cases 1850 \
  --report "$BUILD_DIR/onnx-report.tsv" 2>&1) || rc=$?
echo "$out"
passed=$(awk -F'\t' '$2=="pass"' "$BUILD_DIR/onnx-report.tsv" | wc -l)
failed=$(awk -F'\t' '$2=="fail"' "$BUILD_DIR/onnx-report.tsv" | wc -l)
skipped=$(awk -F'\t' '$2=="skip"' "$BUILD_DIR/onnx-report.tsv" | wc -l)
(( rc == 0 )) || (( failed > 0 )) || failed=1  # a floor or list failure with no failing case
record "$passed" "$failed" "$skipped"
drc=0
"$venv/bin/python" tests/dlpack/dlpack_test.py "$BUILD_DIR/core/libchutney.so" || drc=$?
if (( drc == 0 )); then record 1 0 0; else record 0 1 0; fi
erc=0
"$venv/bin/python" tests/onnx/export_ort.py "$BUILD_DIR/tools/chutney/chutney" "$BUILD_DIR/onnx-export" \
  "$BUILD_DIR/tests/unit/onnx_export_test" || erc=$?
if (( erc == 0 )); then record 1 0 0; elif (( erc == 77 )); then record 0 0 1; erc=0; else record 0 1 0; fi
trc=0
"$venv/bin/python" tests/onnx/train_onnx.py "$BUILD_DIR/tools/chutney/chutney" "$BUILD_DIR/onnx-train" || trc=$?
if (( trc == 0 )); then record 1 0 0; elif (( trc == 77 )); then record 0 0 1; trc=0; else record 0 1 0; fi
qrc=0
"$venv/bin/python" tests/onnx/qdq_ort.py "$BUILD_DIR/tools/chutney/chutney" "$BUILD_DIR/onnx-qdq" || qrc=$?
if (( qrc == 0 )); then record 1 0 0; elif (( qrc == 77 )); then record 0 0 1; qrc=0; else record 0 1 0; fi
src=0
"$venv/bin/python" -W ignore tests/onnx/sklearn_ort.py "$BUILD_DIR/tools/chutney/chutney" "$BUILD_DIR/onnx-sklearn" || src=$?
if (( src == 0 )); then record 1 0 0; elif (( src == 77 )); then record 0 0 1; src=0; else record 0 1 0; fi
(( rc == 0 && drc == 0 && erc == 0 && trc == 0 && src == 0 && qrc == 0 ))
