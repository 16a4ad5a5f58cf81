package chutney_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"chutney/bindings/go/chutney"
)

// A small model learns y = 2x - 1 with Adam through the layer library.
func TestModelTrains(t *testing.T) {
	g := graph(t)
	m := closer(t, must(g.NewModel(chutney.Float32, 7)))
	x := g.Input("x", chutney.Float32, 8, 1)
	yt := g.Input("y", chutney.Float32, 8, 1)
	if err := m.NameNext("hidden"); err != nil {
		t.Fatal(err)
	}
	h := m.Sequential(x, chutney.LinearLayer(16), chutney.TanhLayer(), chutney.Layer{Kind: chutney.LayerLinear, Units: 1, Name: "out"})
	d := g.Sub(h, yt)
	loss := g.Mean(g.Mul(d, d), nil, false)
	norm := m.Minimize(loss, chutney.Optimizer{Kind: chutney.OptimAdam, LR: 0.05})
	p := closer(t, must(g.Compile(loss, norm)))
	xs, ys := make([]float32, 8), make([]float32, 8)
	for i := range xs {
		xs[i] = float32(i)/4 - 1
		ys[i] = 2*xs[i] - 1
	}
	feeds := []chutney.Feed{{Node: x, Value: tensor(t, xs, 8, 1)}, {Node: yt, Value: tensor(t, ys, 8, 1)}}
	lv, nv := closer(t, must(p.NewOutput(0))), closer(t, must(p.NewOutput(1)))
	var first, last float64
	for step := int64(1); step <= 300; step++ {
		if err := m.SetStep(step); err != nil {
			t.Fatal(err)
		}
		if err := m.Run(p, feeds, lv, nv); err != nil {
			t.Fatal(err)
		}
		last = must(lv.Item())
		if step == 1 {
			first = last
			if must(nv.Item()) <= 0 {
				t.Fatal("zero gradient norm")
			}
		}
	}
	if !(last < first/50) {
		t.Fatalf("loss %g -> %g", first, last)
	}
	vars := must(m.Variables(chutney.VarParameter))
	var names []string
	for _, v := range vars {
		names = append(names, v.Name)
	}
	if !reflect.DeepEqual(names, []string{"hidden.weight", "hidden.bias", "out.weight", "out.bias"}) {
		t.Fatalf("parameters %v", names)
	}
	all := must(m.Variables(chutney.VarAll))
	if len(all) != 12 || !strings.HasSuffix(all[len(all)-1].Name, ".adam_v") {
		t.Fatalf("variables %v", all)
	}

	// An inference twin gets the trained weights by name.
	g2 := graph(t)
	m2 := closer(t, must(g2.NewModel(chutney.Float32, 7)))
	if err := m2.SetTraining(false); err != nil {
		t.Fatal(err)
	}
	x2 := g2.Input("x", chutney.Float32, 8, 1)
	m2.NameNext("hidden")
	h2 := m2.Sequential(x2, chutney.LinearLayer(16), chutney.TanhLayer(), chutney.Layer{Kind: chutney.LayerLinear, Units: 1, Name: "out"})
	p2 := closer(t, must(g2.Compile(h2)))
	n := must(chutney.CopyState(m, p, m2, p2))
	if n != 4 {
		t.Fatalf("copied %d variables", n)
	}
	// One plan as source and destination is locked once (a second lock would deadlock).
	if n, err := chutney.CopyState(m2, p2, m2, p2); err != nil || n != 4 {
		t.Fatalf("CopyState onto itself: %d, %v", n, err)
	}
	out := closer(t, must(p2.NewOutput(0)))
	if err := p2.Run([]chutney.Feed{{Node: x2, Value: feeds[0].Value}}, out); err != nil {
		t.Fatal(err)
	}
	if !nearTol(toF64(must(out.Float32s())), toF64(ys), 0.05) {
		t.Fatalf("eval twin %v, want %v", must(out.Float32s()), ys)
	}
}

