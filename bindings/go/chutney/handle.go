package chutney

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// handle is the lifetime of one C object, shared by every wrapper type.
//
// state counts references: 1 for the owner (dropped by Close), 1 per call in flight, 1 per
// child object that needs this one (a Graph holds its Context, a Model its Graph). closedBit is
// set by Close. The C object is released by whichever release brings the count to zero after
// Close, so closing a handle while another goroutine is inside a call on it, or closing a
// Context before its graphs, never frees memory still in use: the release waits for the last
// user. A call on a closed handle is refused with ErrClosed.
type handle struct {
	state atomic.Int64
	kind  string
	free  func() // releases the C object (and this object's references on its parents)
	stack string // where it was created, when leak reports ask for stacks
}

const closedBit = int64(1) << 62

// openHandles counts handles created and not yet closed, for OpenHandles.
var openHandles atomic.Int64

func (h *handle) init(kind string, free func()) {
	h.kind = kind
	h.free = free
	h.state.Store(1)
	openHandles.Add(1)
}

// acquire takes a reference for one call (or one child); a closed or never-initialised handle
// refuses.
func (h *handle) acquire() error {
	for {
		s := h.state.Load()
		if s&closedBit != 0 || s == 0 {
			if h.kind == "" {
				return closedError("handle (zero value, not created by this package)")
			}
			return closedError(h.kind)
		}
		if h.state.CompareAndSwap(s, s+1) {
			return nil
		}
	}
}

func (h *handle) release() {
	if h.state.Add(-1) == closedBit {
		h.free()
	}
}

// close marks the handle closed and drops the owner's reference; idempotent.
func (h *handle) close() {
	for {
		s := h.state.Load()
		if s&closedBit != 0 || s == 0 {
			return
		}
		if h.state.CompareAndSwap(s, s|closedBit) {
			break
		}
	}
	openHandles.Add(-1)
	h.release()
}

func (h *handle) isClosed() bool { return h.state.Load()&closedBit != 0 }

// OpenHandles is the number of handles (contexts, graphs, plans, tensors, models, datasets,
// loaders, checkpoints, op libraries) created and not yet closed. A test can assert that it
// returns to its starting value.
func OpenHandles() int64 { return openHandles.Load() }

// Leak describes a handle that became unreachable without Close.
type Leak struct {
	Kind  string // "Tensor", "Plan", ...
	Stack string // where it was created; empty unless stacks were asked for
}

var (
	leakMu     sync.RWMutex
	leakFn     func(Leak)
	leakStacks bool
)

func init() {
	// CHUTNEY_GO_LEAKS=1 reports to stderr, =stacks with the creation stack of each handle.
	switch os.Getenv("CHUTNEY_GO_LEAKS") {
	case "1":
		SetLeakHandler(PrintLeak, false)
	case "stacks":
		SetLeakHandler(PrintLeak, true)
	}
}

// SetLeakHandler switches the leak detector: handles created afterwards carry a finalizer that
// calls fn (on the finalizer goroutine) when the handle is garbage collected without having
// been closed. The finalizer only reports; it never releases the C object (which stays
// allocated: releasing behind the program's back would hide the bug and could race with C
// code). stacks records each handle's creation stack (costly). fn nil switches the detector
// off for handles created afterwards. The environment variable CHUTNEY_GO_LEAKS=1 (or =stacks)
// installs PrintLeak at start-up.
func SetLeakHandler(fn func(Leak), stacks bool) {
	leakMu.Lock()
	leakFn, leakStacks = fn, stacks
	leakMu.Unlock()
}

// PrintLeak writes a leak report to stderr.
func PrintLeak(l Leak) {
	if l.Stack != "" {
		fmt.Fprintf(os.Stderr, "chutney: a %s was never closed; created at:\n%s\n", l.Kind, l.Stack)
		return
	}
	fmt.Fprintf(os.Stderr, "chutney: a %s was never closed (CHUTNEY_GO_LEAKS=stacks tells where it was created)\n", l.Kind)
}

// owner is implemented by every wrapper type.
type owner interface{ hdl() *handle }

// track arms the leak detector for a new wrapper when it is switched on. The finalizer must not
// capture obj (a finalizer's closure is a root: the object would never be collected).
func track[T any, P ownerPtr[T]](obj P) P {
	leakMu.RLock()
	fn, stacks := leakFn, leakStacks
	leakMu.RUnlock()
	if fn == nil {
		return obj
	}
	if stacks {
		buf := make([]byte, 4096)
		obj.hdl().stack = string(buf[:runtime.Stack(buf, false)])
	}
	runtime.SetFinalizer(obj, func(o P) {
		h := o.hdl()
		if !h.isClosed() {
			fn(Leak{Kind: h.kind, Stack: h.stack})
		}
	})
	return obj
}

// ownerPtr is a pointer to a handle-owning type.
type ownerPtr[T any] interface {
	*T
	owner
}

// useOwner takes a use reference on p's handle (every type's use()): a nil p is an error naming
// kind, a closed handle ErrClosed.
func useOwner[T any, P ownerPtr[T]](p P, kind string) error {
	if p == nil {
		return nilError(kind)
	}
	return p.hdl().acquire()
}

// closeOwner closes the handle of p (Close of every handle-owning type): nil does nothing.
// Always nil: closing cannot fail (a release that waits for dependents runs when they close).
func closeOwner[T any, P ownerPtr[T]](p P) error {
	if p != nil {
		p.hdl().close()
	}
	return nil
}
