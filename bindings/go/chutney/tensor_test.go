package chutney_test

import (
	"reflect"
	"testing"

	"chutney/bindings/go/chutney"
)

func roundTrip[T chutney.Elem](t *testing.T, data []T, shape ...int64) {
	t.Helper()
	x := tensor(t, data, shape...)
	if got, want := x.DType(), chutney.DTypeOf[T](); got != want {
		t.Fatalf("dtype %v, want %v", got, want)
	}
	if !reflect.DeepEqual(x.Shape(), append([]int64{}, shape...)) && !(len(shape) == 0 && len(x.Shape()) == 0) {
		t.Fatalf("shape %v, want %v", x.Shape(), shape)
	}
	back := must(chutney.Values[T](x))
	if !reflect.DeepEqual(back, data) {
		t.Fatalf("values %v, want %v", back, data)
	}
	// Write then Read into a caller's slice.
	rev := make([]T, len(data))
	for i := range data {
		rev[i] = data[len(data)-1-i]
	}
	if err := chutney.Write(x, rev); err != nil {
		t.Fatal(err)
	}
	got := make([]T, len(data))
	if err := chutney.Read(x, got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rev) {
		t.Fatalf("after Write: %v, want %v", got, rev)
	}
}

func TestTensorRoundTripsEveryElementType(t *testing.T) {
	roundTrip(t, []float32{1, -2.5, 3e-8, 4, 5, 6}, 2, 3)
	roundTrip(t, []float64{1, -2.5, 3e-300, 4}, 4)
	roundTrip(t, []int32{1, -2, 1 << 30, 4, 5, 6, 7, 8}, 2, 2, 2)
	roundTrip(t, []int64{1 << 40, -2}, 1, 2)
	roundTrip(t, []uint8{0, 255, 7}, 3)
	roundTrip(t, []bool{true, false, false, true}, 2, 2)
	roundTrip(t, []float32{42}) // a scalar
	roundTrip(t, []int64{}, 0, 3)

	if v := must(tensor(t, []int32{-7}).Item()); v != -7 {
		t.Fatalf("Item = %v", v)
	}
	f := must(tensor(t, []float64{1, 2, 3, 4}, 2, 2).Float64s())
	if !reflect.DeepEqual(f, []float64{1, 2, 3, 4}) {
		t.Fatal(f)
	}
}

func TestZerosAndDTypes(t *testing.T) {
	z := closer(t, must(chutney.Zeros(chutney.Int64, 2, 2)))
	if v := must(z.Int64s()); !reflect.DeepEqual(v, []int64{0, 0, 0, 0}) {
		t.Fatal(v)
	}
	for dt, want := range map[chutney.DType]struct {
		name string
		size int
	}{chutney.Float32: {"f32", 4}, chutney.Float64: {"f64", 8}, chutney.Int32: {"i32", 4},
		chutney.Int64: {"i64", 8}, chutney.Uint8: {"u8", 1}, chutney.Bool: {"bool", 1}} {
		if dt.String() != want.name || dt.Size() != want.size {
			t.Errorf("%d: %q %d, want %q %d", int(dt), dt, dt.Size(), want.name, want.size)
		}
	}
	if chutney.DType(99).Size() != 0 || chutney.DType(99).String() != "?" {
		t.Error("an unknown dtype is not reported as such")
	}
}