func TestLayersAndOptimizers(t *testing.T) {
	g := graph(t)
	m := closer(t, must(g.NewModel(chutney.Float32, 3)))
	if err := m.SetInit(chutney.InitXavierUniform, 0); err != nil {
		t.Fatal(err)
	}
	img := g.Input("img", chutney.Float32, 2, 1, 8, 8)
	c := m.Conv2D(img, 1, 4, 3, 1, 1)
	c = m.BatchNorm(c, 4, 0, 0)
	c = m.MaxPool2D(m.ReLU(c), 2, 0)
	f := m.Flatten(c)
	f = m.Dropout(m.LayerNorm(f, 64, 0), 0.1)
	ids := g.Input("ids", chutney.Int32, 5, 2)
	emb := m.Embedding(ids, 10, 3)
	seq, last := m.LSTM(emb, 6)
	v := m.Variable("extra", chutney.VarParameter, []int64{2}, chutney.InitOnes, 0, 0, 0)
	step, lr := m.Step(), m.LR()
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n    chutney.Node
		want []int64
	}{{f, []int64{2, 64}}, {emb, []int64{5, 2, 3}}, {seq, []int64{5, 2, 6}}, {last, []int64{2, 6}},
		{v, []int64{2}}, {step, []int64{}}, {lr, []int64{}}} {
		if s := c.n.Shape(); !reflect.DeepEqual(s, c.want) && !(len(s) == 0 && len(c.want) == 0) {
			t.Errorf("shape %v, want %v", s, c.want)
		}
	}
	params := must(m.Variables(chutney.VarParameter))
	loss := g.Add(g.Mean(f, nil, false), g.Mean(last, nil, false))
	loss = g.Add(loss, g.Mean(v, nil, false))
	wrt := make([]chutney.Node, len(params))
	for i, p := range params {
		wrt[i] = p.Node
	}
	grads := g.Grad(loss, wrt...)
	clipped, norm := m.ClipGradNorm(grads, 1)
	m.SGD(clipped, 0.9, true, 1e-4)
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	if len(clipped) != len(grads) || !norm.Valid() {
		t.Fatal("ClipGradNorm results")
	}
	if n := len(must(m.Variables(chutney.VarOptimizer))); n != len(params) {
		t.Fatalf("%d momentum buffers for %d parameters", n, len(params))
	}
	if err := m.ResetNames(); err != nil {
		t.Fatal(err)
	}
	// Adam and AdamW on a second model.
	g2 := graph(t)
	for _, adamw := range []bool{false, true} {
		m2 := closer(t, must(g2.NewModel(chutney.Float64, 1)))
		x := g2.Input("", chutney.Float64, 1, 2)
		l := g2.Sum(m2.Linear(x, 2, 1, false), nil, false)
		ps := must(m2.Variables(chutney.VarParameter))
		gr := g2.Grad(l, ps[0].Node)
		if adamw {
			m2.AdamW(gr, 0.9, 0.999, 1e-8, 0.01)
		} else {
			m2.Adam(gr, 0, 0, 0, 0)
		}
	}
	if err := g2.Err(); err != nil {
		t.Fatal(err)
	}

	// Layer errors name the layer and keep the graph's status.
	m.Linear(f, 63, 2, true)
	if e := wantErr(t, g.ClearErr(), chutney.ErrShape); !strings.Contains(e.Msg, "linear") {
		t.Fatalf("layer error %v", e)
	}
	m.Sequential(f, chutney.Layer{Kind: chutney.LayerKind(99)})
	wantErr(t, g.ClearErr(), chutney.ErrInvalidArgument)
	m.Sequential(f, chutney.Layer{Kind: chutney.LayerLinear, Units: 2, Name: "bad\x00name"})
	wantErr(t, g.ClearErr(), chutney.ErrInvalidArgument)
	m.Minimize(f, chutney.Optimizer{}) // f is not a scalar loss
	if g.ClearErr() == nil {
		t.Fatal("Minimize of a non-scalar")
	}
	wantErr(t, m.SetStep(0), chutney.ErrInvalidArgument)
	wantErr(t, m.NameNext("a\x00"), chutney.ErrInvalidArgument)
	var nilM *chutney.Model
	wantErr(t, nilM.SetLR(1), chutney.ErrInvalidArgument)
	if nilM.Linear(f, 1, 1, true).Valid() {
		t.Fatal("nil model built a layer")
	}
	_, err := chutney.CopyState(m, nil, nilM, nil)
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, err = g.NewModel(chutney.Int32, 1)
	wantErr(t, err, chutney.ErrDType)
}

