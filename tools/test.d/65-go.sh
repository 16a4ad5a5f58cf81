#!/usr/bin/env bash
# Stage: the Go binding (bindings/go) against the native build: go vet, go test with the race
# detector and GODEBUG=cgocheck=2 (every Go pointer handed to C is checked), the README example
# built without pkg-config, a module outside the repository run without LD_LIBRARY_PATH, the
# one-plan-several-goroutines stress test 100 times under the race detector, then the
# 10,000-cycle leak test again without the race detector, whose shadow memory hides RSS growth.
# First, the files generated from abi/chutney/*.h (internal/genabi: chutney/ctn_wrap.h,
# chutney-sys's ffi.rs, probe and layout/symbol tests, core/capi/abi_layout_gen.h) are
# regenerated into a temporary folder and must equal the checked-in ones (a diff is printed
# otherwise).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if ! command -v go >/dev/null 2>&1; then
  echo "go not found: install golang-go (tools/deps/go.txt)" >&2
  exit 1
fi
# shellcheck source=../../bindings/go/env.sh
source bindings/go/env.sh "$BUILD_DIR"
# The go command needs a cache folder; CI machines may have no HOME.
if [[ -z "${GOCACHE:-}${HOME:-}${XDG_CACHE_HOME:-}" ]]; then
  export GOCACHE=$CHUTNEY_BUILD_DIR/go-cache
fi
cd bindings/go
log=$CHUTNEY_BUILD_DIR/go-test.log
rc=0

echo "== generated files up to date (go run ./internal/genabi into a temporary folder, diff)"
gen=$(mktemp -d)
stale=0
if go run ./internal/genabi -root "$gen" -abi ../../abi/chutney; then
  while IFS= read -r f; do
    rel=${f#"$gen"/}
    diff -u "../../$rel" "$f" || { stale=1; echo "stale: $rel" >&2; }
  done < <(find "$gen" -type f | sort)
  [[ -n $(find "$gen" -type f) ]] || { stale=1; echo "genabi wrote nothing" >&2; }
else
  stale=1
fi
rm -rf "$gen"
if [[ $stale == 0 ]]; then
  record 1 0 0
else
  record 0 1 0; rc=1
  echo "FAIL: regenerate with: cd bindings/go && GOPROXY=off go generate ./chutney" >&2
fi

echo "== go vet ./..."
if go vet ./...; then record 1 0 0; else record 0 1 0; rc=1; fi

# Counts the tests of a `go test -v` log (subtests included).
count() {
  local ok fail skip
  ok=$(grep -cE '^ *--- PASS' "$1" || true)
  fail=$(grep -cE '^ *--- FAIL' "$1" || true)
  skip=$(grep -cE '^ *--- SKIP' "$1" || true)
  # A package that does not build or crashes has no "--- FAIL" line of its own.
  [[ $2 != 0 && $fail == 0 ]] && fail=1
  record "$ok" "$fail" "$skip"
}

echo "== GODEBUG=cgocheck=2 go test -race ./..."
st=0
GODEBUG=cgocheck=2 go test -count=1 -race -v ./... >"$log" 2>&1 || st=$?
grep -E '^(--- FAIL|FAIL|ok|panic|fatal)|^ +[a-z_]+\.go:[0-9]+:' "$log" || true
count "$log" "$st"
[[ $st == 0 ]] || { echo "go test failed; full log: $log" >&2; rc=1; }

# The documented fallback without pkg-config: flags from CGO_CFLAGS / CGO_LDFLAGS only (and a
# pkg-config that would fail if it were asked).
echo "== go run -tags chutney_no_pkgconfig ./examples/readme (no pkg-config)"
if PKG_CONFIG=false CGO_CFLAGS="-I$(cd ../.. && pwd)/abi" \
  CGO_LDFLAGS="-L$CHUTNEY_BUILD_DIR/core -lchutney -Wl,-rpath,$CHUTNEY_BUILD_DIR/core" \
  go run -tags chutney_no_pkgconfig ./examples/readme; then
  record 1 0 0
else
  record 0 1 0
  rc=1
fi

# A module outside the repository, set up as docs/GO.md says (require + replace, env.sh):
# built offline, its binary must start without LD_LIBRARY_PATH and print the plan's result.
outside_module() {
  local dir out
  dir=$(mktemp -d "${TMPDIR:-/tmp}/chutney-go-consumer.XXXXXX") || return 1
  printf 'module example.com/myapp\n\ngo 1.19\n\nrequire chutney/bindings/go v0.0.0\nreplace chutney/bindings/go => %s\n' "$PWD" >"$dir/go.mod"
  cat >"$dir/main.go" <<'EOF'
package main

import (
	"fmt"
	"os"

	"chutney/bindings/go/chutney"
)

func main() {
	ctx, err := chutney.NewContext(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer ctx.Close()
	g, _ := ctx.NewGraph()
	defer g.Close()
	x := g.Input("x", chutney.Float32, 3)
	p, err := g.Compile(g.Relu(g.Sub(x, g.Scalar(chutney.Float32, 1))))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer p.Close()
	xv, _ := chutney.NewTensor([]float32{0.5, 2, 3.5}, 3)
	defer xv.Close()
	y, _ := p.NewOutput(0)
	defer y.Close()
	err = p.Run([]chutney.Feed{{Node: x, Value: xv}}, y)
	v, _ := y.Float32s()
	fmt.Println("relu(x - 1) =", v, err)
}
EOF
  (cd "$dir" && go build -o myapp .) &&
    out=$(env -u LD_LIBRARY_PATH "$dir/myapp") && echo "$out" &&
    [[ $out == "relu(x - 1) = [0 1 2.5] <nil>" ]]
  local st=$?
  rm -rf "$dir"
  return $st
}
echo "== a module outside the repository (require + replace, env.sh) runs without LD_LIBRARY_PATH"
if outside_module; then record 1 0 0; else record 0 1 0; rc=1; fi

# One *Plan run by four goroutines at once failed every run before the per-plan lock (of 24: 9
# SIGSEGV in ctn_plan_run, 15 another goroutine's result); the race detector cannot see it (the
# shared state is C memory). 100 short runs must all pass.
echo "== GODEBUG=cgocheck=2 go test -race -count=100 -run TestPlanConcurrentRun ./chutney"
st=0
GODEBUG=cgocheck=2 go test -race -count=100 -v -run '^TestPlanConcurrentRun$' ./chutney >"$log.stress" 2>&1 || st=$?
grep -E '^(--- FAIL|FAIL|ok|panic|fatal)|^ +[a-z_]+\.go:[0-9]+:' "$log.stress" || true
if [[ $st == 0 && $(grep -c '^--- PASS: TestPlanConcurrentRun' "$log.stress") == 100 ]]; then
  record 1 0 0
else
  echo "stress test failed; full log: $log.stress" >&2
  record 0 1 0
  rc=1
fi

echo "== go test -run TestLeakCycles ./chutney (no race detector: RSS growth asserted)"
st=0
go test -count=1 -v -run '^TestLeakCycles$' ./chutney >"$log.leak" 2>&1 || st=$?
cat "$log.leak"
count "$log.leak" "$st"
[[ $st == 0 ]] || rc=1
exit "$rc"
