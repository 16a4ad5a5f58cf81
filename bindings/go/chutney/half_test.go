package chutney_test

import (
	"math"
	"path/filepath"
	"reflect"
	"testing"

	"chutney/bindings/go/chutney"
)

// Values whose conversions PyTorch 2.15 gives (torch.tensor(v, dtype=torch.float32).to(dt)):
// rounding, overflow of f16 to inf (65520), underflow (1e-8), the bf16 tie 1 + 2^-8 going to
// the even 1, the f16 tie 2049 going to 2048.
func TestHalfConversionsMatchPyTorch(t *testing.T) {
	in := []float32{1, 0.1, 65520, -2.5, 1e-8, 1.00390625, 2049, float32(math.Inf(-1))}
	f16 := []uint16{0x3c00, 0x2e66, 0x7c00, 0xc100, 0x0000, 0x3c04, 0x6800, 0xfc00}
	bf16 := []uint16{0x3f80, 0x3dcd, 0x4780, 0xc020, 0x322c, 0x3f80, 0x4500, 0xff80}
	for i, v := range in {
		if got := chutney.Float32ToF16(v); got != f16[i] {
			t.Errorf("Float32ToF16(%v) = %#04x, want %#04x", v, got, f16[i])
		}
		if got := chutney.Float32ToBF16(v); got != bf16[i] {
			t.Errorf("Float32ToBF16(%v) = %#04x, want %#04x", v, got, bf16[i])
		}
	}
	for _, c := range []struct {
		h    uint16
		want float32
	}{{0x0001, 5.9604645e-08}, {0x03ff, 6.0975552e-05}, {0x0400, 6.1035156e-05}, {0x7bff, 65504}, {0x8000, float32(math.Copysign(0, -1))}} {
		if got := chutney.F16ToFloat32(c.h); got != c.want || math.Signbit(float64(got)) != math.Signbit(float64(c.want)) {
			t.Errorf("F16ToFloat32(%#04x) = %v, want %v", c.h, got, c.want)
		}
	}
	if v := chutney.F16ToFloat32(chutney.Float32ToF16(float32(math.NaN()))); !math.IsNaN(float64(v)) {
		t.Errorf("f16 NaN round trip gave %v", v)
	}
	if v := chutney.BF16ToFloat32(chutney.Float32ToBF16(math.Float32frombits(0x7f800001))); !math.IsNaN(float64(v)) {
		t.Errorf("a NaN with only a low payload bit must stay a NaN in bf16, got %v", v)
	}
}

