package chutney_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"chutney/bindings/go/chutney"
)

// runOne compiles out of g, feeds x and returns the output's values.
func runOne(t *testing.T, g *chutney.Graph, x chutney.Node, out chutney.Node, xv *chutney.Tensor) []float32 {
	t.Helper()
	p := closer(t, must(g.Compile(out)))
	o := closer(t, must(p.NewOutput(0)))
	if err := p.Run([]chutney.Feed{{Node: x, Value: xv}}, o); err != nil {
		t.Fatal(err)
	}
	return must(o.Float32s())
}

func TestGraphSaveLoadAndONNXExport(t *testing.T) {
	dir := t.TempDir()
	g := graph(t)
	x := g.Input("x", chutney.Float32, 2, 3)
	w := g.Variable("w", tensor(t, []float32{1, -2, 0.5, 3, -1, 2}, 3, 2))
	y := g.Relu(g.MatMul(x, w, false, false))
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	p := closer(t, must(g.Compile(y)))
	if err := p.WriteVariable(w, tensor(t, []float32{2, 2, 2, 2, 2, 2}, 3, 2)); err != nil {
		t.Fatal(err)
	}
	xv := tensor(t, []float32{1, 2, 3, -4, 5, 6}, 2, 3)
	path := filepath.Join(dir, "m.ctn")
	outs := []chutney.NamedNode{{Name: "y", Node: y}}
	if err := g.Save(path, p, outs, map[string]string{"task": "go"}); err != nil {
		t.Fatal(err)
	}
	g2, saved, err := ctx.LoadGraph(path)
	if err != nil {
		t.Fatal(err)
	}
	closer(t, g2)
	if len(saved.Inputs) != 1 || saved.Inputs[0].Name != "x" || len(saved.Outputs) != 1 || saved.Outputs[0].Name != "y" ||
		len(saved.Variables) != 1 || saved.Variables[0].Name != "w" || !reflect.DeepEqual(saved.Metadata, map[string]string{"task": "go"}) {
		t.Fatalf("saved graph %+v", saved)
	}
	// The plan's value of w (all 2s) was saved: y = relu(x @ 2) = relu(2 * row sums).
	want := []float32{12, 12, 14, 14}
	if got := runOne(t, g2, saved.Inputs[0].Node, saved.Outputs[0].Node, xv); !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded graph gives %v, want %v", got, want)
	}
	onnxPath := filepath.Join(dir, "m.onnx")
	if err := g2.ExportONNX(onnxPath, nil, saved.Outputs); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(onnxPath); err != nil || st.Size() < 50 {
		t.Fatalf("onnx file: %v %v", st, err)
	}
	// Errors: an op without an ONNX form, a corrupt file.
	gl := g.Gelu(x)
	err = g.ExportONNX(filepath.Join(dir, "bad.onnx"), nil, []chutney.NamedNode{{Name: "g", Node: gl}})
	if e := wantErr(t, err, chutney.ErrUnsupported); !strings.Contains(e.Error(), "gelu") {
		t.Fatalf("error %v does not name gelu", e)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.ctn"), []byte("not a graph file"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = ctx.LoadGraph(filepath.Join(dir, "junk.ctn"))
	wantErr(t, err, chutney.ErrCorrupt)
}
