package chutney_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"chutney/bindings/go/chutney"
)

func TestCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	w := tensor(t, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	wt := closer(t, must(w.Permute(1, 0))) // a view is written row-major
	ids := tensor(t, []int64{7, 8}, 2)
	flags := tensor(t, []bool{true, false, true}, 3)
	meta := map[string]string{"epoch": "3", "note": "ünïcode"}
	err := chutney.SaveCheckpoint(path, []chutney.NamedTensor{{Name: "w", Tensor: wt}, {Name: "ids", Tensor: ids},
		{Name: "flags", Tensor: flags}}, meta)
	if err != nil {
		t.Fatal(err)
	}
	ck := closer(t, must(chutney.LoadCheckpoint(path)))
	if names := must(ck.Names()); !reflect.DeepEqual(names, []string{"w", "ids", "flags"}) {
		t.Fatalf("names %v", names)
	}
	dt, shape, err := ck.Info("w")
	if err != nil || dt != chutney.Float32 || !reflect.DeepEqual(shape, []int64{3, 2}) {
		t.Fatalf("info %v %v %v", dt, shape, err)
	}
	got := closer(t, must(ck.Tensor("w")))
	if v := must(got.Float32s()); !reflect.DeepEqual(v, []float32{1, 4, 2, 5, 3, 6}) {
		t.Fatalf("w = %v", v)
	}
	if v := must(closer(t, must(ck.Tensor("flags"))).Bools()); !reflect.DeepEqual(v, []bool{true, false, true}) {
		t.Fatalf("flags = %v", v)
	}
	if m := must(ck.Metadata()); !reflect.DeepEqual(m, meta) {
		t.Fatalf("metadata %v", m)
	}
	if v, ok, err := ck.MetadataValue("epoch"); v != "3" || !ok || err != nil {
		t.Fatalf("epoch %q %v %v", v, ok, err)
	}
	if _, ok, err := ck.MetadataValue("missing"); ok || err != nil {
		t.Fatalf("missing key: %v %v", ok, err)
	}
	_, err = ck.Tensor("nope")
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, _, err = ck.Info("nope")
	wantErr(t, err, chutney.ErrInvalidArgument)

	// Bad saves leave nothing behind and say why.
	wantErr(t, chutney.SaveCheckpoint(path, []chutney.NamedTensor{{Name: "a", Tensor: w}, {Name: "a", Tensor: w}}, nil), chutney.ErrInvalidArgument)
	wantErr(t, chutney.SaveCheckpoint(path, []chutney.NamedTensor{{Name: "a", Tensor: nil}}, nil), chutney.ErrInvalidArgument)
	wantErr(t, chutney.SaveCheckpoint(filepath.Join(t.TempDir(), "no", "dir", "x"), []chutney.NamedTensor{{Name: "a", Tensor: w}}, nil), chutney.ErrIO)
	if names := must(closer(t, must(chutney.LoadCheckpoint(path))).Names()); len(names) != 3 {
		t.Fatal("a failed save changed the file")
	}
}

func TestCheckpointCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"short":  []byte("abc"),
		"header": append([]byte{200, 0, 0, 0, 0, 0, 0, 0}, []byte("{")...),
		"json":   append([]byte{2, 0, 0, 0, 0, 0, 0, 0}, []byte("{x")...),
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := chutney.LoadCheckpoint(p)
		wantErr(t, err, chutney.ErrCorrupt)
	}
	_, err := chutney.LoadCheckpoint(filepath.Join(dir, "absent"))
	wantErr(t, err, chutney.ErrIO)
}

func TestPlanVariablesCheckpoint(t *testing.T) {
	g := graph(t)
	m := closer(t, must(g.NewModel(chutney.Float32, 11)))
	x := g.Input("x", chutney.Float32, 1, 4)
	y := m.Linear(x, 4, 2, true)
	p := closer(t, must(g.Compile(y)))
	vars := must(m.Variables(chutney.VarAll))
	path := filepath.Join(t.TempDir(), "vars.safetensors")
	if err := p.SaveVariables(path, vars, map[string]string{"step": "0"}); err != nil {
		t.Fatal(err)
	}
	before := must(closer(t, must(p.ReadVariable(vars[0].Node))).Float32s())
	if err := p.WriteVariable(vars[0].Node, tensor(t, make([]float32, 8), 2, 4)); err != nil {
		t.Fatal(err)
	}
	if err := p.LoadVariables(path, vars); err != nil {
		t.Fatal(err)
	}
	after := must(closer(t, must(p.ReadVariable(vars[0].Node))).Float32s())
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("restored %v, want %v", after, before)
	}
	wrong := []chutney.NamedNode{{Name: "linear1.bias", Node: vars[0].Node}} // [2] into [2, 4]
	wantErr(t, p.LoadVariables(path, wrong), chutney.ErrShape)
	wantErr(t, p.LoadVariables(path, []chutney.NamedNode{{Name: "nope", Node: vars[0].Node}}), chutney.ErrInvalidArgument)
	wantErr(t, p.LoadVariables(path, []chutney.NamedNode{{Name: "x", Node: chutney.Node{}}}), chutney.ErrInvalidArgument)
}
