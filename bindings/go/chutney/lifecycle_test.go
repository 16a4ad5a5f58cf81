package chutney_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"chutney/bindings/go/chutney"
)

// Closing in any order is safe: a Graph and a Plan keep their Context alive, a Model its Graph.
func TestCloseInAnyOrder(t *testing.T) {
	before := chutney.OpenHandles()
	c := must(chutney.NewContext(&chutney.Options{Backends: "cpu"}))
	g := must(c.NewGraph())
	m := must(g.NewModel(chutney.Float32, 1))
	x := g.Input("x", chutney.Float32, 2, 3)
	y := m.Linear(x, 3, 4, true)
	p := must(g.Compile(y))
	if chutney.OpenHandles() != before+4 {
		t.Fatalf("OpenHandles %d, want %d", chutney.OpenHandles(), before+4)
	}
	c.Close() // the context first: plan and graph still work
	g.Close() // the graph before its model
	xv := must(chutney.NewTensor(make([]float32, 6), 2, 3))
	out := must(p.NewOutput(0))
	if err := m.Run(p, []chutney.Feed{{Node: x, Value: xv}}, out); err != nil {
		t.Fatal(err)
	}
	// The closed graph refuses building through the model too (the model only keeps it alive).
	if y2 := m.ReLU(y); y2.Valid() {
		t.Fatal("built into a closed graph")
	}
	wantErr(t, g.Err(), chutney.ErrClosed)
	_, err := c.NewGraph()
	wantErr(t, err, chutney.ErrClosed)
	for _, h := range []interface{ Close() error }{m, p, xv, out} {
		h.Close()
	}
	if chutney.OpenHandles() != before {
		t.Fatalf("OpenHandles %d after closing everything, want %d", chutney.OpenHandles(), before)
	}
}

// Close while other goroutines run the plan and read its tensors: every call either succeeds or
// fails with ErrClosed, never crashes (the memory is released after the last call in flight).
func TestCloseDuringUse(t *testing.T) {
	for round := 0; round < 20; round++ {
		_, x, p := addOne(t)
		xv := must(chutney.NewTensor([]float32{1, 2, 3, 4}, 2, 2))
		y := must(p.NewOutput(0))
		var runs atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		// One goroutine per object at a time (the library's rule); Close comes from another.
		wg.Add(2)
		go func() {
			defer wg.Done()
			for {
				err := p.Run([]chutney.Feed{{Node: x, Value: xv}}, y)
				if err != nil {
					if !errors.Is(err, chutney.ErrClosed) {
						errs <- err
					}
					return
				}
				runs.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			for runs.Load() < 3 {
				runtime.Gosched()
			}
			if round%2 == 0 {
				p.Close()
			} else {
				xv.Close()
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		p.Close()
		xv.Close()
		y.Close()
	}
}

// A Context is shared by many goroutines, each with its own graph and plan (-race checks the
// Go side; the library's rule allows it).
func TestConcurrentPlansOnOneContext(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			err := func() error {
				g, err := ctx.NewGraph()
				if err != nil {
					return err
				}
				defer g.Close()
				x := g.Input("x", chutney.Float32, 3)
				p, err := g.Compile(g.Mul(x, g.Scalar(chutney.Float32, float64(w))))
				if err != nil {
					return err
				}
				defer p.Close()
				xv, _ := chutney.NewTensor([]float32{1, 2, 3}, 3)
				defer xv.Close()
				y, err := p.NewOutput(0)
				if err != nil {
					return err
				}
				defer y.Close()
				for i := 0; i < 200; i++ {
					if err := p.Run([]chutney.Feed{{Node: x, Value: xv}}, y); err != nil {
						return err
					}
					v, err := y.Float32s()
					if err != nil {
						return err
					}
					if v[2] != float32(3*w) {
						return errors.New("wrong result under concurrency")
					}
				}
				return nil
			}()
			if err != nil {
				errs <- err
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// The leak detector reports a handle collected without Close, and only such handles.
func TestLeakDetectorReportsUnclosedHandles(t *testing.T) {
	reports := make(chan chutney.Leak, 16)
	chutney.SetLeakHandler(func(l chutney.Leak) { reports <- l }, true)
	func() {
		closed := must(chutney.NewTensor([]float32{1}, 1))
		closed.Close()
		_ = must(chutney.NewTensor([]float32{1, 2}, 2)) // never closed
	}()
	chutney.SetLeakHandler(nil, false)
	atomic.AddInt64(&intentionalLeaks, 1)
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC()
		select {
		case l := <-reports:
			if l.Kind != "Tensor" || l.Stack == "" {
				t.Fatalf("leak report %+v", l)
			}
			// Only one: the closed tensor is not reported.
			runtime.GC()
			time.Sleep(50 * time.Millisecond)
			select {
			case l2 := <-reports:
				t.Fatalf("a second report %+v", l2)
			default:
			}
			return
		case <-deadline:
			t.Fatal("the unclosed tensor was not reported")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
