package chutney_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"chutney/bindings/go/chutney"
)

// goSwish is y = x * sigmoid(b * x) with b = Floats[0] (1 when absent), written in Go: infer,
// gradient (from graph ops) and a CPU kernel for f32 and f64.
func goSwish(name string) chutney.OpDef {
	beta := func(a chutney.Attrs) float64 {
		if len(a.Floats) > 0 {
			return a.Floats[0]
		}
		return 1
	}
	return chutney.OpDef{
		Name:      name,
		NumInputs: 1,
		Doc:       "x * sigmoid(beta x); f[0] = beta (default 1)",
		Infer: func(in []chutney.TensorDesc, a chutney.Attrs) (chutney.DType, []int64, error) {
			if in[0].DType != chutney.Float32 && in[0].DType != chutney.Float64 {
				return 0, nil, &chutney.Error{Status: chutney.StatusDType, Msg: "x must be f32 or f64, not " + in[0].DType.String()}
			}
			return in[0].DType, in[0].Shape, nil
		},
		// d/dx x s(bx) = s + b x s (1 - s), s = sigmoid(bx)
		Grad: func(b *chutney.GradBuilder, in []chutney.OpNode, y, dy chutney.OpNode, a chutney.Attrs) ([]chutney.OpNode, error) {
			d, err := b.Desc(in[0])
			if err != nil {
				return nil, err
			}
			bt := b.Scalar(d.DType, beta(a))
			bx := b.Op("mul", nil, in[0], bt)
			s := b.Op("sigmoid", nil, bx)
			one := b.Scalar(d.DType, 1)
			ds := b.Op("mul", nil, b.Op("mul", nil, bx, s), b.Op("sub", nil, one, s))
			return []chutney.OpNode{b.Op("mul", nil, dy, b.Op("add", nil, s, ds))}, nil
		},
		Kernel: func(in []chutney.HostTensor, out chutney.HostTensor, a chutney.Attrs) error {
			bt := beta(a)
			switch out.DType {
			case chutney.Float32:
				x, y := in[0].Float32s(), out.Float32s()
				for i := range y {
					v := float64(x[i])
					y[i] = float32(v / (1 + math.Exp(-bt*v)))
				}
			case chutney.Float64:
				x, y := in[0].Float64s(), out.Float64s()
				for i := range y {
					y[i] = x[i] / (1 + math.Exp(-bt*x[i]))
				}
			default:
				return errors.New("unsupported dtype")
			}
			return nil
		},
	}
}

func swishRef(x, b float64) float64 { return x / (1 + math.Exp(-b*x)) }

