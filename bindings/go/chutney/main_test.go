package chutney_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"chutney/bindings/go/chutney"
)

// intentionalLeaks counts handles a test leaks on purpose (the leak detector's test).
var intentionalLeaks int64

// ctx is shared by the tests (a Context may be used from several goroutines at once).
var ctx *chutney.Context

func TestMain(m *testing.M) {
	var err error
	ctx, err = chutney.NewContext(&chutney.Options{Backends: "cpu"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewContext:", err)
		os.Exit(1)
	}
	code := m.Run()
	ctx.Close()
	if n := chutney.OpenHandles() - intentionalLeaks; code == 0 && n != 0 {
		fmt.Fprintf(os.Stderr, "%d handles were not closed by the tests\n", n)
		code = 1
	}
	os.Exit(code)
}

// closer registers Close of a handle at the end of the test.
func closer[T interface{ Close() error }](t testing.TB, h T) T {
	t.Helper()
	t.Cleanup(func() { h.Close() })
	return h
}

// must returns v, or panics with err (which fails the test binary with the error and the
// line): Go cannot pass a (value, error) pair on with a testing.T beside it.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

func tensor[T chutney.Elem](t testing.TB, data []T, shape ...int64) *chutney.Tensor {
	t.Helper()
	return closer(t, must(chutney.NewTensor(data, shape...)))
}

func graph(t testing.TB) *chutney.Graph {
	t.Helper()
	return closer(t, must(ctx.NewGraph()))
}

// wantErr fails unless err matches sentinel (errors.Is) and is a *chutney.Error.
func wantErr(t testing.TB, err error, sentinel error) *chutney.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %v", sentinel)
	}
	var e *chutney.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not a *chutney.Error", err, err)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v does not match %v", err, sentinel)
	}
	return e
}

func asError(err error, target **chutney.Error) bool { return errors.As(err, target) }
