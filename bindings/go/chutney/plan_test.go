package chutney_test

import (
	"fmt"
	"strings"
	"testing"

	"chutney/bindings/go/chutney"
)

// addOne is a compiled y = x + 1 over [2, 2] floats.
func addOne(t *testing.T) (*chutney.Graph, chutney.Node, *chutney.Plan) {
	g := graph(t)
	x := g.Input("x", chutney.Float32, 2, 2)
	y := g.Add(x, g.Scalar(chutney.Float32, 1))
	return g, x, closer(t, must(g.Compile(y)))
}

func TestPlanRunAndIntrospection(t *testing.T) {
	_, x, p := addOne(t)
	if p.NumOutputs() != 1 {
		t.Fatal(p.NumOutputs())
	}
	y := closer(t, must(p.NewOutput(0)))
	if err := p.Run([]chutney.Feed{{Node: x, Value: tensor(t, []float32{1, 2, 3, 4}, 2, 2)}}, y); err != nil {
		t.Fatal(err)
	}
	if v := must(y.Float32s()); v[0] != 2 || v[3] != 5 {
		t.Fatal(v)
	}
	// A nil output is skipped; no outputs at all is a valid run too.
	if err := p.Run([]chutney.Feed{{Node: x, Value: tensor(t, []float32{1, 2, 3, 4}, 2, 2)}}, nil); err != nil {
		t.Fatal(err)
	}
	st := must(p.Stats())
	if st.Steps < 1 || st.Nodes < 3 {
		t.Fatalf("stats %+v", st)
	}
	if d := must(p.Describe()); !strings.Contains(d, "cpu") {
		t.Fatalf("Describe: %q", d)
	}
	if n := must(p.BackendSteps("cpu", "")); n != st.Steps {
		t.Fatalf("cpu runs %d of %d steps", n, st.Steps)
	}
	if n := must(p.BackendSteps("cpu", "matmul")); n != 0 {
		t.Fatalf("%d matmul steps in an add", n)
	}
	p2 := closer(t, must(graph(t).CompileWith(chutney.CompileOptions{Disable: chutney.PassFusion | chutney.PassMemoryReuse, Backends: "cpu"})))
	if p2.NumOutputs() != 0 {
		t.Fatal("empty plan has outputs")
	}
}

func TestPlanRunBadInput(t *testing.T) {
	g, x, p := addOne(t)
	y := closer(t, must(p.NewOutput(0)))
	good := tensor(t, []float32{1, 2, 3, 4}, 2, 2)
	feed := func(v *chutney.Tensor) []chutney.Feed { return []chutney.Feed{{Node: x, Value: v}} }

	wantErr(t, p.Run(feed(tensor(t, []float32{1, 2, 3}, 3)), y), chutney.ErrShape)
	wantErr(t, p.Run(feed(tensor(t, []float64{1, 2, 3, 4}, 2, 2)), y), chutney.ErrDType)
	wantErr(t, p.Run(nil, y), chutney.ErrInvalidArgument) // x not fed
	wantErr(t, p.Run(feed(good), closer(t, must(chutney.Zeros(chutney.Float32, 3)))), chutney.ErrShape)
	wantErr(t, p.Run(feed(good), y, y), chutney.ErrInvalidArgument)
	wantErr(t, p.Run(feed(nil), y), chutney.ErrInvalidArgument)
	wantErr(t, p.Run([]chutney.Feed{{Value: good}}, y), chutney.ErrInvalidArgument)
	other := graph(t).Input("x", chutney.Float32, 2, 2)
	wantErr(t, p.Run([]chutney.Feed{{Node: other, Value: good}}, y), chutney.ErrInvalidArgument)
	closed := must(chutney.NewTensor([]float32{1, 2, 3, 4}, 2, 2))
	closed.Close()
	wantErr(t, p.Run(feed(closed), y), chutney.ErrClosed)
	wantErr(t, p.Run(feed(good), closed), chutney.ErrClosed)
	_, err := p.NewOutput(1)
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, err = p.NewOutput(-1)
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, err = p.ReadVariable(x)
	wantErr(t, err, chutney.ErrInvalidArgument)
	wantErr(t, p.WriteVariable(x, good), chutney.ErrInvalidArgument)
	_, err = p.BackendSteps("cpu\x00", "")
	wantErr(t, err, chutney.ErrInvalidArgument)

	// Still runs after every failure (a failed call changes no state).
	if err := p.Run(feed(good), y); err != nil {
		t.Fatal(err)
	}
	// The graph may be closed: the plan does not need it.
	g.Close()
	if err := p.Run(feed(good), y); err != nil {
		t.Fatal(err)
	}
	p.Close()
	wantErr(t, p.Run(feed(good), y), chutney.ErrClosed)
	_, err = p.Stats()
	wantErr(t, err, chutney.ErrClosed)
	var nilP *chutney.Plan
	wantErr(t, nilP.Run(nil), chutney.ErrInvalidArgument)
}

