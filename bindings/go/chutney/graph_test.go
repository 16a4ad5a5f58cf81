package chutney_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"chutney/bindings/go/chutney"
)

// run compiles outputs of g, feeds, runs once and returns the outputs as float64s.
func run(t *testing.T, g *chutney.Graph, feeds []chutney.Feed, outputs ...chutney.Node) [][]float64 {
	t.Helper()
	p := closer(t, must(g.Compile(outputs...)))
	outs := must(p.NewOutputs())
	defer func() {
		for _, o := range outs {
			o.Close()
		}
	}()
	if err := p.Run(feeds, outs...); err != nil {
		t.Fatal(err)
	}
	res := make([][]float64, len(outs))
	for i, o := range outs {
		switch o.DType() {
		case chutney.Float32:
			for _, v := range must(o.Float32s()) {
				res[i] = append(res[i], float64(v))
			}
		case chutney.Bool:
			for _, v := range must(o.Bools()) {
				x := 0.0
				if v {
					x = 1
				}
				res[i] = append(res[i], x)
			}
		default:
			res[i] = must(o.Float64s())
		}
	}
	return res
}

func near(a, b []float64) bool { return nearTol(a, b, 1e-5) }

func nearTol(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol*(1+math.Abs(b[i])) {
			return false
		}
	}
	return true
}

