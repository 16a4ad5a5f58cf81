package chutney_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"chutney/bindings/go/chutney"
)

// An ONNX model exported by the binding loads back through LoadONNX and computes bit for bit
// what the original graph computes; the model handle names its inputs, outputs, initializers
// and op types.
func TestLoadONNXRoundTrip(t *testing.T) {
	dir := t.TempDir()
	g := graph(t)
	x := g.Input("x", chutney.Float32, 2, 3)
	w := g.Variable("w", tensor(t, []float32{0.1, -2, 0.5, 3.25, -1, 2}, 3, 2))
	b := g.Variable("b", tensor(t, []float32{0.3, -0.7}, 2))
	y := g.Tanh(g.Add(g.Relu(g.MatMul(x, w, false, false)), b))
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	xv := tensor(t, []float32{1, 2, 3, -4, 5.5, 6}, 2, 3)
	want := runOne(t, g, x, y, xv)
	path := filepath.Join(dir, "m.onnx")
	if err := g.ExportONNX(path, nil, []chutney.NamedNode{{Name: "y", Node: y}}); err != nil {
		t.Fatal(err)
	}

	g2, m, err := ctx.LoadONNX(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	closer(t, g2)
	closer(t, m)
	ins, outs, inits := must(m.Inputs()), must(m.Outputs()), must(m.Initializers())
	if len(ins) != 1 || ins[0].Name != "x" || !ins[0].Node.Valid() || len(outs) != 1 || outs[0].Name != "y" ||
		!outs[0].Node.Valid() || len(inits) != 2 {
		t.Fatalf("inputs %v outputs %v initializers %v", ins, outs, inits)
	}
	names := map[string]bool{}
	for _, i := range inits {
		names[i.Name] = i.Node.Valid()
	}
	if !reflect.DeepEqual(names, map[string]bool{"w": true, "b": true}) {
		t.Fatalf("initializers %v", inits)
	}
	got := runOne(t, g2, ins[0].Node, outs[0].Node, xv)
	if !bitsEqual(got, want) {
		t.Fatalf("imported model gives %v, the graph %v", got, want)
	}
	ops := map[string]chutney.ONNXOpType{}
	for _, op := range must(m.OpTypes()) {
		ops[op.Name] = op
	}
	for _, name := range []string{"MatMul", "Relu", "Add", "Tanh"} {
		if op, ok := ops[name]; !ok || op.Uses != 1 || !op.Supported || len(op.LoweredTo) == 0 {
			t.Errorf("op type %s: %+v (all: %v)", name, op, ops)
		}
	}
	opset, ir, err := m.Version()
	if err != nil || opset != 13 || ir != 7 {
		t.Fatalf("version: opset %d ir %d %v", opset, ir, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Inputs(); !errors.Is(err, chutney.ErrClosed) {
		t.Fatalf("closed model: %v", err)
	}

	// x bound as a constant: no input node, and the output needs no feed.
	g3, m3, err := ctx.LoadONNX(path, &chutney.ONNXOptions{
		Inputs:                  map[string]chutney.ONNXInput{"x": {Value: xv, AsConstant: true}},
		InitializersAsConstants: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	closer(t, g3)
	closer(t, m3)
	if ins := must(m3.Inputs()); len(ins) != 1 || ins[0].Node.Valid() {
		t.Fatalf("inputs with x constant: %v", ins)
	}
	p := closer(t, must(g3.Compile(must(m3.Outputs())[0].Node)))
	o := closer(t, must(p.NewOutput(0)))
	if err := p.Run(nil, o); err != nil {
		t.Fatal(err)
	}
	if got := must(o.Float32s()); !bitsEqual(got, want) {
		t.Fatalf("constant x gives %v, want %v", got, want)
	}

	// Inspect only: no graph, the listing without nodes.
	g4, m4, err := ctx.LoadONNX(path, &chutney.ONNXOptions{InspectOnly: true})
	if err != nil || g4 != nil {
		t.Fatalf("inspect: graph %v, %v", g4, err)
	}
	closer(t, m4)
	if outs := must(m4.Outputs()); len(outs) != 1 || outs[0].Name != "y" || outs[0].Node.Valid() {
		t.Fatalf("inspect outputs %v", outs)
	}
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestLoadONNXErrors(t *testing.T) {
	dir := t.TempDir()
	g := graph(t)
	x := g.Input("x", chutney.Float32, 2)
	path := filepath.Join(dir, "relu.onnx")
	if err := g.ExportONNX(path, nil, []chutney.NamedNode{{Name: "y", Node: g.Relu(x)}}); err != nil {
		t.Fatal(err)
	}
	v := tensor(t, []float32{1, 2}, 2)
	_, _, err := ctx.LoadONNX(path, &chutney.ONNXOptions{Inputs: map[string]chutney.ONNXInput{"nope": {Value: v}}})
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, _, err = ctx.LoadONNX(path, &chutney.ONNXOptions{Inputs: map[string]chutney.ONNXInput{"x": {}}})
	wantErr(t, err, chutney.ErrInvalidArgument)
	junk := filepath.Join(dir, "junk.onnx")
	if err := os.WriteFile(junk, []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = ctx.LoadONNX(junk, nil)
	wantErr(t, err, chutney.ErrCorrupt)
	_, _, err = ctx.LoadONNX(filepath.Join(dir, "missing.onnx"), nil)
	wantErr(t, err, chutney.ErrIO)
}

// A TensorProto written by hand: dims 2x2, FLOAT, name "t", raw_data.
func TestLoadONNXTensor(t *testing.T) {
	vals := []float32{1.5, -2, 0, 1e-3}
	var pb []byte
	pb = append(pb, 0x08, 2, 0x08, 2) // dims: 2, 2
	pb = append(pb, 0x10, 1)          // data_type: FLOAT
	pb = append(pb, 0x42, 1, 't')     // name
	pb = append(pb, 0x4a, 16)         // raw_data, 16 bytes
	for _, f := range vals {
		pb = binary.LittleEndian.AppendUint32(pb, math.Float32bits(f))
	}
	path := filepath.Join(t.TempDir(), "input_0.pb")
	if err := os.WriteFile(path, pb, 0o644); err != nil {
		t.Fatal(err)
	}
	tv, name, err := chutney.LoadONNXTensor(path)
	if err != nil {
		t.Fatal(err)
	}
	closer(t, tv)
	if name != "t" || !reflect.DeepEqual(tv.Shape(), []int64{2, 2}) || tv.DType() != chutney.Float32 ||
		!reflect.DeepEqual(must(tv.Float32s()), vals) {
		t.Fatalf("tensor %q %v %v", name, tv.Shape(), must(tv.Float32s()))
	}
	// raw_data shorter than the shape needs.
	if err := os.WriteFile(path, pb[:len(pb)-4], 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = chutney.LoadONNXTensor(path)
	wantErr(t, err, chutney.ErrCorrupt)
}

// npyFloat32s reads the first little-endian float32 array of a .npy file or a stored .npz
// (the committed files of tests/onnx/models): its shape and values.
func npyFloat32s(t *testing.T, path string) ([]int64, []float32) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("\x93NUMPY\x01\x00"))
	if i < 0 {
		t.Fatalf("%s: no version 1 .npy array", path)
	}
	hlen := int(binary.LittleEndian.Uint16(b[i+8:]))
	header := string(b[i+10 : i+10+hlen])
	m := regexp.MustCompile(`'descr': '<f4', 'fortran_order': False, 'shape': \(([0-9, ]*)\)`).FindStringSubmatch(header)
	if m == nil {
		t.Fatalf("%s: header %q is not a C-order float32 array", path, header)
	}
	var shape []int64
	n := 1
	for _, f := range strings.Split(m[1], ",") {
		if f = strings.TrimSpace(f); f != "" {
			d, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			shape = append(shape, int64(d))
			n *= d
		}
	}
	data := b[i+10+hlen:]
	vals := make([]float32, n)
	for k := range vals {
		vals[k] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*k:]))
	}
	return shape, vals
}

// A model exported from PyTorch (tests/onnx/models/mlp.onnx) gives onnxruntime's outputs.
func TestLoadONNXTorchMLP(t *testing.T) {
	models := filepath.Join("..", "..", "..", "tests", "onnx", "models")
	if _, err := os.Stat(filepath.Join(models, "mlp.onnx")); err != nil {
		t.Skip("tests/onnx/models is not in this tree (an installed package)")
	}
	shape, in := npyFloat32s(t, filepath.Join(models, "mlp.in.npz"))
	_, want := npyFloat32s(t, filepath.Join(models, "mlp.ort.npy"))
	g, m, err := ctx.LoadONNX(filepath.Join(models, "mlp.onnx"), nil)
	if err != nil {
		t.Fatal(err)
	}
	closer(t, g)
	closer(t, m)
	ins, outs := must(m.Inputs()), must(m.Outputs())
	if len(ins) != 1 || len(outs) != 1 || len(must(m.Initializers())) == 0 {
		t.Fatalf("inputs %v outputs %v", ins, outs)
	}
	got := runOne(t, g, ins[0].Node, outs[0].Node, tensor(t, in, shape...))
	if len(got) != len(want) {
		t.Fatalf("%d outputs, want %d", len(got), len(want))
	}
	for k := range got {
		if d := math.Abs(float64(got[k] - want[k])); d > 1e-5+1e-3*math.Abs(float64(want[k])) {
			t.Fatalf("output %d: %g, onnxruntime %g", k, got[k], want[k])
		}
	}
}
