package chutney_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"chutney/bindings/go/chutney"
)

// JVP of y = sum(tanh(x) * x) along v equals the directional derivative by finite differences,
// and equals <grad, v> (forward and reverse mode agree).
func TestJVP(t *testing.T) {
	g := graph(t)
	x := g.Input("x", chutney.Float64, 3)
	v := g.Input("v", chutney.Float64, 3)
	y := g.Sum(g.Mul(g.Tanh(x), x), nil, false)
	jv := g.JVP([]chutney.Node{y}, []chutney.Node{x}, []chutney.Node{v})[0]
	dx := g.Grad(y, x)[0]
	xs, vs := []float64{0.3, -1.2, 2}, []float64{1, 0.5, -2}
	res := run(t, g, []chutney.Feed{{Node: x, Value: tensor(t, xs, 3)}, {Node: v, Value: tensor(t, vs, 3)}}, jv, dx)
	f := func(s float64) float64 {
		r := 0.0
		for i := range xs {
			z := xs[i] + s*vs[i]
			r += math.Tanh(z) * z
		}
		return r
	}
	const h = 1e-6
	fd := (f(h) - f(-h)) / (2 * h)
	dot := 0.0
	for i := range vs {
		dot += res[1][i] * vs[i]
	}
	if math.Abs(res[0][0]-fd) > 1e-7 || math.Abs(res[0][0]-dot) > 1e-12 {
		t.Fatalf("jvp %g, finite differences %g, <grad, v> %g", res[0][0], fd, dot)
	}
	// An op without a tangent rule: a clear error naming it, recorded on the graph.
	g2 := graph(t)
	a := g2.Input("a", chutney.Float32, 1, 1, 4, 4)
	p := g2.MaxPool2D(a, chutney.Pool{KernelH: 2, KernelW: 2, StrideH: 2, StrideW: 2})
	g2.JVP([]chutney.Node{p}, []chutney.Node{a}, []chutney.Node{g2.Input("t", chutney.Float32, 1, 1, 4, 4)})
	if err := g2.Err(); !errors.Is(err, chutney.ErrUnsupported) || !strings.Contains(err.Error(), "max_pool2d") {
		t.Fatalf("JVP through max_pool2d: %v", err)
	}
}

// A memory budget recomputes activations: the planned peak drops, results stay bit-identical.
func TestMemoryBudget(t *testing.T) {
	g := graph(t)
	x := g.Input("x", chutney.Float32, 64, 32)
	h := x
	for i := 0; i < 4; i++ {
		h = g.Tanh(g.Mul(h, g.Scalar(chutney.Float32, 1.1)))
	}
	loss := g.Mean(g.Mul(h, h), nil, false)
	dx := g.Grad(loss, x)[0]
	xs := make([]float32, 64*32)
	for i := range xs {
		xs[i] = float32(math.Sin(float64(i)))
	}
	feeds := []chutney.Feed{{Node: x, Value: tensor(t, xs, 64, 32)}}
	plain := closer(t, must(g.Compile(dx)))
	budget := closer(t, must(g.CompileWith(chutney.CompileOptions{MemoryBudget: chutney.MemoryBudgetAuto}, dx)))
	r0, r1 := must(plain.MemoryReport()), must(budget.MemoryReport())
	if r0.Budget != 0 || len(r0.Recomputed) != 0 {
		t.Fatalf("unbudgeted plan's report: %+v", r0)
	}
	if r1.PeakBytes > r1.PeakWithoutBudget || r1.PeakWithoutBudget != r0.PeakBytes {
		t.Fatalf("budgeted report %+v vs plain %+v", r1, r0)
	}
	if r1.PeakBytes < r0.PeakBytes && len(r1.Recomputed) == 0 {
		t.Fatalf("peak dropped without recomputation: %+v", r1)
	}
	o0, o1 := closer(t, must(plain.NewOutput(0))), closer(t, must(budget.NewOutput(0)))
	if err := plain.Run(feeds, o0); err != nil {
		t.Fatal(err)
	}
	if err := budget.Run(feeds, o1); err != nil {
		t.Fatal(err)
	}
	a, b := must(o0.Float32s()), must(o1.Float32s())
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("element %d differs under the budget: %g vs %g", i, a[i], b[i])
		}
	}
	if r1.MinimumBytes > 1 {
		_, err := g.CompileWith(chutney.CompileOptions{MemoryBudget: r1.MinimumBytes - 1}, dx)
		if !errors.Is(err, chutney.ErrOutOfMemory) {
			t.Fatalf("budget below the minimum: %v", err)
		}
	}
}
