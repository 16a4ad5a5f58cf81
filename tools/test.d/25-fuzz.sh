#!/usr/bin/env bash
# Stage: fuzzing, bounded (docs/RELIABILITY.md). Each libFuzzer target of tests/fuzz (graph
# builder, safetensors, IDX/gzip, JSON header, ONNX reader) runs for FUZZ_SECONDS (default 20)
# from its committed corpus, in the ASan+UBSan build of 20-asan.sh (ASAN_BUILD_DIR, default
# build-asan; clang only). New inputs go to a scratch folder, never into the committed corpus;
# a crash, sanitizer report, leak, timeout (10 s an input) or out-of-memory (2 GiB) fails the
# stage and its input is kept in $ASAN_BUILD_DIR/fuzz-artifacts/ to be fixed and committed as a
# corpus entry. A single allocation over 256 MiB fails (ASan's max_allocation_size_mb with
# allocator_may_return_null): a graph may legitimately declare a 17 GB plan, whose arena the
# kernel grants untouched, but ASan's shadow of it alone would pass the 2 GiB RSS limit; failing
# it instead tests the library's out-of-memory path (a clean CTN_ERR_OUT_OF_MEMORY). The corpora themselves are replayed in every build (meson suite `fuzz`, and
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
names=(graph safetensors idx json onnx)
ninja -C "$dir" ${NINJA_JOBS:+-j "$NINJA_JOBS"} $(printf 'tests/fuzz/fuzz_%s ' "${names[@]}") backends/cpu/ctn-cpu.so
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$dir/fuzz-artifacts"
ok=0 failed=0
for n in "${names[@]}"; do
  mkdir -p "$scratch/$n"
  rc=0
  ASAN_OPTIONS="allocator_may_return_null=1 max_allocation_size_mb=256 detect_leaks=1 ${ASAN_OPTIONS:-}" \
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
