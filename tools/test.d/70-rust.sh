#!/usr/bin/env bash
# Stage: the Rust binding (bindings/rust) against the native build, offline: Cargo.lock lists
# only the workspace's crates; cargo build --locked; cargo test (unit, integration, doctests
# including the compile_fail proofs of the thread and lifetime rules, the layout probe against
# abi/, the leak and thread tests, an op library written in Rust loaded and trained through, ops
# written in Rust registered in process with Context::add_ops);
# the README example; a crate outside the repository set up as docs/RUST.md says (path
# dependency, env.sh; then a .cargo/config.toml instead of env.sh's RUSTFLAGS), whose binary
# must start without LD_LIBRARY_PATH; the MLP example against `chutney train`
# bit for bit (when Fashion-MNIST is installed); clippy -D warnings and cargo doc -D warnings.
# Uses whichever cargo is first on PATH (Debian's 1.63 on a fresh machine).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install cargo rustc rust-clippy (tools/deps/rust.txt)" >&2
  exit 1
fi
# shellcheck source=../../bindings/rust/env.sh
source bindings/rust/env.sh "$BUILD_DIR"
# Build products and logs stay in the build folder (unless CARGO_TARGET_DIR says otherwise);
# cargo needs a home folder even offline.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$CHUTNEY_BUILD_DIR/rust-target}
mkdir -p "$CARGO_TARGET_DIR"
if [[ -z "${CARGO_HOME:-}" && -z "${HOME:-}" ]]; then
  export CARGO_HOME=$CARGO_TARGET_DIR/cargo-home
fi
cd bindings/rust
log=$CARGO_TARGET_DIR/rust-test.log
rc=0
cargo --version
rustc --version

# pass NAME CMD...: runs CMD, records one test.
pass() {
  local name=$1 t0=$SECONDS
  shift
  echo "== $name"
  if "$@"; then record 1 0 0; else record 0 1 0; rc=1; echo "FAIL: $name" >&2; fi
  echo "   ($((SECONDS - t0)) s)"
}

# Only the workspace's own crates: no registry, no git sources.
lock_is_local() {
  local names
  names=$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.lock | sort | tr '\n' ' ')
  [[ $names == "chutney chutney-rust-op chutney-sys " ]] && ! grep -q '^source = ' Cargo.lock ||
    { echo "Cargo.lock lists: $names" >&2; return 1; }
}
pass "Cargo.lock lists only the workspace crates" lock_is_local
pass "cargo build --offline --locked --all-targets" cargo build --offline --locked --all-targets

# Counts the tests of a `cargo test` log ("test NAME ... ok|FAILED|ignored").
count() {
  local ok fail
  ok=$(grep -cE '^test .* \.\.\. ok$' "$1" || true)
  fail=$(grep -cE '^test .* \.\.\. FAILED$' "$1" || true)
  # A test binary that does not build or crashes has no "FAILED" line of its own.
  [[ $2 != 0 && $fail == 0 ]] && fail=1
  record "$ok" "$fail" 0
}

echo "== cargo test --offline --locked"
t0=$SECONDS
st=0
cargo test --offline --locked --no-fail-fast >"$log" 2>&1 || st=$?
grep -E '^(test result|error|failures:|---- )|FAILED|panicked|RSS ' "$log" || true
count "$log" "$st"
[[ $st == 0 ]] || { echo "cargo test failed; full log: $log" >&2; rc=1; }
echo "   ($((SECONDS - t0)) s)"

# The ignored test compares with the CLI on Fashion-MNIST: run it when both are there.
ignored=$(grep -cE '^test .* \.\.\. ignored$' "$log" || true)
if [[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz &&
      -x $CHUTNEY_BUILD_DIR/tools/chutney/chutney ]]; then
  echo "== cargo test --test mlp_cli -- --ignored (Rust MLP vs chutney train, bit for bit)"
  st=0
  cargo test --offline --locked -p chutney --test mlp_cli -- --ignored >"$log.mlp" 2>&1 || st=$?
  grep -E '^(test |test result)|panicked|CLI:|Rust:' "$log.mlp" || true
  count "$log.mlp" "$st"
  [[ $st == 0 ]] || { echo "full log: $log.mlp" >&2; rc=1; }
else
  echo "SKIP: $ignored ignored test(s): Fashion-MNIST (dataset-fashion-mnist) or the CLI is missing"
  record 0 0 "$ignored"
fi

readme_example() {
  local out
  out=$(cargo run --offline --locked -q --example readme) || return 1
  echo "$out"
  grep -q '^loss 12.5 -> ' <<<"$out"
}
pass "cargo run --example readme" readme_example

# consumer_crate DIR: writes an application crate into DIR, outside the repository: a path
# dependency on bindings/rust/chutney, std only, a plan run and its result checked.
consumer_crate() {
  mkdir -p "$1/src"
  cat >"$1/Cargo.toml" <<EOF
[package]
name = "chutney-consumer"
version = "0.1.0"
edition = "2021"

[dependencies]
chutney = { path = "$PWD/chutney" }
EOF
  cat >"$1/src/main.rs" <<'EOF'
fn main() -> chutney::Result<()> {
    let ctx = chutney::Context::new()?;
    let g = ctx.graph()?;
    let x = g.input("x", chutney::Dtype::F32, &[3])?;
    let mut plan = g.compile(&[g.relu(x - 1.0)?])?;
    let xv = chutney::Tensor::new(&[0.5f32, 2.0, 3.5], &[3])?;
    println!("relu(x - 1) = {:?}", plan.run_outputs(&[(x.id(), &xv)])?[0].to_vec::<f32>()?);
    Ok(())
}
EOF
}

# consumer_runs DIR: builds the crate offline (its own binary afresh) and runs the binary
# without LD_LIBRARY_PATH.
consumer_runs() {
  local out
  (cd "$1" && cargo clean -q -p chutney-consumer && cargo build --offline -q) || return 1
  out=$(env -u LD_LIBRARY_PATH "$CARGO_TARGET_DIR/debug/chutney-consumer") || return 1
  echo "$out"
  [[ $out == "relu(x - 1) = [0.0, 1.0, 2.5]" ]]
}

# The same crate with env.sh's RUSTFLAGS unset and the rpath in its .cargo/config.toml (what
# docs/RUST.md gives for a chutney installed outside the loader's path).
consumer_config_runs() {
  mkdir -p "$1/.cargo"
  printf '[build]\nrustflags = ["-C", "link-arg=-Wl,-rpath,%s"]\n' "$CHUTNEY_LIB_DIR" >"$1/.cargo/config.toml"
  (unset RUSTFLAGS && consumer_runs "$1")
}

consumer=$(mktemp -d "${TMPDIR:-/tmp}/chutney-consumer.XXXXXX")
consumer_crate "$consumer"
pass "a crate outside the repository (path dependency, env.sh) runs without LD_LIBRARY_PATH" consumer_runs "$consumer"
pass "the same crate with a .cargo/config.toml rpath instead of env.sh's RUSTFLAGS" consumer_config_runs "$consumer"
rm -rf "$consumer"

if cargo clippy --version >/dev/null 2>&1; then
  pass "cargo clippy --all-targets -- -D warnings" cargo clippy --offline --locked --all-targets -- -D warnings
else
  echo "SKIP: cargo clippy is not installed (rust-clippy)"
  record 0 0 1
fi
pass "cargo doc --no-deps (warnings are errors)" env RUSTDOCFLAGS="-D warnings" cargo doc --offline --locked --no-deps -q
exit "$rc"