func TestTensorViews(t *testing.T) {
	x := tensor(t, []float32{0, 1, 2, 3, 4, 5}, 2, 3)
	tr := closer(t, must(x.Permute(1, 0)))
	if !reflect.DeepEqual(tr.Shape(), []int64{3, 2}) {
		t.Fatal(tr.Shape())
	}
	if c := must(tr.IsContiguous()); c {
		t.Fatal("a transposed view is contiguous")
	}
	if s := must(tr.Strides()); !reflect.DeepEqual(s, []int64{1, 3}) {
		t.Fatalf("strides %v", s)
	}
	if v := must(tr.Float32s()); !reflect.DeepEqual(v, []float32{0, 3, 1, 4, 2, 5}) {
		t.Fatalf("transposed values %v", v)
	}
	r, copied, err := tr.Reshape(6)
	closer(t, must(r, err))
	if !copied {
		t.Fatal("reshaping a transposed view must copy")
	}
	r2, copied, err := x.Reshape(3, -1)
	closer(t, must(r2, err))
	if copied || !reflect.DeepEqual(r2.Shape(), []int64{3, 2}) {
		t.Fatalf("reshape of a contiguous tensor: copied %v, shape %v", copied, r2.Shape())
	}
	s := closer(t, must(x.Slice(1, 1, 3, 1)))
	if v := must(s.Float32s()); !reflect.DeepEqual(v, []float32{1, 2, 4, 5}) {
		t.Fatalf("slice %v", v)
	}
	c := closer(t, must(tr.Contiguous()))
	if ok := must(c.IsContiguous()); !ok {
		t.Fatal("Contiguous is not contiguous")
	}
	// A view keeps its storage after the source is closed.
	x.Close()
	if v := must(s.Float32s()); !reflect.DeepEqual(v, []float32{1, 2, 4, 5}) {
		t.Fatalf("slice after closing its source %v", v)
	}
}

func TestTensorBadInput(t *testing.T) {
	_, err := chutney.NewTensor([]float32{1, 2, 3}, 2, 2)
	wantErr(t, err, chutney.ErrShape)
	_, err = chutney.NewTensor([]float32{}, -1)
	wantErr(t, err, chutney.ErrShape)
	_, err = chutney.NewTensor(make([]float32, 1), 1, 1, 1, 1, 1, 1, 1, 1, 1)
	wantErr(t, err, chutney.ErrShape)
	_, err = chutney.Zeros(chutney.Float32, 1<<40, 1<<40)
	wantErr(t, err, chutney.ErrShape)
	_, err = chutney.Zeros(chutney.DType(42), 2)
	wantErr(t, err, chutney.ErrDType)

	x := tensor(t, []float32{1, 2, 3, 4}, 2, 2)
	wantErr(t, chutney.Read(x, make([]float64, 4)), chutney.ErrDType)
	wantErr(t, chutney.Read(x, make([]float32, 3)), chutney.ErrShape)
	wantErr(t, chutney.Write(x, make([]int32, 4)), chutney.ErrDType)
	wantErr(t, chutney.Write(x, make([]float32, 5)), chutney.ErrShape)
	_, err = x.Item()
	wantErr(t, err, chutney.ErrShape)
	_, err = x.Permute(0)
	wantErr(t, err, chutney.ErrShape)
	_, err = x.Permute(0, 0)
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, err = x.Slice(5, 0, 1, 1)
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, err = x.Slice(0, 0, 1, 0)
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, _, err = x.Reshape(3, -1)
	wantErr(t, err, chutney.ErrShape)
}

func TestClosedAndNilTensors(t *testing.T) {
	x := must(chutney.NewTensor([]float32{1, 2}, 2))
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	_, err := x.Float32s()
	wantErr(t, err, chutney.ErrInvalidArgument)
	wantErr(t, err, chutney.ErrClosed)
	wantErr(t, chutney.Write(x, []float32{1, 2}), chutney.ErrClosed)
	_, err = x.Strides()
	wantErr(t, err, chutney.ErrClosed)
	_, err = x.Slice(0, 0, 1, 1)
	wantErr(t, err, chutney.ErrClosed)
	if x.String() != "Tensor(f32, [2], closed)" {
		t.Fatal(x.String())
	}

	var nilT *chutney.Tensor
	_, err = nilT.Float32s()
	wantErr(t, err, chutney.ErrInvalidArgument)
	wantErr(t, chutney.Read(nilT, []float32{}), chutney.ErrInvalidArgument)
	_, err = nilT.Item()
	wantErr(t, err, chutney.ErrInvalidArgument)
	if nilT.Close() != nil || nilT.Shape() != nil || nilT.NumElements() != 0 {
		t.Fatal("nil tensor accessors")
	}
	// A zero value not made by the package behaves as a closed handle.
	_, err = (&chutney.Tensor{}).IsContiguous()
	wantErr(t, err, chutney.ErrClosed)
}
