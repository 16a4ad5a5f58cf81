package chutney_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"chutney/bindings/go/chutney"
)

func fashionTest(t *testing.T) *chutney.Dataset {
	t.Helper()
	ds, err := chutney.OpenFashionMNIST("", "test")
	if err != nil {
		// The data comes with the Debian package dataset-fashion-mnist (tools/deps/base.txt).
		t.Fatal(err)
	}
	return closer(t, ds)
}

func TestDatasetAndLoader(t *testing.T) {
	ds := fashionTest(t)
	info := must(ds.Info())
	if info.Count != 10000 || info.Rows != 28 || info.Cols != 28 || info.NumClasses != 10 {
		t.Fatalf("info %+v", info)
	}
	px, label, err := ds.Sample(0)
	if err != nil || len(px) != 784 || label < 0 || label > 9 {
		t.Fatalf("sample 0: %d pixels, label %d, %v", len(px), label, err)
	}
	_, _, err = ds.Sample(10000)
	wantErr(t, err, chutney.ErrInvalidArgument)

	opts := chutney.LoaderOptions{BatchSize: 100, Shuffle: true, DropLast: true, Seed: 5, Mean: 0.5, Std: 0.5, NumWorkers: 2}
	l := closer(t, must(chutney.NewLoader(ds, opts)))
	ds.Close() // the loader keeps its own reference
	if n := must(l.NumBatches()); n != 100 {
		t.Fatalf("%d batches", n)
	}
	x, y, err := l.NewBatch()
	if err != nil {
		t.Fatal(err)
	}
	closer(t, x)
	closer(t, y)
	if !reflect.DeepEqual(x.Shape(), []int64{100, 1, 28, 28}) || x.DType() != chutney.Float32 ||
		!reflect.DeepEqual(y.Shape(), []int64{100}) || y.DType() != chutney.Int32 {
		t.Fatalf("batch %v %v", x, y)
	}
	first := func() ([]float32, []int32) {
		if n := must(l.Next(x, y)); n != 100 {
			t.Fatalf("batch of %d", n)
		}
		return must(x.Float32s()), must(y.Int32s())
	}
	x1, y1 := first()
	if err := l.Reset(0); err != nil {
		t.Fatal(err)
	}
	x2, y2 := first()
	if !reflect.DeepEqual(x1, x2) || !reflect.DeepEqual(y1, y2) {
		t.Fatal("the same epoch gave another first batch")
	}
	if err := l.Reset(1); err != nil {
		t.Fatal(err)
	}
	_, y3 := first()
	if reflect.DeepEqual(y1, y3) {
		t.Fatal("epoch 1 starts like epoch 0")
	}
	st := must(l.Stats())
	if st.Batches != 3 || st.Samples != 300 || st.NumWorkers != 2 {
		t.Fatalf("stats %+v", st)
	}
	// Wrong tensors for a batch.
	_, err = l.Next(tensor(t, make([]float32, 10), 10), y)
	wantErr(t, err, chutney.ErrShape)
	_, err = l.Next(x, tensor(t, make([]float32, 100), 100))
	wantErr(t, err, chutney.ErrDType)
	if n, err := l.Next(nil, nil); err != nil || n != 100 {
		t.Fatalf("skipping both tensors: %d %v", n, err)
	}
	wantErr(t, l.Reset(-1), chutney.ErrInvalidArgument)
	_, err = chutney.NewLoader(ds, opts) // ds is closed
	wantErr(t, err, chutney.ErrClosed)
	_, err = chutney.NewLoader(fashionTest(t), chutney.LoaderOptions{})
	wantErr(t, err, chutney.ErrInvalidArgument) // batch size 0

	// Synchronous and flat.
	sl := closer(t, must(chutney.NewLoader(fashionTest(t), chutney.LoaderOptions{BatchSize: 3000, Flat: true, Synchronous: true})))
	fx, fy := must2(sl.NewBatch())
	closer(t, fx)
	closer(t, fy)
	sizes := []int{}
	for {
		n := must(sl.Next(fx, fy))
		if n == 0 {
			break
		}
		sizes = append(sizes, n)
	}
	if !reflect.DeepEqual(sizes, []int{3000, 3000, 3000, 1000}) || !reflect.DeepEqual(fx.Shape(), []int64{3000, 784}) {
		t.Fatalf("synchronous epoch: batches %v, shape %v", sizes, fx.Shape())
	}
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func TestDatasetBadFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := chutney.OpenIDX(filepath.Join(dir, "none"), filepath.Join(dir, "none2"))
	wantErr(t, err, chutney.ErrIO)
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("not an idx file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = chutney.OpenIDX(bad, bad)
	wantErr(t, err, chutney.ErrCorrupt)
	_, err = chutney.OpenFashionMNIST(dir, "train")
	wantErr(t, err, chutney.ErrIO)
	_, err = chutney.OpenFashionMNIST("", "validation")
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, err = chutney.OpenIDX("a\x00", "b")
	wantErr(t, err, chutney.ErrInvalidArgument)
	var nilD *chutney.Dataset
	_, err = nilD.Info()
	wantErr(t, err, chutney.ErrInvalidArgument)
}
