#!/bin/sh
# GPU verification of the CUDA backend: the exact commands to run on a machine with an NVIDIA
# GPU (sm_80 or newer), the driver, and the CUDA 13 toolkit with cuBLAS and cuDNN 9.
#
#   tools/gpu-verify.sh [build-dir] [out-dir]
#
# Writes logs and JSON to out-dir (default: gpu-verify-out) and prints a summary. Every step
# runs even when an earlier one fails; the exit status is the number of failed steps.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$SRC/build-gpu}
OUT=${2:-$SRC/gpu-verify-out}
mkdir -p "$OUT"
FAILED=0
step() {  # step NAME command...
  name=$1
  shift
  echo "=== $name: $*"
  if "$@" >"$OUT/$name.log" 2>&1; then
    echo "    ok ($OUT/$name.log)"
  else
    echo "    FAILED (exit $?), see $OUT/$name.log"
    tail -n 20 "$OUT/$name.log"
    FAILED=$((FAILED + 1))
  fi
}

step device nvidia-smi
export PATH=/usr/local/cuda/bin:$PATH

# 1. Build, warnings as errors, CUDA required.
if [ ! -f "$B/build.ninja" ]; then
  step setup meson setup "$B" "$SRC" -Dwerror=true -Dcuda=enabled -Dbuildtype=debugoptimized
fi
step build ninja -C "$B"

# 2. The plugin is available here (not "unavailable: ...") and agrees with the CPU backend.
step cuda-tests meson test -C "$B" --no-rebuild --suite cuda --print-errorlogs
grep -h "\[ cuda     \]" "$B/meson-logs/testlog.txt" | head -3

# 3. The whole conformance suite (forward + finite-difference gradients) on cuda, with CUDA
#    graphs (default) and without (kernel by kernel), and with TF32 off (the default).
step conformance-cuda env CHUTNEY_LOG=warn "$B/tests/conformance/conformance" \
  --gtest_filter='*cuda*:ConformanceSetup.*'
step conformance-cuda-nographs env CHUTNEY_CUDA_GRAPHS=0 CHUTNEY_LOG=warn \
  "$B/tests/conformance/conformance" --gtest_filter='*cuda*'
grep -E "UNAVAILABLE|SKIPPED|cuda:" "$OUT/conformance-cuda.log" | head -20

# 4. Training on Fashion-MNIST (Debian package dataset-fashion-mnist, or --data-dir), CPU then
#    CUDA with the same seed: the accuracies must agree to ~0.5 points.
DATA=${CHUTNEY_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
for model in mlp cnn; do
  step "train-$model-cpu" "$B/tools/chutney/chutney" train --model $model --epochs 3 \
    --batch-size 128 --backend cpu --data-dir "$DATA" --json "$OUT/train-$model-cpu.json" --quiet
  step "train-$model-cuda" "$B/tools/chutney/chutney" train --model $model --epochs 3 \
    --batch-size 128 --backend cuda,cpu --data-dir "$DATA" --json "$OUT/train-$model-cuda.json" --quiet
  grep -h "final test accuracy" "$OUT/train-$model-cpu.log" "$OUT/train-$model-cuda.log"
done

# 5. GEMM through the plugin vs direct cuBLAS (f32 and TF32), and host time per node of a
#    replayed CUDA graph (1000 nodes).
step gemm-bench sh -c "'$B/backends/cuda/cuda_gemm_bench' '$B/backends/cuda/ctn-cuda.so' 50 > '$OUT/cuda_gemm_bench.json'"
cat "$OUT/cuda_gemm_bench.json"

# 6. Per-node dispatch of compiled plans on cuda vs PyTorch (installed on the GPU machine).
if [ -x "$B/bench/dispatch_bench" ]; then
  step dispatch-bench env CHUTNEY_BACKEND=cuda,cpu "$B/bench/dispatch_bench"
fi

# 7. No hard dependency on NVIDIA libraries; what the fatbinary holds.
step deps sh -c "readelf -d '$B/backends/cuda/ctn-cuda.so' | grep NEEDED"
step fatbin sh -c "cuobjdump --list-elf --list-ptx '$B/backends/cuda/ctn-cuda.so' | sed 's/.*\.\(sm_[0-9]*\|compute_[0-9]*\)\..*/\1/' | sort | uniq -c"

echo "=== $FAILED step(s) failed; logs in $OUT"
exit $FAILED
