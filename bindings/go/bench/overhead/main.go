// Command overhead measures what the Go binding adds to a run of a tiny plan (y = x + 1 over
// four floats): the same plan run from a C loop, from Go through one raw cgo call per run, and
// through chutney.Plan.Run; plus the cost of an empty cgo call on this machine. Rounds alternate
// so that a noisy machine affects every variant alike; the median round is reported, as JSON.
//
//	go run ./bench/overhead [-n 200000] [-rounds 7]
package main

/*
#cgo pkg-config: chutney
#include <chutney/chutney.h>
#include <time.h>

static void empty_call(void) {}

typedef struct bench {
  ctn_context *ctx;
  ctn_graph *g;
  ctn_plan *plan;
  ctn_tensor *x, *y;
  ctn_node in;
} bench;

static ctn_status bench_setup(bench *b) {
  const int64_t shape[1] = {4};
  const float xs[4] = {1, 2, 3, 4};
  ctn_context_options o = {sizeof o, 0, NULL, "cpu", 0, 0};
  ctn_node one, out;
  ctn_status s;
  if ((s = ctn_context_create(&o, &b->ctx)) != CTN_OK) return s;
  if ((s = ctn_graph_create(b->ctx, 0, &b->g)) != CTN_OK) return s;
  if ((s = ctn_input(b->g, "x", CTN_F32, 1, shape, &b->in)) != CTN_OK) return s;
  if ((s = ctn_scalar(b->g, CTN_F32, 1.0, &one)) != CTN_OK) return s;
  if ((s = ctn_add(b->g, b->in, one, &out)) != CTN_OK) return s;
  if ((s = ctn_plan_compile(b->g, 1, &out, NULL, &b->plan)) != CTN_OK) return s;
  if ((s = ctn_tensor_create(CTN_F32, 1, shape, xs, &b->x)) != CTN_OK) return s;
  return ctn_plan_output_create(b->plan, 0, &b->y);
}

static void bench_release(bench *b) {
  ctn_tensor_release(b->y);
  ctn_tensor_release(b->x);
  ctn_plan_release(b->plan);
  ctn_graph_release(b->g);
  ctn_context_release(b->ctx);
}

static ctn_status bench_run(bench *b) {
  const ctn_tensor *feeds[1] = {b->x};
  return ctn_plan_run(b->plan, 1, &b->in, feeds, 1, &b->y);
}

// n runs from C; returns the nanoseconds per run (negative on failure).
static double bench_c_loop(bench *b, long n) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < n; ++i)
    if (bench_run(b) != CTN_OK) return -1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)n;
}
*/
import "C"

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"time"

	"chutney/bindings/go/chutney"
)

type result struct {
	Runs           int     `json:"runs_per_round"`
	Rounds         int     `json:"rounds"`
	CNsPerRun      float64 `json:"c_loop_ns_per_run"`
	RawCgoNsPerRun float64 `json:"go_raw_cgo_ns_per_run"`
	GoNsPerRun     float64 `json:"go_binding_ns_per_run"`
	EmptyCgoNs     float64 `json:"empty_cgo_call_ns"`
	GoOverheadNs   float64 `json:"go_binding_minus_c_ns"`
	GoOverheadPct  float64 `json:"go_binding_overhead_percent"`
	AllocsPerGoRun float64 `json:"go_binding_allocs_per_run"`
	GoVersion      string  `json:"go_version"`
	ChutneyVersion string  `json:"chutney_version"`
	GOMAXPROCS     int     `json:"gomaxprocs"`
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func nsPer(n int, f func()) float64 {
	t0 := time.Now()
	f()
	return float64(time.Since(t0).Nanoseconds()) / float64(n)
}

func main() {
	n := flag.Int("n", 200000, "runs per round and variant")
	rounds := flag.Int("rounds", 7, "rounds (the median is reported)")
	flag.Parse()
	if err := run(*n, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		os.Exit(1)
	}
}

func run(n, rounds int) error {
	var b C.bench
	if s := C.bench_setup(&b); s != C.CTN_OK {
		return fmt.Errorf("C setup: %s", C.GoString(C.ctn_last_error()))
	}
	defer C.bench_release(&b)

	ctx, err := chutney.NewContext(&chutney.Options{Backends: "cpu"})
	if err != nil {
		return err
	}
	defer ctx.Close()
	g, err := ctx.NewGraph()
	if err != nil {
		return err
	}
	defer g.Close()
	x := g.Input("x", chutney.Float32, 4)
	plan, err := g.Compile(g.Add(x, g.Scalar(chutney.Float32, 1)))
	if err != nil {
		return err
	}
	defer plan.Close()
	xv, err := chutney.NewTensor([]float32{1, 2, 3, 4}, 4)
	if err != nil {
		return err
	}
	defer xv.Close()
	yv, err := plan.NewOutput(0)
	if err != nil {
		return err
	}
	defer yv.Close()
	feeds := []chutney.Feed{{Node: x, Value: xv}}

	var cs, raws, gos, empties []float64
	var runErr error
	for r := 0; r < rounds+1; r++ { // round 0 warms up and is dropped
		c := float64(C.bench_c_loop(&b, C.long(n)))
		raw := nsPer(n, func() {
			for i := 0; i < n; i++ {
				if C.bench_run(&b) != C.CTN_OK {
					runErr = fmt.Errorf("raw run failed")
				}
			}
		})
		gr := nsPer(n, func() {
			for i := 0; i < n; i++ {
				if err := plan.Run(feeds, yv); err != nil {
					runErr = err
				}
			}
		})
		e := nsPer(n, func() {
			for i := 0; i < n; i++ {
				C.empty_call()
			}
		})
		if c < 0 || runErr != nil {
			return fmt.Errorf("a run failed: %v", runErr)
		}
		if r > 0 {
			cs, raws, gos, empties = append(cs, c), append(raws, raw), append(gos, gr), append(empties, e)
		}
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 0; i < 10000; i++ {
		plan.Run(feeds, yv)
	}
	runtime.ReadMemStats(&m1)

	res := result{Runs: n, Rounds: rounds, CNsPerRun: median(cs), RawCgoNsPerRun: median(raws),
		GoNsPerRun: median(gos), EmptyCgoNs: median(empties),
		AllocsPerGoRun: float64(m1.Mallocs-m0.Mallocs) / 10000,
		GoVersion:      runtime.Version(), ChutneyVersion: chutney.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	res.GoOverheadNs = res.GoNsPerRun - res.CNsPerRun
	res.GoOverheadPct = 100 * res.GoOverheadNs / res.CNsPerRun
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