// Every one of the 65,536 bit patterns: a finite value converts back to itself, the midpoint
// of two neighbours goes to the one with an even mantissa, and anything nearer one neighbour
// goes to it.
func TestHalfConversionsExhaustiveRoundToNearestEven(t *testing.T) {
	type pair struct {
		name string
		to   func(float32) uint16
		from func(uint16) float32
	}
	for _, p := range []pair{{"f16", chutney.Float32ToF16, chutney.F16ToFloat32}, {"bf16", chutney.Float32ToBF16, chutney.BF16ToFloat32}} {
		bad := 0
		for h := 0; h < 0x10000; h++ {
			v := p.from(uint16(h))
			if math.IsNaN(float64(v)) {
				if !math.IsNaN(float64(p.from(p.to(v)))) {
					bad++
				}
				continue
			}
			if got := p.to(v); got != uint16(h) {
				if bad++; bad < 5 {
					t.Errorf("%s: %#04x -> %v -> %#04x", p.name, h, v, got)
				}
			}
			next := p.from(uint16(h + 1))
			if last := map[string]int{"f16": 0x7bff, "bf16": 0x7f7f}[p.name]; h&0x7fff >= last {
				continue // the largest finite value: its neighbour is infinity (or v is not finite)
			}
			mid := (float64(v) + float64(next)) / 2 // exact in float32 for both formats
			even := uint16(h)
			if h&1 == 1 {
				even = uint16(h + 1)
			}
			below, above := math.Nextafter32(float32(mid), float32(v)), math.Nextafter32(float32(mid), float32(next))
			if p.to(float32(mid)) != even || p.to(below) != uint16(h) || p.to(above) != uint16(h+1) {
				if bad++; bad < 5 {
					t.Errorf("%s: rounding between %#04x and %#04x: mid -> %#04x (want %#04x), below -> %#04x, above -> %#04x",
						p.name, h, h+1, p.to(float32(mid)), even, p.to(below), p.to(above))
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d bit patterns wrong", p.name, bad)
		}
	}
}

func TestHalfAndInt8Tensors(t *testing.T) {
	bits := []uint16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7e01}
	h := closer(t, must(chutney.NewHalfTensor(chutney.Float16, bits, 2, 3)))
	if h.DType() != chutney.Float16 || h.DType().Size() != 2 || h.DType().String() != "f16" {
		t.Fatalf("dtype %v size %d", h.DType(), h.DType().Size())
	}
	if got := must(h.HalfBits()); !reflect.DeepEqual(got, bits) {
		t.Fatalf("HalfBits %#04x, want %#04x", got, bits)
	}
	vals := must(h.HalfFloat32s())
	if vals[0] != 1 || vals[1] != -2 || vals[2] != 65504 || vals[3] != 5.9604645e-08 || !math.IsNaN(float64(vals[5])) {
		t.Fatalf("HalfFloat32s %v", vals)
	}
	b := closer(t, must(chutney.NewHalfTensorFromFloat32(chutney.BFloat16, []float32{1.5, -0.1}, 2)))
	if got := must(b.HalfBits()); !reflect.DeepEqual(got, []uint16{0x3fc0, 0xbdcd}) {
		t.Fatalf("bf16 bits %#04x", got)
	}
	one := closer(t, must(chutney.NewHalfTensor(chutney.BFloat16, []uint16{0xc020})))
	if v := must(one.Item()); v != -2.5 {
		t.Fatalf("Item of bf16 -2.5 = %v", v)
	}
	if err := b.WriteHalfBits([]uint16{0x4000, 0x0000}); err != nil {
		t.Fatal(err)
	}
	if got := must(b.HalfFloat32s()); !reflect.DeepEqual(got, []float32{2, 0}) {
		t.Fatalf("after WriteHalfBits: %v", got)
	}
	q := tensor(t, []int8{-128, -1, 0, 127}, 4)
	if q.DType() != chutney.Int8 || !reflect.DeepEqual(must(q.Int8s()), []int8{-128, -1, 0, 127}) {
		t.Fatalf("int8 tensor %v %v", q.DType(), must(q.Int8s()))
	}
	if v := must(closer(t, must(chutney.NewTensor([]int8{-7}))).Item()); v != -7 {
		t.Fatalf("Item of int8 -7 = %v", v)
	}

	// Mismatches are refused by name, nothing is copied.
	wantErr(t, h.ReadHalfBits(make([]uint16, 5)), chutney.ErrShape)
	wantErr(t, q.ReadHalfBits(make([]uint16, 4)), chutney.ErrDType)
	wantErr(t, errOf(chutney.NewHalfTensor(chutney.Float32, []uint16{1})), chutney.ErrDType)
	wantErr(t, errOf(chutney.NewHalfTensor(chutney.Float16, []uint16{1, 2}, 3)), chutney.ErrShape)
	if _, err := chutney.Values[float32](h); err == nil {
		t.Fatal("Values[float32] of an f16 tensor must fail (no silent conversion)")
	}

	// Through a checkpoint: the dtypes and bits come back.
	path := filepath.Join(t.TempDir(), "half.safetensors")
	if err := chutney.SaveCheckpoint(path, []chutney.NamedTensor{{Name: "h", Tensor: h}, {Name: "b", Tensor: b},
		{Name: "q", Tensor: q}}, nil); err != nil {
		t.Fatal(err)
	}
	ck := closer(t, must(chutney.LoadCheckpoint(path)))
	for _, w := range []struct {
		name string
		dt   chutney.DType
	}{{"h", chutney.Float16}, {"b", chutney.BFloat16}, {"q", chutney.Int8}} {
		got := closer(t, must(ck.Tensor(w.name)))
		if got.DType() != w.dt {
			t.Fatalf("%s: dtype %v, want %v", w.name, got.DType(), w.dt)
		}
	}
	if got := must(closer(t, must(ck.Tensor("h"))).HalfBits()); !reflect.DeepEqual(got, bits) {
		t.Fatalf("checkpoint f16 bits %#04x", got)
	}
	if got := must(closer(t, must(ck.Tensor("q"))).Int8s()); !reflect.DeepEqual(got, []int8{-128, -1, 0, 127}) {
		t.Fatalf("checkpoint int8 %v", got)
	}
}

// errOf keeps only the error of a (value, error) pair.
func errOf[T any](_ T, err error) error { return err }