// A run allocates nothing in the steady state (the documented promise of Plan.Run).
func TestRunDoesNotAllocate(t *testing.T) {
	_, x, p := addOne(t)
	y := closer(t, must(p.NewOutput(0)))
	feeds := []chutney.Feed{{Node: x, Value: tensor(t, []float32{1, 2, 3, 4}, 2, 2)}}
	if err := p.Run(feeds, y); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() {
		if err := p.Run(feeds, y); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per run", n)
	}
}

func BenchmarkPlanRun(b *testing.B) {
	g := must(ctx.NewGraph())
	defer g.Close()
	x := g.Input("x", chutney.Float32, 4)
	p := must(g.Compile(g.Add(x, g.Scalar(chutney.Float32, 1))))
	defer p.Close()
	xv := must(chutney.NewTensor([]float32{1, 2, 3, 4}, 4))
	defer xv.Close()
	y := must(p.NewOutput(0))
	defer y.Close()
	feeds := []chutney.Feed{{Node: x, Value: xv}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := p.Run(feeds, y); err != nil {
			b.Fatal(err)
		}
	}
}

// One plan run by several goroutines at once: the package serialises the calls on a plan (the
// library allows one thread per ctn_plan). Each goroutine gets its own feed's result, and a
// counter variable that every run increments ends at exactly the number of runs (no run lost
// or interleaved with another). Before the per-plan lock this crashed or mixed feeds. Short:
// the test stage runs it 100 times under the race detector.
func TestPlanConcurrentRun(t *testing.T) {
	const goroutines, runs = 4, 25
	g := graph(t)
	x := g.Input("x", chutney.Float32, side, side)
	n := g.Variable("n", tensor(t, []float64{0}, 1))
	g.Assign(n, g.Add(n, g.Scalar(chutney.Float64, 1)))
	p := closer(t, must(g.Compile(g.Add(g.MatMul(x, x, false, false), g.Scalar(chutney.Float32, 1)))))
	errs := make(chan error, goroutines)
	for w := 0; w < goroutines; w++ {
		go func(w int) { errs <- runSquare(p, x, float32(w), runs) }(w)
	}
	for w := 0; w < goroutines; w++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if v := must(chutney.Values[float64](closer(t, must(p.ReadVariable(n))))); v[0] != goroutines*runs {
		t.Fatalf("counter %v after %d runs: runs overlapped", v[0], goroutines*runs)
	}
}

const side = 128

// runSquare runs p (x @ x + 1 over side x side floats) with every x = w, checking each result.
func runSquare(p *chutney.Plan, x chutney.Node, w float32, runs int) error {
	data := make([]float32, side*side)
	for i := range data {
		data[i] = w
	}
	xv, err := chutney.NewTensor(data, side, side)
	if err != nil {
		return err
	}
	defer xv.Close()
	y, err := p.NewOutput(0)
	if err != nil {
		return err
	}
	defer y.Close()
	want := side*w*w + 1
	for i := 0; i < runs; i++ {
		if err := p.Run([]chutney.Feed{{Node: x, Value: xv}}, y); err != nil {
			return err
		}
		if err := chutney.Read(y, data); err != nil {
			return err
		}
		if data[0] != want || data[len(data)-1] != want {
			return fmt.Errorf("goroutine %v, run %d: got %v, want %v (another goroutine's feed)", w, i, data[0], want)
		}
	}
	return nil
}
