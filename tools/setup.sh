#!/usr/bin/env bash
# The one script behind the README's two commands, for a fresh Debian 12 machine:
#
#   bash tools/setup.sh train   install what is missing, build, train the main job's CNN on
#                               Fashion-MNIST
#   bash tools/setup.sh test    install what is missing, build, run every test stage of
#                               tools/test.d (native suites, cross builds under qemu, ...)
#
# .ci/run is `bash tools/setup.sh test`, so CI and a developer run exactly the same thing.
# Run `bash tools/setup.sh --help` for the environment variables.
set -Eeuo pipefail

usage() {
  cat <<'EOF'
usage: bash tools/setup.sh <command>

commands:
  train    install missing Debian packages, configure + build, then train the main job's CNN on
           Fashion-MNIST with the chutney CLI and print its result
  test     install missing Debian packages, configure + build, then run every test stage
           of tools/test.d in order (native meson suites, cross builds under qemu, ...),
           ending with one line "tests: N passed, N failed, N skipped"
  deps     only install missing Debian packages
  build    install missing packages, configure + build
  -h, --help
           this text

environment:
  BUILD_DIR         build folder, relative to the repo root (default: build)
  SKIP_STAGES=a,b   `test` skips these stages of tools/test.d (names without the NN- prefix,
                    e.g. SKIP_STAGES=aarch64)
  SKIP_CROSS=1      `test` skips every cross stage (same as naming them in SKIP_STAGES)
  STAGE_TIMEOUT=S   seconds one test stage may run before it is stopped (default 1800)
  SKIP_DEPS=1       do not check or install Debian packages
  NINJA_JOBS=N      ninja -j N (default: ninja's choice)
  MESON_ARGS="..."  extra arguments for `meson setup` (e.g. -Dcuda=disabled)
  CROSS_BUILD_DIR   the cross build folder of a cross stage (default: build-<target>)

Needs root (or sudo) only when a package is missing. Works from any directory.
EOF
}

# Every Debian package the project needs: the union of tools/deps/*.txt (one package a line,
# `#` comments), so that each area lists its own. Benchmarks install their own peer libraries
# (e.g. PyTorch from PyPI) into a venv; those are not listed there.
read_packages() {
  local f
  for f in "$repo_root"/tools/deps/*.txt; do
    sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^[[:space:]]*$/d' "$f"
  done | awk '!seen[$0]++'
}

# The main job of `train`: a small CNN (two 3x3 convs with batch norm and pooling, then fc 256),
# Adam 2e-3 + cosine over 7 epochs or 115 s of training, whichever ends first (the schedule
# follows the clock on a slower machine): >= 92.5 % test accuracy over seeds 1-3 on the
# project's 2-core machines (docs/BENCHMARKS.md, issue 16). The CLI's flags may change: this is
# the only place that names them.
TRAIN_ARGS=(train --model cnn --cnn-widths 32,64,256,bn,k3 --lr 0.002 --epochs 7 --time-budget 115
            --eval-batch-size 1000)

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
mapfile -t PACKAGES < <(read_packages)
BUILD_DIR=${BUILD_DIR:-build}

stage_name=""
stage_start=0
banner() {
  stage_name=$1
  stage_start=$SECONDS
  printf '\n==== [setup.sh] %s ====\n' "$stage_name"
}
stage_done() {
  printf '==== [setup.sh] %s: ok (%ds) ====\n' "$stage_name" $((SECONDS - stage_start))
}
on_error() {
  local rc=$?
  printf '\n==== [setup.sh] FAILED during: %s (exit %d) ====\n' "${stage_name:-startup}" "$rc" >&2
  exit "$rc"
}
trap on_error ERR

install_deps() {
  banner "dependencies"
  if [[ "${SKIP_DEPS:-0}" == 1 ]]; then
    echo "SKIP_DEPS=1: not checking Debian packages"
    stage_done
    return
  fi
  local missing=() p status
  for p in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [[ "$status" == installed ]] || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    echo "all ${#PACKAGES[@]} packages already installed"
    stage_done
    return
  fi
  echo "missing: ${missing[*]}"
  local sudo=()
  if [[ $(id -u) != 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "not root and no sudo: install these packages first: ${missing[*]}" >&2
      return 1
    fi
  fi
  # A package named foo:ARCH comes from another architecture's archive (multiarch; none is listed today:
  # the cross builds' target libraries come from tools/cross/sysroot.sh instead).
  local arch
  for arch in $(printf '%s\n' "${missing[@]}" | sed -n 's/.*:\([a-z0-9]*\)$/\1/p' | sort -u); do
    dpkg --print-foreign-architectures | grep -qx "$arch" || "${sudo[@]}" dpkg --add-architecture "$arch"
  done
  # apt-get update only when something is missing keeps reruns fast and offline-friendly. One
  # index that fails (a mirror mid-sync) makes it exit non-zero although the others arrived:
  # warn and go on; the install below fails clearly if a package really cannot be had.
  if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update; then
    echo "warning: apt-get update reported errors (above); installing from the lists that arrived" >&2
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    -o DPkg::Lock::Timeout=600 "${missing[@]}"
  stage_done
}

configure_and_build() {
  banner "configure ($BUILD_DIR)"
  # A CUDA toolkit in the default place is offered to Meson (the backend is optional: without
  # it, or without a GPU at run time, the CUDA backend reports itself unavailable).
  if [[ -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null 2>&1; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  if command -v nvcc >/dev/null 2>&1; then
    echo "CUDA toolkit: $(command -v nvcc)"
  else
    echo "CUDA toolkit: not found (CUDA backend will not be built)"
  fi
  local args=(-Dwerror=true --buildtype=debugoptimized)
  # shellcheck disable=SC2206  # MESON_ARGS is deliberately word-split
  local extra=(${MESON_ARGS:-})
  if [[ -f "$BUILD_DIR/meson-private/coredata.dat" ]]; then
    if ! meson setup --reconfigure "$BUILD_DIR" "${args[@]}" "${extra[@]}"; then
      echo "reconfigure failed; wiping $BUILD_DIR and configuring afresh" >&2
      meson setup --wipe "$BUILD_DIR" "${args[@]}" "${extra[@]}"
    fi
  else
    meson setup "$BUILD_DIR" "${args[@]}" "${extra[@]}"
  fi
  stage_done

  banner "build ($BUILD_DIR)"
  ninja -C "$BUILD_DIR" ${NINJA_JOBS:+-j "$NINJA_JOBS"}
  stage_done
}

# The safetensors interop test needs the Python `safetensors` package (PyPI only; Debian has
# none). Best effort: without it that one test reports SKIP, never a false pass.
install_python_peers() {
  if /usr/bin/python3 -c 'import safetensors, numpy' >/dev/null 2>&1; then return 0; fi
  echo "installing the Python package safetensors (for the checkpoint interop test)"
  /usr/bin/python3 -m pip install -q --break-system-packages safetensors ||
    echo "warning: could not install safetensors; the interop test will be skipped" >&2
}

# Runs every stage of tools/test.d (NN-name.sh, in order), even after one fails, so that one CI
# run reports all of them; then prints the one closing tally CI reads.
run_tests() {
  install_python_peers
  local results
  results=$(mktemp -d)
  local skip=",${SKIP_STAGES:-},"
  local failed=() stage name rc t0
  local -a summary=()
  for stage in tools/test.d/[0-9][0-9]-*.sh; do
    name=$(basename "$stage" .sh)
    name=${name#[0-9][0-9]-}
    if [[ "$skip" == *",$name,"* ]] || { [[ "${SKIP_CROSS:-0}" == 1 ]] && grep -q '^# Stage (cross)' "$stage"; }; then
      banner "test stage $name (skipped)"
      summary+=("$(printf '%-14s skipped' "$name")")
      continue
    fi
    banner "test stage $name ($stage)"
    : >"$results/$name"
    rc=0
    t0=$SECONDS
    # Hermetic: no CHUTNEY_* / CTN_* variable of the caller's reaches a stage (a plugin path or a
    # thread count of the user's would change what the tests see), and each stage gets a HOME
    # and TMPDIR of its own, removed afterwards; what a stage leaves in its TMPDIR is reported.
    local scratch="$results/.scratch-$name" var
    local -a hermetic=(env)
    for var in $(compgen -e | grep -E '^(CHUTNEY|CTN)_' || true); do hermetic+=(-u "$var"); done
    mkdir -p "$scratch/home" "$scratch/tmp"
    # A toolchain installed under the real HOME (rustup's proxies: ~/.rustup) stays reachable.
    if [[ -z "${RUSTUP_HOME:-}" && -d "${HOME:-/nonexistent}/.rustup" ]]; then hermetic+=(RUSTUP_HOME="$HOME/.rustup"); fi
    "${hermetic[@]}" HOME="$scratch/home" TMPDIR="$scratch/tmp" XDG_CACHE_HOME="$scratch/home/.cache" \
      BUILD_DIR=$BUILD_DIR STAGE_RESULT=$results/$name \
      timeout --foreground -k 30 "${STAGE_TIMEOUT:-1800}" bash "$stage" || rc=$?
    local left
    left=$(find "$scratch/tmp" -mindepth 1 -maxdepth 1 2>/dev/null | head -n 5)
    if [[ -n "$left" ]]; then
      echo "warning: stage $name left files in its TMPDIR (a test does not clean up):" >&2
      echo "$left" | sed 's/^/  /' >&2
    fi
    rm -rf "$scratch"
    local o=0 f=0 s=0
    [[ -s "$results/$name" ]] && read -r o f s <"$results/$name"
    if ((rc != 0)); then
      ((rc == 124)) && echo "stage $name ran past STAGE_TIMEOUT=${STAGE_TIMEOUT:-1800}s" >&2
      echo "stage $name failed (exit $rc)" >&2
      failed+=("$name")
      ((f == 0)) && f=1
    else
      ((o + f + s == 0)) && o=1
      stage_done
    fi
    echo "$o $f $s" >"$results/$name"
    summary+=("$(printf '%-14s ok=%d fail=%d skip=%d (%ds)' "$name" "$o" "$f" "$s" $((SECONDS - t0)))")
  done
  local n=0 nf=0 ns=0 o f s
  for stage in "$results"/*; do
    [[ -s "$stage" ]] || continue
    read -r o f s <"$stage"
    n=$((n + o)) nf=$((nf + f)) ns=$((ns + s))
  done
  rm -rf "$results"
  banner "summary"
  # Worded unlike the closing line below so that only one line looks like a test tally.
  printf '  %s\n' "${summary[@]}"
  if ((n + nf == 0)); then
    echo "warning: no test ran" >&2
  fi
  # The plain closing line CI reads; counts are tests as each stage counts them (meson: one per
  # test executable).
  echo "tests: $n passed, $nf failed, $ns skipped"
  if ((${#failed[@]})); then
    stage_name="tests (${failed[*]})"
    return 1
  fi
  printf '==== [setup.sh] all tests passed ====\n'
}

run_train() {
  local cli="$BUILD_DIR/tools/chutney/chutney"
  banner "train: $cli ${TRAIN_ARGS[*]}"
  local log="$BUILD_DIR/train.log"
  "$cli" "${TRAIN_ARGS[@]}" 2>&1 | tee "$log"
  stage_done
  banner "result"
  # The CLI prints its own summary last; repeat it so it is the last thing on screen.
  tail -n 5 "$log"
  echo "(full output: $log)"
}

cmd=${1:-}
case "$cmd" in
  -h | --help | help)
    usage
    exit 0
    ;;
  train)
    install_deps
    configure_and_build
    run_train
    ;;
  test)
    install_deps
    configure_and_build
    run_tests
    ;;
  deps)
    install_deps
    ;;
  build)
    install_deps
    configure_and_build
    ;;
  "")
    usage >&2
    exit 2
    ;;
  *)
    echo "setup.sh: unknown command '$cmd'" >&2
    usage >&2
    exit 2
    ;;
esac
