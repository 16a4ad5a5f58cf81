package chutney_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"chutney/bindings/go/chutney"
)

// longPlan is 300 steps of a 256x256 matmul + tanh, then the variable v += the result.
func longPlan(t *testing.T) (chutney.Node, chutney.Node, *chutney.Plan, *chutney.Tensor) {
	g := graph(t)
	x := g.Input("x", chutney.Float32, 256, 256)
	init := make([]float32, 256*256)
	for i := range init {
		init[i] = 0.01
	}
	v := g.Variable("v", tensor(t, init, 256, 256))
	h := x
	for i := 0; i < 300; i++ {
		h = g.Tanh(g.MatMul(h, v, false, false))
	}
	g.Assign(v, g.Add(v, h))
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	xs := make([]float32, 256*256)
	for i := range xs {
		xs[i] = 0.5
	}
	return x, v, closer(t, must(g.Compile(h))), tensor(t, xs, 256, 256)
}

func variable(t *testing.T, p *chutney.Plan, v chutney.Node) []float32 {
	return must(closer(t, must(p.ReadVariable(v))).Float32s())
}

// A context cancelled during the run stops it: the error matches ErrCancelled and
// context.Canceled, and the variable is unchanged; a context's deadline does the same.
func TestRunContextCancelsAndKeepsVariables(t *testing.T) {
	x, v, p, xv := longPlan(t)
	feeds := []chutney.Feed{{Node: x, Value: xv}}
	t0 := time.Now()
	if err := p.RunContext(context.Background(), feeds); err != nil {
		t.Fatal(err)
	}
	full := time.Since(t0)
	before := variable(t, p, v)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(full/4, cancel)
	err := p.RunContext(ctx, feeds)
	if !errors.Is(err, chutney.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("a run of %v cancelled after %v: %v", full, full/4, err)
	}
	if !reflect.DeepEqual(variable(t, p, v), before) {
		t.Fatal("a cancelled run changed the variable")
	}
	dctx, dcancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer dcancel()
	err = p.RunContext(dctx, feeds)
	if !errors.Is(err, chutney.ErrCancelled) {
		t.Fatalf("deadline: %v", err)
	}
	if err := p.RunWithOptions(chutney.RunOptions{Timeout: time.Microsecond}, feeds); !errors.Is(err, chutney.ErrCancelled) {
		t.Fatalf("Timeout: %v", err)
	}
	if !reflect.DeepEqual(variable(t, p, v), before) {
		t.Fatal("a run past its deadline changed the variable")
	}
	if err := p.RunContext(context.Background(), feeds); err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(variable(t, p, v), before) {
		t.Fatal("a completed run did not update the variable")
	}
}

// CheckNumerics names the op that made the NaN.
func TestRunWithOptionsCheckNumerics(t *testing.T) {
	g := graph(t)
	x := g.Input("x", chutney.Float32, 4)
	y := g.Tanh(g.Log(x))
	p := closer(t, must(g.Compile(y)))
	feeds := []chutney.Feed{{Node: x, Value: tensor(t, []float32{1, -1, 2, 3}, 4)}}
	if err := p.Run(feeds); err != nil {
		t.Fatal("without the check a NaN passes silently:", err)
	}
	err := p.RunWithOptions(chutney.RunOptions{CheckNumerics: true}, feeds)
	if !errors.Is(err, chutney.ErrNumerics) || !strings.Contains(err.Error(), "(log, node 1,") {
		t.Fatalf("CheckNumerics: %v", err)
	}
}