// opCtx is a context of its own with the Go op added, closed at the end of the test.
func opCtx(t *testing.T, ops ...chutney.OpDef) *chutney.Context {
	t.Helper()
	c := closer(t, must(chutney.NewContext(&chutney.Options{Backends: "cpu"})))
	if err := c.AddOps("go-test-ops", ops...); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGoOpForwardAndGradient(t *testing.T) {
	c := opCtx(t, goSwish("go_swish"))
	g := closer(t, must(c.NewGraph()))
	xs := []float64{-3, -0.5, 0, 0.25, 2, 5}
	x := g.Input("x", chutney.Float64, 2, 3)
	y := g.Op("go_swish", &chutney.Attrs{Floats: []float64{1.5}}, x)
	loss := g.Sum(y, nil, false)
	dx := g.Grad(loss, x)[0]
	res := run(t, g, []chutney.Feed{{Node: x, Value: tensor(t, xs, 2, 3)}}, y, dx)
	for i, v := range xs {
		if math.Abs(res[0][i]-swishRef(v, 1.5)) > 1e-12 {
			t.Fatalf("y[%d] = %g, want %g", i, res[0][i], swishRef(v, 1.5))
		}
		const h = 1e-6
		fd := (swishRef(v+h, 1.5) - swishRef(v-h, 1.5)) / (2 * h)
		if math.Abs(res[1][i]-fd) > 1e-7 {
			t.Fatalf("dy/dx[%d] = %g, finite differences %g", i, res[1][i], fd)
		}
	}
	// Eagerly too, in f32.
	e := closer(t, must(c.NewEagerGraph()))
	v := e.Op("go_swish", nil, e.Constant(tensor(t, []float32{1, -1}, 2)))
	got := must(closer(t, must(e.Value(v))).Float32s())
	if math.Abs(float64(got[0])-swishRef(1, 1)) > 1e-6 || math.Abs(float64(got[1])-swishRef(-1, 1)) > 1e-6 {
		t.Fatalf("eager go_swish = %v", got)
	}
}

// A Go op trains next to built-in ops: y = go_swish(x @ w), fit to targets made with
// w = (0.5, 1, 1.5).
func TestGoOpTrains(t *testing.T) {
	target := make([]float32, 4)
	for i, z := range []float64{0.5, 1, 1.5, 3} {
		target[i] = float32(swishRef(z, 1))
	}
	c := opCtx(t, goSwish("go_swish"))
	g := closer(t, must(c.NewGraph()))
	x := g.Input("x", chutney.Float32, 4, 3)
	tt := g.Input("t", chutney.Float32, 4, 1)
	w := g.Variable("w", tensor(t, []float32{0.1, 0.1, 0.1}, 3, 1))
	d := g.Sub(g.Op("go_swish", nil, g.MatMul(x, w, false, false)), tt)
	loss := g.Mean(g.Mul(d, d), nil, false)
	dw := g.Grad(loss, w)[0]
	g.Assign(w, g.Sub(w, g.Mul(dw, g.Scalar(chutney.Float32, 0.5))))
	p := closer(t, must(g.Compile(loss)))
	lv := closer(t, must(p.NewOutput(0)))
	feeds := []chutney.Feed{{Node: x, Value: tensor(t, []float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, 4, 3)},
		{Node: tt, Value: tensor(t, target, 4, 1)}}
	var first, last float64
	for i := 0; i < 500; i++ {
		if err := p.Run(feeds, lv); err != nil {
			t.Fatal(err)
		}
		last = must(lv.Item())
		if i == 0 {
			first = last
		}
	}
	if !(last < first/1000) {
		t.Fatalf("loss %g -> %g: did not train", first, last)
	}
}

func TestGoOpErrors(t *testing.T) {
	failing := goSwish("go_failing")
	failing.Kernel = func([]chutney.HostTensor, chutney.HostTensor, chutney.Attrs) error {
		return errors.New("the kernel refuses")
	}
	panicking := goSwish("go_panicking")
	panicking.Kernel = func([]chutney.HostTensor, chutney.HostTensor, chutney.Attrs) error { panic("boom") }
	nograd := goSwish("go_nograd")
	nograd.Grad = nil
	c := opCtx(t, goSwish("go_swish"), failing, panicking, nograd)

	// infer's error reaches the caller with its status and message.
	g := closer(t, must(c.NewGraph()))
	g.Op("go_swish", nil, g.Input("i", chutney.Int32, 3))
	if e := wantErr(t, g.Err(), chutney.ErrDType); !strings.Contains(e.Msg, "x must be f32 or f64, not i32") {
		t.Fatalf("infer error: %v", e)
	}
	// A kernel's error and a kernel's panic fail the run, named, and the process lives on.
	for _, name := range []string{"go_failing", "go_panicking"} {
		g := closer(t, must(c.NewGraph()))
		x := g.Input("x", chutney.Float32, 2)
		p := closer(t, must(g.Compile(g.Op(name, nil, x))))
		out := closer(t, must(p.NewOutput(0)))
		err := p.Run([]chutney.Feed{{Node: x, Value: tensor(t, []float32{1, 2}, 2)}}, out)
		var e *chutney.Error
		if !errors.As(err, &e) || !strings.Contains(e.Msg, name) {
			t.Fatalf("%s: run error %v", name, err)
		}
		if name == "go_panicking" && !strings.Contains(e.Msg, "panic: boom") {
			t.Fatalf("panic not reported: %v", err)
		}
	}
	// No gradient rule: Grad says so.
	g2 := closer(t, must(c.NewGraph()))
	x := g2.Input("x", chutney.Float32, 2)
	g2.Grad(g2.Sum(g2.Op("go_nograd", nil, x), nil, false), x)
	if g2.Err() == nil || !strings.Contains(g2.Err().Error(), "go_nograd") {
		t.Fatalf("grad through an op without a rule: %v", g2.Err())
	}
	// Registration is checked in Go first, then admitted by the library like a plugin. Op names
	// are namespaced (docs/ABI.md): a name taken elsewhere loads, the first library keeps the
	// plain name, a library's op shadows a built-in's, qualified names reach each op.
	if err := c.AddOps("dup", goSwish("go_swish")); err != nil {
		t.Fatalf("an op name another library uses: %v", err)
	}
	if err := c.AddOps("builtin-clash", goSwish("softsign")); err != nil {
		t.Fatalf("op named like a built-in: %v", err)
	}
	if err := c.AddOps("dup", goSwish("go_other")); !errors.Is(err, chutney.ErrPlugin) {
		t.Fatalf("a second library named dup: %v", err)
	}
	gn := closer(t, must(c.NewEagerGraph()))
	xn := gn.Constant(tensor(t, []float64{1}, 1))
	mine := gn.Op("softsign", nil, xn)
	builtin := gn.Op("ctn::softsign", nil, xn)
	other := gn.Op("dup::go_swish", nil, xn)
	if gn.Err() != nil {
		t.Fatalf("qualified op names: %v", gn.Err())
	}
	if v := must(closer(t, must(gn.Value(builtin))).Float64s())[0]; v != 0.5 {
		t.Fatalf("ctn::softsign(1) = %v, want the built-in's 0.5", v)
	}
	if v := must(closer(t, must(gn.Value(mine))).Float64s())[0]; v == 0.5 {
		t.Fatalf("softsign(1) = %v: the library's op should shadow the built-in", v)
	}
	_ = other
	if r := must(c.PluginReport()); !strings.Contains(r, "softsign resolves to builtin-clash::softsign") ||
		!strings.Contains(r, "go_swish resolves to go-test-ops::go_swish") {
		t.Fatalf("the report does not say where the names go:\n%s", r)
	}
	bad := goSwish("go_bad")
	bad.Infer = nil
	wantErr(t, c.AddOps("bad", bad), chutney.ErrInvalidArgument)
	wantErr(t, c.AddOps("", goSwish("x")), chutney.ErrInvalidArgument)
	// The failed additions changed nothing: the ops added first still run.
	g3 := closer(t, must(c.NewEagerGraph()))
	if v := g3.Op("go_swish", nil, g3.Constant(tensor(t, []float64{0}, 1))); g3.Err() != nil || must(closer(t, must(g3.Value(v))).Float64s())[0] != 0 {
		t.Fatalf("go_swish after failed additions: %v", g3.Err())
	}
	report := must(c.PluginReport())
	if !strings.Contains(report, "go-test-ops") {
		t.Fatalf("plugin report does not list the Go library:\n%s", report)
	}
}

// Several goroutines run plans using the Go op at once (the library's rule: a context serves
// several threads); the race detector checks the callbacks' bookkeeping.
func TestGoOpConcurrent(t *testing.T) {
	c := opCtx(t, goSwish("go_swish"))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			g, err := c.NewGraph()
			if err != nil {
				errs <- err
				return
			}
			defer g.Close()
			x := g.Input("x", chutney.Float64, 3)
			p, err := g.Compile(g.Op("go_swish", nil, x))
			if err != nil {
				errs <- err
				return
			}
			defer p.Close()
			in, _ := chutney.NewTensor([]float64{float64(w), 1, -1}, 3)
			defer in.Close()
			out, _ := p.NewOutput(0)
			defer out.Close()
			for i := 0; i < 50; i++ {
				if err := p.Run([]chutney.Feed{{Node: x, Value: in}}, out); err != nil {
					errs <- err
					return
				}
				if v, _ := out.Float64s(); math.Abs(v[0]-swishRef(float64(w), 1)) > 1e-12 {
					errs <- errors.New("wrong value under concurrency")
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestOpRegistry(t *testing.T) {
	c := opCtx(t, goSwish("go_swish"))
	ops := must(c.Ops())
	byName := map[string]chutney.OpInfo{}
	for _, o := range ops {
		byName[o.Name] = o
	}
	if o := byName["matmul"]; o.Origin != "builtin" || o.NumInputs != 2 || !o.Differentiable {
		t.Fatalf("matmul: %+v", o)
	}
	o, ok := byName["go_swish"]
	if !ok || o.Origin != "go-test-ops" || o.OriginPath != "<in-process>" || !o.Differentiable || o.NumInputs != 1 {
		t.Fatalf("go_swish: %+v (found %v)", o, ok)
	}
	if ops[len(ops)-1].Name != "go_swish" {
		t.Fatalf("the library's op is not last: %s", ops[len(ops)-1].Name)
	}
	if sup, why, err := c.OpSupport("cpu", "go_swish", chutney.Float64); err != nil || !sup || why != "" {
		t.Fatalf("OpSupport(cpu, go_swish, f64) = %v %q %v", sup, why, err)
	}
	if sup, why, err := c.OpSupport("cpu", "go_swish", chutney.Int32); err != nil || sup || !strings.Contains(why, "f32 or f64") {
		t.Fatalf("OpSupport(cpu, go_swish, i32) = %v %q %v", sup, why, err)
	}
	if _, _, err := c.OpSupport("cpu", "no_such_op", chutney.Float32); !errors.Is(err, chutney.ErrInvalidArgument) {
		t.Fatalf("unknown op: %v", err)
	}
}
