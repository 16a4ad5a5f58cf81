package chutney_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"chutney/bindings/go/chutney"
)

func TestSentinelsCarryTheLibrarysNames(t *testing.T) {
	for _, c := range []struct {
		err  *chutney.Error
		name string
	}{
		{chutney.ErrInvalidArgument, "CTN_ERR_INVALID_ARGUMENT"}, {chutney.ErrShape, "CTN_ERR_SHAPE"},
		{chutney.ErrDType, "CTN_ERR_DTYPE"}, {chutney.ErrOutOfMemory, "CTN_ERR_OUT_OF_MEMORY"},
		{chutney.ErrUnavailable, "CTN_ERR_UNAVAILABLE"}, {chutney.ErrUnsupported, "CTN_ERR_UNSUPPORTED"},
		{chutney.ErrPlugin, "CTN_ERR_PLUGIN"}, {chutney.ErrIO, "CTN_ERR_IO"},
		{chutney.ErrCorrupt, "CTN_ERR_CORRUPT"}, {chutney.ErrState, "CTN_ERR_STATE"},
		{chutney.ErrInternal, "CTN_ERR_INTERNAL"},
	} {
		if c.err.Name != c.name || c.err.Status.String() != c.name {
			t.Errorf("sentinel %v: name %q, status %q; want %q", c.err, c.err.Name, c.err.Status, c.name)
		}
	}
	if errors.Is(chutney.ErrShape, chutney.ErrDType) {
		t.Error("ErrShape matches ErrDType")
	}
}

func TestLibraryErrorsAreTypedAndNamed(t *testing.T) {
	g := graph(t)
	a := g.Input("a", chutney.Float32, 4, 3)
	b := g.Input("b", chutney.Float32, 2, 1)
	if n := g.MatMul(a, b, false, false); n.Valid() {
		t.Fatal("a failed MatMul returned a valid node")
	}
	e := wantErr(t, g.Err(), chutney.ErrShape)
	if e.Status != chutney.StatusShape || e.Name != "CTN_ERR_SHAPE" || !strings.Contains(e.Msg, "matmul") {
		t.Fatalf("error %+v: want status CTN_ERR_SHAPE and a message naming matmul", e)
	}
	if errors.Is(e, chutney.ErrDType) {
		t.Fatal("a shape error matches ErrDType")
	}
	if got := e.Error(); !strings.HasPrefix(got, "CTN_ERR_SHAPE: ") {
		t.Fatalf("Error() = %q", got)
	}
}

// The message must come from the failing call itself: many goroutines fail with their own
// message at once while the Go scheduler moves them between OS threads; each must read its
// own. Reading ctn_last_error in a second cgo call instead fails this test within a few
// hundred calls per goroutine (tried: 32 goroutines on 2 cores), another thread's message.
func TestErrorMessageIsReadOnTheFailingThread(t *testing.T) {
	const workers, calls = 32, 2000
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				name := fmt.Sprintf("nosuch-%d-%d", w, i)
				err := ctx.SetBackends(name)
				var e *chutney.Error
				if !errors.As(err, &e) || !strings.Contains(e.Msg, name) {
					errs <- fmt.Errorf("SetBackends(%q): got %v", name, err)
					return
				}
				runtime.Gosched()
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The context still works with its old preference.
	if err := ctx.SetBackends("cpu"); err != nil {
		t.Fatal(err)
	}
}
