package chutney_test

import (
	"math"
	"path/filepath"
	"reflect"
	"testing"

	"chutney/bindings/go/chutney"
)

// The ABI 1.6 integer dtypes: int16, uint16, uint32 and uint64 slices make Int16, Uint16, Uint32
// and Uint64 tensors and come back unchanged (extremes included), Item converts them, a
// comparison reads them as unsigned on the CPU, a cast keeps the low bits (arithmetic is
// float-only in the graph, as for Int32), and a checkpoint keeps dtypes and values.
func TestIntegerDTypes(t *testing.T) {
	i16 := tensor(t, []int16{math.MinInt16, -1, 0, math.MaxInt16}, 4)
	u16 := tensor(t, []uint16{0, 1, 40000, math.MaxUint16}, 4)
	u32 := tensor(t, []uint32{0, 1, 3000000000, math.MaxUint32}, 4)
	u64 := tensor(t, []uint64{0, 1, 1 << 63, math.MaxUint64}, 4)
	for _, c := range []struct {
		x    *chutney.Tensor
		dt   chutney.DType
		name string
		size int
	}{{i16, chutney.Int16, "i16", 2}, {u16, chutney.Uint16, "u16", 2}, {u32, chutney.Uint32, "u32", 4},
		{u64, chutney.Uint64, "u64", 8}} {
		if c.x.DType() != c.dt || c.dt.String() != c.name || c.dt.Size() != c.size {
			t.Fatalf("%s: dtype %v (%q, %d bytes)", c.name, c.x.DType(), c.dt.String(), c.dt.Size())
		}
	}
	if got := must(i16.Int16s()); !reflect.DeepEqual(got, []int16{math.MinInt16, -1, 0, math.MaxInt16}) {
		t.Fatalf("Int16s %v", got)
	}
	if got := must(u64.Uint64s()); !reflect.DeepEqual(got, []uint64{0, 1, 1 << 63, math.MaxUint64}) {
		t.Fatalf("Uint64s %v", got)
	}
	if v := must(closer(t, must(chutney.NewTensor([]uint32{math.MaxUint32}))).Item()); v != math.MaxUint32 {
		t.Fatalf("Item of uint32 max = %v", v)
	}
	if _, err := u16.Int16s(); err == nil {
		t.Fatal("Int16s of a Uint16 tensor must fail (no silent conversion)")
	}

	g := graph(t)
	a := g.Input("a", chutney.Uint16, 4)
	b := g.Input("b", chutney.Uint16, 4)
	x := g.Input("x", chutney.Uint32, 4)
	p := closer(t, must(g.Compile(g.Compare("lt", a, b), g.Cast(x, chutney.Int16))))
	outs := must(p.NewOutputs())
	defer func() {
		for _, o := range outs {
			o.Close()
		}
	}()
	two := tensor(t, []uint16{2, 65535, 25536, 1}, 4)
	if err := p.Run([]chutney.Feed{{Node: a, Value: u16}, {Node: b, Value: two}, {Node: x, Value: u32}}, outs...); err != nil {
		t.Fatal(err)
	}
	if got := must(outs[0].Bools()); !reflect.DeepEqual(got, []bool{true, true, false, false}) { // 65535 < 1 is false
		t.Fatalf("uint16 lt %v", got)
	}
	if got := must(outs[1].Int16s()); !reflect.DeepEqual(got, []int16{0, 1, 24064, -1}) { // the low 16 bits
		t.Fatalf("uint32 -> int16 cast %v", got)
	}

	path := filepath.Join(t.TempDir(), "ints.safetensors")
	if err := chutney.SaveCheckpoint(path, []chutney.NamedTensor{{Name: "s", Tensor: i16}, {Name: "w", Tensor: u32},
		{Name: "l", Tensor: u64}}, nil); err != nil {
		t.Fatal(err)
	}
	ck := closer(t, must(chutney.LoadCheckpoint(path)))
	if got := must(closer(t, must(ck.Tensor("l"))).Uint64s()); !reflect.DeepEqual(got, []uint64{0, 1, 1 << 63, math.MaxUint64}) {
		t.Fatalf("checkpoint uint64 %v", got)
	}
	if got := must(closer(t, must(ck.Tensor("w"))).Uint32s()); !reflect.DeepEqual(got, []uint32{0, 1, 3000000000, math.MaxUint32}) {
		t.Fatalf("checkpoint uint32 %v", got)
	}
	if dt := closer(t, must(ck.Tensor("s"))).DType(); dt != chutney.Int16 {
		t.Fatalf("checkpoint int16 came back as %v", dt)
	}
}