func TestOpsCompute(t *testing.T) {
	g := graph(t)
	a := g.Input("a", chutney.Float32, 2, 2)
	b := g.Input("b", chutney.Float32, 2)
	av := tensor(t, []float32{1, -2, 3, -4}, 2, 2)
	bv := tensor(t, []float32{10, 20}, 2)
	cases := []struct {
		name string
		node chutney.Node
		want []float64
	}{
		{"Add", g.Add(a, b), []float64{11, 18, 13, 16}},
		{"Sub", g.Sub(a, b), []float64{-9, -22, -7, -24}},
		{"Mul", g.Mul(a, b), []float64{10, -40, 30, -80}},
		{"Div", g.Div(a, b), []float64{0.1, -0.1, 0.3, -0.2}},
		{"Neg", g.Neg(a), []float64{-1, 2, -3, 4}},
		{"Abs", g.Abs(a), []float64{1, 2, 3, 4}},
		{"Relu", g.Relu(a), []float64{1, 0, 3, 0}},
		{"LeakyReLU", g.LeakyReLU(a, 0.5), []float64{1, -1, 3, -2}},
		{"Clamp", g.Clamp(a, -1, 2), []float64{1, -1, 2, -1}},
		{"MatMul", g.MatMul(a, a, false, true), []float64{5, 11, 11, 25}},
		{"Sum", g.Sum(a, []int{1}, false), []float64{-1, -1}},
		{"Mean", g.Mean(a, nil, false), []float64{-0.5}},
		{"Max", g.Max(a, []int{0}, true), []float64{3, -2}},
		{"Transpose", g.Transpose(a), []float64{1, 3, -2, -4}},
		{"Permute", g.Permute(a, 1, 0), []float64{1, 3, -2, -4}},
		{"Reshape", g.Reshape(a, 4), []float64{1, -2, 3, -4}},
		{"Slice", g.Slice(a, 1, 1, 2, 1), []float64{-2, -4}},
		{"Concat", g.Concat(0, a, a), []float64{1, -2, 3, -4, 1, -2, 3, -4}},
		{"BroadcastTo", g.BroadcastTo(b, 2, 2), []float64{10, 20, 10, 20}},
		{"Compare", g.Compare("gt", a, g.Scalar(chutney.Float32, 0)), []float64{1, 0, 1, 0}},
		{"Where", g.Where(g.Compare("lt", a, g.Scalar(chutney.Float32, 0)), b, a), []float64{1, 20, 3, 20}},
		{"Exp", g.Exp(g.Scalar(chutney.Float32, 1)), []float64{math.E}},
		{"Log", g.Log(g.Scalar(chutney.Float32, math.E)), []float64{1}},
		{"Sqrt", g.Sqrt(g.Scalar(chutney.Float32, 9)), []float64{3}},
		{"Pow", g.Pow(g.Scalar(chutney.Float32, 2), g.Scalar(chutney.Float32, 10)), []float64{1024}},
		{"Tanh", g.Tanh(g.Scalar(chutney.Float32, 0)), []float64{0}},
		{"Sigmoid", g.Sigmoid(g.Scalar(chutney.Float32, 0)), []float64{0.5}},
		{"Gelu", g.Gelu(g.Scalar(chutney.Float32, 0)), []float64{0}},
		{"Softmax", g.Softmax(g.Reshape(b, 1, 2), 1), []float64{1 / (1 + math.Exp(10)), 1 / (1 + math.Exp(-10))}},
		{"LogSoftmax", g.Sum(g.Exp(g.LogSoftmax(a, 1)), []int{1}, false), []float64{1, 1}},
		{"Cast", g.Cast(g.Cast(a, chutney.Int32), chutney.Float64), []float64{1, -2, 3, -4}},
		{"Op", g.Op("leaky_relu", &chutney.Attrs{Floats: []float64{0.25}}, a), []float64{1, -0.5, 3, -1}},
	}
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	feeds := []chutney.Feed{{Node: a, Value: av}, {Node: b, Value: bv}}
	for _, c := range cases {
		got := run(t, g, feeds, c.node)[0]
		if !near(got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	// Cross-entropy of uniform logits over 4 classes is log 4.
	logits := g.Input("logits", chutney.Float32, 3, 4)
	labels := g.Input("labels", chutney.Int64, 3)
	ce := g.CrossEntropy(logits, labels)
	got := run(t, g, []chutney.Feed{{Node: logits, Value: tensor(t, make([]float32, 12), 3, 4)},
		{Node: labels, Value: tensor(t, []int64{0, 3, 1}, 3)}}, ce)[0]
	if !near(got, []float64{math.Log(4)}) {
		t.Errorf("CrossEntropy = %v", got)
	}
	dt, shape, err := g.NodeInfo(ce)
	if err != nil || dt != chutney.Float32 || len(shape) != 0 {
		t.Errorf("NodeInfo(ce) = %v %v %v", dt, shape, err)
	}
	if n := must(g.NodeCount()); n < len(cases) {
		t.Errorf("NodeCount = %d", n)
	}
	if dot := must(g.Dot()); !strings.Contains(dot, "digraph") || !strings.Contains(dot, "matmul") {
		t.Errorf("Dot: %.80s", dot)
	}
}

func TestNNOps(t *testing.T) {
	g := graph(t)
	x := g.Input("x", chutney.Float32, 1, 1, 4, 4)
	w := g.Constant(tensor(t, []float32{1, 1, 1, 1}, 1, 1, 2, 2))
	conv := g.Conv2D(x, w, chutney.Conv{StrideH: 2, StrideW: 2})
	pool := g.MaxPool2D(x, chutney.Pool{KernelH: 2, KernelW: 2})
	avg := g.AvgPool2D(x, chutney.Pool{KernelH: 2, KernelW: 2}, true)
	up := g.ConvTranspose2D(g.Reshape(g.Scalar(chutney.Float32, 1), 1, 1, 1, 1), w, chutney.Conv{}, 0, 0)
	one := g.Constant(tensor(t, []float32{1}, 1))
	zero := g.Constant(tensor(t, []float32{0}, 1))
	bn := g.BatchNorm(x, one, zero, 0)
	bni := g.BatchNormInference(x, one, zero, zero, one, 0)
	ln := g.LayerNorm(g.Reshape(x, 4, 4), g.Constant(tensor(t, []float32{1, 1, 1, 1}, 4)),
		g.Constant(tensor(t, []float32{0, 0, 0, 0}, 4)), -1, 0)
	step := g.Constant(tensor(t, []int64{1}))
	drop := g.Dropout(x, step, 0, 7)
	emb := g.Embedding(g.Reshape(x, 16, 1), g.Constant(tensor(t, []int32{3, 0}, 2)))
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	xs := make([]float32, 16)
	for i := range xs {
		xs[i] = float32(i)
	}
	r := run(t, g, []chutney.Feed{{Node: x, Value: tensor(t, xs, 1, 1, 4, 4)}}, conv, pool, avg, up, bn, bni, ln, drop, emb)
	want := [][]float64{{10, 18, 42, 50}, {5, 7, 13, 15}, {2.5, 4.5, 10.5, 12.5}, {1, 1, 1, 1}}
	for i, w := range want {
		if !near(r[i], w) {
			t.Errorf("output %d = %v, want %v", i, r[i], w)
		}
	}
	if mean := r[4][0] + r[4][15]; math.Abs(mean) > 1e-5 {
		t.Errorf("batch norm is not centred: %v", r[4])
	}
	if !near(r[5], r[7]) {
		t.Errorf("batch norm with unit statistics %v, x %v", r[5], r[7])
	}
	if math.Abs(r[6][0]+r[6][3]) > 1e-5 {
		t.Errorf("layer norm %v", r[6])
	}
	if !near(r[8], []float64{3, 0}) {
		t.Errorf("embedding %v", r[8])
	}
}

func TestReadmeExampleTrains(t *testing.T) {
	g := graph(t)
	x := g.Input("x", chutney.Float32, 4, 3)
	tt := g.Input("t", chutney.Float32, 4, 1)
	w := g.Variable("w", tensor(t, []float32{0, 0, 0}, 3, 1))
	d := g.Sub(g.MatMul(x, w, false, false), tt)
	loss := g.Mean(g.Mul(d, d), nil, false)
	dw := g.Grad(loss, w)[0]
	g.Assign(w, g.Sub(w, g.Mul(dw, g.Scalar(chutney.Float32, 0.1))))
	p := closer(t, must(g.Compile(loss)))
	lv := closer(t, must(p.NewOutput(0)))
	feeds := []chutney.Feed{{Node: x, Value: tensor(t, []float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, 4, 3)},
		{Node: tt, Value: tensor(t, []float32{1, 2, 3, 6}, 4, 1)}}
	var first, last float64
	for i := 0; i < 200; i++ {
		if err := p.Run(feeds, lv); err != nil {
			t.Fatal(err)
		}
		last = must(lv.Item())
		if i == 0 {
			first = last
		}
	}
	if first != 12.5 || last > first/100 {
		t.Fatalf("loss %g -> %g", first, last)
	}
	wv := must(p.ReadVariable(w))
	defer wv.Close()
	if !nearTol(toF64(must(wv.Float32s())), []float64{1, 2, 3}, 1e-3) {
		t.Fatalf("w = %v", must(wv.Float32s()))
	}
	if err := p.WriteVariable(w, tensor(t, []float32{0, 0, 0}, 3, 1)); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(feeds, lv); err != nil || must(lv.Item()) != 12.5 {
		t.Fatalf("after resetting w: loss %v, %v", must(lv.Item()), err)
	}
}

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func TestEagerGraph(t *testing.T) {
	g := closer(t, must(ctx.NewEagerGraph()))
	if !g.Eager() {
		t.Fatal("not eager")
	}
	a := g.Constant(tensor(t, []float32{1, 2, 3}, 3))
	y := g.Sum(g.Mul(a, a), nil, false)
	v := closer(t, must(g.Value(y)))
	if got := must(v.Item()); got != 14 {
		t.Fatalf("eager sum of squares = %v", got)
	}
	if b := must(g.NodeBackend(y)); b != "cpu" {
		t.Fatalf("eager node ran on %q, want cpu", b)
	}
	if b := must(g.NodeBackend(a)); b != "" {
		t.Fatalf("a leaf reports backend %q", b)
	}
	da := g.Grad(y, a)[0]
	dv := closer(t, must(g.Value(da)))
	if got := must(dv.Float32s()); !reflect.DeepEqual(got, []float32{2, 4, 6}) {
		t.Fatalf("eager gradient %v", got)
	}
	// An eager error is reported by the call that caused it.
	g.MatMul(a, a, false, false)
	wantErr(t, g.Err(), chutney.ErrShape)
}

func TestStickyBuildErrors(t *testing.T) {
	g := graph(t)
	a := g.Input("a", chutney.Float32, 2, 3)
	bad := g.MatMul(a, a, false, false) // [2,3] @ [2,3]
	if bad.Valid() {
		t.Fatal("failed MatMul gave a valid node")
	}
	count := must(g.NodeCount())
	later := g.Relu(a) // skipped: the graph holds an error
	if later.Valid() || must(g.NodeCount()) != count {
		t.Fatal("a building call after a failure ran")
	}
	_, err := g.Compile(a)
	if e := wantErr(t, err, chutney.ErrShape); !strings.Contains(e.Msg, "matmul") {
		t.Fatalf("Compile returned %v", err)
	}
	wantErr(t, g.ClearErr(), chutney.ErrShape)
	if g.Err() != nil {
		t.Fatal("ClearErr kept the error")
	}
	if n := g.Relu(a); !n.Valid() {
		t.Fatalf("building after ClearErr: %v", g.Err())
	}

	// Inputs that are not nodes of this graph.
	other := graph(t)
	o := other.Input("o", chutney.Float32, 2, 3)
	g.Add(a, o)
	if e := wantErr(t, g.ClearErr(), chutney.ErrInvalidArgument); !strings.Contains(e.Msg, "another graph") {
		t.Fatal(e)
	}
	g.Add(a, chutney.Node{})
	wantErr(t, g.ClearErr(), chutney.ErrInvalidArgument)
	_, err = g.Compile(o)
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, _, err = g.NodeInfo(o)
	wantErr(t, err, chutney.ErrInvalidArgument)

	// Bad arguments of every kind are errors, never crashes.
	for name, build := range map[string]func() chutney.Node{
		"unknown op":       func() chutney.Node { return g.Op("no_such_op", nil, a) },
		"op name with NUL": func() chutney.Node { return g.Op("relu\x00", nil, a) },
		"too many attrs":   func() chutney.Node { return g.Op("relu", &chutney.Attrs{Floats: make([]float64, 5)}, a) },
		"bad dtype":        func() chutney.Node { return g.Input("x", chutney.DType(77), 2) },
		"too many dims":    func() chutney.Node { return g.Input("x", chutney.Float32, 1, 1, 1, 1, 1, 1, 1, 1, 1) },
		"negative dim":     func() chutney.Node { return g.Input("x", chutney.Float32, -3) },
		"reshape":          func() chutney.Node { return g.Reshape(a, 7) },
		"permute length":   func() chutney.Node { return g.Permute(a, 0) },
		"permute repeat":   func() chutney.Node { return g.Permute(a, 0, 0) },
		"axis":             func() chutney.Node { return g.Softmax(a, 9) },
		"huge axis":        func() chutney.Node { return g.Sum(a, []int{1 << 40}, false) },
		"compare op":       func() chutney.Node { return g.Compare("approx", a, a) },
		"where cond dtype": func() chutney.Node { return g.Where(a, a, a) },
		"cross entropy":    func() chutney.Node { return g.CrossEntropy(a, a) },
		"concat none":      func() chutney.Node { return g.Concat(0) },
		"conv rank":        func() chutney.Node { return g.Conv2D(a, a, chutney.Conv{}) },
		"pool kernel":      func() chutney.Node { return g.MaxPool2D(a, chutney.Pool{}) },
		"nil variable":     func() chutney.Node { return g.Variable("v", nil) },
		"nil constant":     func() chutney.Node { return g.Constant(nil) },
		"assign constant":  func() chutney.Node { return g.Assign(a, a) },
		"grad of non-scalar": func() chutney.Node {
			return g.Grad(a, a)[0]
		},
	} {
		if n := build(); n.Valid() {
			t.Errorf("%s: got a valid node", name)
		}
		var e *chutney.Error
		if err := g.ClearErr(); err == nil {
			t.Errorf("%s: no error recorded", name)
		} else if !asError(err, &e) {
			t.Errorf("%s: %T", name, err)
		}
	}
	var nilG *chutney.Graph
	if n := nilG.Relu(a); n.Valid() {
		t.Fatal("nil graph built a node")
	}
	wantErr(t, nilG.Err(), chutney.ErrInvalidArgument)
	_, err = nilG.Compile()
	wantErr(t, err, chutney.ErrInvalidArgument)
}