func TestInitAndSchedules(t *testing.T) {
	a := tensor(t, make([]float32, 1000), 1000)
	b := tensor(t, make([]float32, 1000), 1000)
	for _, x := range []*chutney.Tensor{a, b} {
		if err := chutney.InitFill(x, chutney.InitNormal, 0, 0, 2, 99); err != nil {
			t.Fatal(err)
		}
	}
	va, vb := must(a.Float32s()), must(b.Float32s())
	if !reflect.DeepEqual(va, vb) {
		t.Fatal("InitFill is not deterministic")
	}
	var sum, sq float64
	for _, v := range va {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	if sd := math.Sqrt(sq / 1000); sd < 1.8 || sd > 2.2 || math.Abs(sum/1000) > 0.2 {
		t.Fatalf("N(0, 4) sample: mean %g, sd %g", sum/1000, sd)
	}
	wantErr(t, chutney.InitFill(tensor(t, []int32{1}, 1), chutney.InitOnes, 1, 1, 0, 1), chutney.ErrDType)

	s := chutney.LRSchedule{Kind: chutney.LRCosine, BaseLR: 0.1, TotalSteps: 10}
	if lr := must(s.At(1)); lr != 0.1 {
		t.Fatalf("cosine at step 1: %v", lr)
	}
	if lr := must(s.At(6)); math.Abs(lr-0.05) > 1e-12 {
		t.Fatalf("cosine half way: %v", lr)
	}
	st := chutney.LRSchedule{Kind: chutney.LRStep, BaseLR: 1, StepSize: 2, Gamma: 0.5}
	if lr := must(st.At(5)); lr != 0.25 {
		t.Fatalf("step schedule at 5: %v", lr)
	}
	_, err := s.At(0)
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, err = chutney.LRSchedule{Kind: 42, BaseLR: 1}.At(1)
	wantErr(t, err, chutney.ErrInvalidArgument)
}

// A plain graph variable adopted by the model is listed with the model's variables (under its
// own name or a new one), adopting it again is a no-op, and a variable of another dtype or a
// node that is not a variable is refused.
func TestModelAdoptVariable(t *testing.T) {
	g := graph(t)
	w := g.Variable("w", tensor(t, []float32{1, 2, 3}, 3))
	b := g.Variable("b", tensor(t, []float32{0}, 1))
	d := g.Variable("d", tensor(t, []float64{0}, 1))
	m := closer(t, must(g.NewModel(chutney.Float32, 1)))
	if err := m.AdoptVariable(w, chutney.VarParameter, ""); err != nil {
		t.Fatal(err)
	}
	if err := m.AdoptVariable(w, chutney.VarParameter, ""); err != nil {
		t.Fatalf("adopting again: %v", err)
	}
	if err := m.AdoptVariable(b, chutney.VarBuffer, "bias"); err != nil {
		t.Fatal(err)
	}
	params := must(m.Variables(chutney.VarParameter))
	if len(params) != 1 || params[0].Name != "w" || params[0].Node.ID() != w.ID() {
		t.Fatalf("parameters %v", params)
	}
	buffers := must(m.Variables(chutney.VarBuffer))
	if len(buffers) != 1 || buffers[0].Name != "bias" || buffers[0].Node.ID() != b.ID() {
		t.Fatalf("buffers %v", buffers)
	}
	wantErr(t, m.AdoptVariable(d, chutney.VarParameter, ""), chutney.ErrDType)
	wantErr(t, m.AdoptVariable(g.Add(w, w), chutney.VarParameter, "sum"), chutney.ErrInvalidArgument)
}
