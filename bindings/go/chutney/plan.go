package chutney

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Plan is a compiled graph (ctn_plan): run it many times with new inputs. It does not depend
// on its graph (which may be closed), only on the context. A Plan may be used by several
// goroutines at once: its calls are serialised (the library runs one call per ctn_plan at a
// time), so two goroutines running one plan take turns; distinct plans run in parallel.
type Plan struct {
	h handle
	// mu serialises the calls on the plan: ctn_plan_run (and every other ctn_plan_* call) must
	// not run on two threads at once, and Run's argument arrays (args) belong to the plan.
	mu       sync.Mutex
	ptr      *C.ctn_plan
	graph    uint64 // serial of the graph it was compiled from: nodes are checked against it
	nOutputs int

	args *runArgs // Run's argument arrays, reused
}

// runArgs are the arrays Run hands to C, in C memory: allocated once per plan (grown when a
// run has more feeds or outputs), so a run allocates nothing, and the pointer checks cgo makes
// on each argument stay cheap (checking Go memory means finding its heap object).
type runArgs struct {
	nodes        *C.ctn_node
	vals, outs   **C.ctn_tensor
	nFeeds, nOut int
}

// reserve makes room for nf feeds and no outputs.
func (a *runArgs) reserve(nf, no int) error {
	grow := func(p unsafe.Pointer, n int, size uintptr) unsafe.Pointer {
		return C.realloc(p, C.size_t(uintptr(n+1)*size))
	}
	if nf > a.nFeeds {
		n := grow(unsafe.Pointer(a.nodes), nf, unsafe.Sizeof(C.ctn_node(0)))
		if n == nil {
			return newError(StatusOutOfMemory, "Run: %d feeds", nf)
		}
		a.nodes = (*C.ctn_node)(n)
		v := grow(unsafe.Pointer(a.vals), nf, unsafe.Sizeof(a.vals))
		if v == nil {
			return newError(StatusOutOfMemory, "Run: %d feeds", nf)
		}
		a.vals = (**C.ctn_tensor)(v)
		a.nFeeds = nf
	}
	if no > a.nOut || a.outs == nil {
		o := grow(unsafe.Pointer(a.outs), no, unsafe.Sizeof(a.outs))
		if o == nil {
			return newError(StatusOutOfMemory, "Run: %d outputs", no)
		}
		a.outs = (**C.ctn_tensor)(o)
		a.nOut = no
	}
	if a.nodes == nil {
		return a.reserve(1, no)
	}
	return nil
}

func (a *runArgs) free() {
	C.free(unsafe.Pointer(a.nodes))
	C.free(unsafe.Pointer(a.vals))
	C.free(unsafe.Pointer(a.outs))
}

func (p *Plan) hdl() *handle { return &p.h }

func (p *Plan) use() error { return useOwner(p, "Plan") }

// enter takes a reference and the plan's lock for one call; leave gives both back.
func (p *Plan) enter() error {
	if err := p.use(); err != nil {
		return err
	}
	p.mu.Lock()
	return nil
}

func (p *Plan) leave() {
	p.mu.Unlock()
	p.h.release()
}

// getPlan returns what call writes into a zero V, between enter and leave.
func getPlan[V any](p *Plan, call func(*V) C.goctn_ret) (V, error) {
	var v V
	if err := p.enter(); err != nil {
		return v, err
	}
	defer p.leave()
	return v, check(call(&v))
}

// lockPlans locks each distinct plan of ps (nil ones skipped) in address order, so that calls
// locking several plans cannot deadlock each other; the result unlocks them.
func lockPlans(ps ...*Plan) (unlock func()) {
	var set []*Plan
	for _, p := range ps {
		if p != nil && !containsPlan(set, p) {
			set = append(set, p)
		}
	}
	sort.Slice(set, func(i, j int) bool { return uintptr(unsafe.Pointer(set[i])) < uintptr(unsafe.Pointer(set[j])) })
	for _, p := range set {
		p.mu.Lock()
	}
	return func() {
		for _, p := range set {
			p.mu.Unlock()
		}
	}
}

func containsPlan(ps []*Plan, p *Plan) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// Passes that CompileOptions.Disable can skip.
const (
	PassDCE             = C.CTN_PASS_DCE
	PassConstantFolding = C.CTN_PASS_CONSTANT_FOLDING
	PassSimplify        = C.CTN_PASS_SIMPLIFY
	PassFusion          = C.CTN_PASS_FUSION
	PassMemoryReuse     = C.CTN_PASS_MEMORY_REUSE
	PassLayout          = C.CTN_PASS_LAYOUT // since 1.7: channels-last convolution regions (docs/EXECUTION.md)
)

// CompileOptions tune Compile; the zero value is the default.
type CompileOptions struct {
	Disable  uint32 // Pass* bits of passes to skip
	Backends string // "" : the context's preference
	// MemoryBudget caps the plan's planned peak in bytes: over it the compiler recomputes
	// activations instead of keeping them (bit-identical results); MemoryBudgetAuto: as low as
	// recomputation gets; 0: none. A budget below the reachable minimum fails naming it.
	MemoryBudget uint64
}

// MemoryBudgetAuto asks for the lowest planned peak recomputation reaches.
const MemoryBudgetAuto = uint64(C.CTN_MEMORY_BUDGET_AUTO)

// Compile compiles what outputs need (and every Assign) into a plan. It returns the graph's
// recorded building error first, if any.
func (g *Graph) Compile(outputs ...Node) (*Plan, error) {
	return g.CompileWith(CompileOptions{}, outputs...)
}

// CompileWith is Compile with options.
func (g *Graph) CompileWith(opts CompileOptions, outputs ...Node) (*Plan, error) {
	if g != nil && g.err != nil {
		return nil, g.err
	}
	if err := g.use(); err != nil {
		return nil, err
	}
	defer g.h.release()
	for i, n := range outputs {
		if n.g != g {
			return nil, newError(StatusInvalidArgument, "Compile: output %d is not a valid node of this graph", i)
		}
	}
	var o C.ctn_compile_options
	o.struct_size = C.uint32_t(unsafe.Sizeof(o))
	o.disable = C.uint32_t(opts.Disable)
	o.memory_budget = C.uint64_t(opts.MemoryBudget)
	var cs cstrings
	defer cs.free()
	if opts.Backends != "" {
		var err error
		if o.backends, err = cs.add(opts.Backends, "CompileOptions.Backends"); err != nil {
			return nil, err
		}
	}
	// The plan holds a reference on the context (it runs on its backends).
	c := g.ctx
	if err := c.h.acquire(); err != nil {
		return nil, err
	}
	ids := nodeIDs(outputs)
	var p *C.ctn_plan
	if err := check(C.goctn_plan_compile(g.ptr, C.uint32_t(len(outputs)), &ids[0], &o, &p)); err != nil {
		c.h.release()
		return nil, err
	}
	ch := &c.h
	args := &runArgs{}
	pl := &Plan{ptr: p, graph: g.serial, nOutputs: len(outputs), args: args}
	pl.h.init("Plan", func() {
		C.ctn_plan_release(p)
		args.free()
		ch.release()
	})
	return track(pl), nil
}

// Close releases the plan. Idempotent.
func (p *Plan) Close() error { return closeOwner(p) }

// NumOutputs is the number of outputs the plan was compiled with.
func (p *Plan) NumOutputs() int {
	if p == nil {
		return 0
	}
	return p.nOutputs
}

// Feed gives an Input node its value for one run.
type Feed struct {
	Node  Node
	Value *Tensor
}

// Run runs the plan once. feeds give every Input the outputs depend on (dtype and shape must
// match exactly); outputs[i] receives output i of Compile and must have its dtype and shape
// (NewOutput makes one), or be nil to skip it. Fewer outputs than the plan has skip the rest.
// A run allocates nothing in the steady state.
func (p *Plan) Run(feeds []Feed, outputs ...*Tensor) error {
	return p.run(nil, nil, feeds, outputs)
}

// RunOptions are the options of one run (ctn_run_options).
type RunOptions struct {
	// CheckNumerics checks every step's f32/f64 output and stops at the first NaN or infinity
	// with ErrNumerics naming the op, its node and which inputs were already non-finite. Slow:
	// for finding where a NaN comes from.
	CheckNumerics bool
	// Timeout > 0 cancels a run that takes longer (ErrCancelled, the variables unchanged).
	Timeout time.Duration
}

// RunWithOptions is Run with options.
func (p *Plan) RunWithOptions(opts RunOptions, feeds []Feed, outputs ...*Tensor) error {
	return p.runContext(nil, nil, opts, feeds, outputs)
}

// RunContext is Run that ctx can stop: when ctx is cancelled or its deadline passes during the
// run, the run stops between two steps with an error that matches both ErrCancelled and
// ctx.Err() under errors.Is, and the plan's variables are as they were (the library checks up
// to the first step that writes a variable; a run already past it completes and returns nil).
func (p *Plan) RunContext(ctx context.Context, feeds []Feed, outputs ...*Tensor) error {
	return p.runContext(ctx, nil, RunOptions{}, feeds, outputs)
}

// runContext runs with options; ctx may be nil (no cancellation).
func (p *Plan) runContext(ctx context.Context, m *Model, opts RunOptions, feeds []Feed, outputs []*Tensor) error {
	o := runOpts{}
	if opts.CheckNumerics {
		o.flags |= C.CTN_RUN_CHECK_NUMERICS
	}
	timeout := opts.Timeout
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return &Error{Status: StatusCancelled, Name: StatusCancelled.String(), Msg: "the context was done before the run", cause: err}
		}
		if d, ok := ctx.Deadline(); ok && (timeout <= 0 || time.Until(d) < timeout) {
			timeout = time.Until(d)
			if timeout <= 0 {
				timeout = time.Nanosecond
			}
		}
	}
	if timeout > 0 {
		o.timeoutUS = uint64((timeout + time.Microsecond - 1) / time.Microsecond)
	}
	if ctx != nil && ctx.Done() != nil {
		if err := check(C.goctn_cancel_create(&o.cancel)); err != nil {
			return err
		}
		stop, watched := make(chan struct{}), make(chan struct{})
		go func() { // requests cancellation when ctx is done before the run ends
			defer close(watched)
			select {
			case <-ctx.Done():
				_ = check(C.goctn_cancel_request(o.cancel))
			case <-stop:
			}
		}()
		defer func() {
			close(stop)
			<-watched
			C.ctn_cancel_release(o.cancel)
		}()
	}
	err := p.run(m, &o, feeds, outputs)
	if e, ok := err.(*Error); ok && e.Status == StatusCancelled && ctx != nil && ctx.Err() != nil {
		e.cause = ctx.Err()
	}
	return err
}

// runOpts is a run's ctn_run_options, the cancel token in C memory.
type runOpts struct {
	cancel    *C.ctn_cancel
	flags     C.uint32_t
	timeoutUS uint64
}

// run is Run, or Model.Run when m is not nil. (No defers: with this many returns the
// compiler would not open-code them, and a run is the hot path.)
func (p *Plan) run(m *Model, o *runOpts, feeds []Feed, outputs []*Tensor) error {
	if err := p.enter(); err != nil {
		return err
	}
	held, heldOut, err := p.hold(feeds, outputs)
	if err == nil {
		var mp unsafe.Pointer
		if m != nil {
			mp = unsafe.Pointer(m.ptr)
		}
		a := p.args
		if o == nil {
			err = check(C.goctn_run(unsafe.Pointer(p.ptr), mp, C.uint32_t(len(feeds)), a.nodes, unsafe.Pointer(a.vals),
				C.uint32_t(len(outputs)), unsafe.Pointer(a.outs)))
		} else {
			err = check(C.goctn_run_opts(unsafe.Pointer(p.ptr), mp, unsafe.Pointer(o.cancel), o.flags, C.uint64_t(o.timeoutUS),
				C.uint32_t(len(feeds)), a.nodes, unsafe.Pointer(a.vals), C.uint32_t(len(outputs)), unsafe.Pointer(a.outs)))
		}
	}
	// Released after the call: a Close from another goroutine frees nothing before this.
	for _, f := range feeds[:held] {
		f.Value.h.release()
	}
	for _, t := range outputs[:heldOut] {
		if t != nil {
			t.h.release()
		}
	}
	p.leave()
	return err
}

// hold checks the feeds and outputs, takes a reference on every tensor for the call and fills
// the C argument arrays. It returns how many feeds and outputs it holds (also on failure).
func (p *Plan) hold(feeds []Feed, outputs []*Tensor) (held, heldOut int, err error) {
	if len(outputs) > p.nOutputs {
		return 0, 0, newError(StatusInvalidArgument, "Run: %d output tensors for a plan with %d outputs", len(outputs), p.nOutputs)
	}
	a := p.args
	if err := a.reserve(len(feeds), len(outputs)); err != nil {
		return 0, 0, err
	}
	nodes := unsafe.Slice(a.nodes, len(feeds)+1)
	vals := unsafe.Slice(a.vals, len(feeds)+1)
	outs := unsafe.Slice(a.outs, len(outputs)+1)
	for i, f := range feeds {
		if f.Node.g == nil || f.Node.g.serial != p.graph {
			return held, 0, newError(StatusInvalidArgument, "Run: feed %d is not a node of the graph this plan was compiled from", i)
		}
		if err := f.Value.use(); err != nil {
			return held, 0, annotate(err, "Run: feed %d", i)
		}
		held++
		nodes[i] = f.Node.id
		vals[i] = f.Value.ptr
	}
	for i, t := range outputs {
		outs[i] = nil
		if t != nil {
			if err := t.use(); err != nil {
				return held, heldOut, annotate(err, "Run: output %d", i)
			}
			outs[i] = t.ptr
		}
		heldOut++
	}
	return held, heldOut, nil
}

// annotate prefixes the message of a Go-side error with where it happened.
func annotate(err error, format string, args ...any) error {
	if e, ok := err.(*Error); ok {
		c := *e
		c.Msg = newError(e.Status, format, args...).Msg + ": " + e.Msg
		return &c
	}
	return err
}

// NewOutput creates a tensor of the dtype and shape of output i.
func (p *Plan) NewOutput(i int) (*Tensor, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if i < 0 || i >= p.nOutputs {
		return nil, newError(StatusInvalidArgument, "NewOutput(%d): the plan has %d outputs", i, p.nOutputs)
	}
	var t *C.ctn_tensor
	if err := check(C.goctn_plan_output_create(p.ptr, C.uint32_t(i), &t)); err != nil {
		return nil, err
	}
	return adoptTensor(t)
}

// NewOutputs creates one tensor per output (close them all).
func (p *Plan) NewOutputs() ([]*Tensor, error) {
	out := make([]*Tensor, p.NumOutputs())
	for i := range out {
		t, err := p.NewOutput(i)
		if err != nil {
			for _, o := range out[:i] {
				o.Close()
			}
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// PlanStats are a plan's compile-time figures.
type PlanStats struct {
	Nodes            int    // nodes in the graph before passes
	Steps            int    // kernel calls per run
	Fused            int    // nodes removed by fusion
	Folded           int    // nodes removed by constant folding / simplification
	InPlace          int    // steps writing over their input
	AssignElided     int    // Assign copies removed (computed in place)
	PlannedPeakBytes uint64 // arena size for intermediate values, all devices
	NaiveBytes       uint64 // every intermediate value's size summed (no reuse)
	PersistentBytes  uint64 // variables and constants
}

// Stats returns the plan's statistics.
func (p *Plan) Stats() (PlanStats, error) {
	s, err := getPlan(p, withSize(func(s *C.ctn_plan_stats) C.goctn_ret { return C.goctn_plan_stats_get(p.ptr, s) }))
	if err != nil {
		return PlanStats{}, err
	}
	return PlanStats{
		Nodes: int(s.n_nodes), Steps: int(s.n_steps), Fused: int(s.n_fused), Folded: int(s.n_folded),
		InPlace: int(s.n_inplace), AssignElided: int(s.n_assign_elided),
		PlannedPeakBytes: uint64(s.planned_peak_bytes), NaiveBytes: uint64(s.naive_bytes),
		PersistentBytes: uint64(s.persistent_bytes),
	}, nil
}

// MemoryReport is what a memory budget did to a plan (ctn_plan_memory_report).
type MemoryReport struct {
	Budget            uint64 // bytes asked (auto: the minimum reached); 0: none
	PeakWithoutBudget uint64
	PeakBytes         uint64 // planned peak achieved
	MinimumBytes      uint64 // lowest peak recomputation reaches (0 without a budget)
	Flops             uint64 // estimated per run, recomputation included
	ExtraFlops        uint64 // of which recomputation
	Recomputed        []string
}

// MemoryReport reports the plan's memory budget, peaks and recomputed steps.
func (p *Plan) MemoryReport() (MemoryReport, error) {
	r, err := getPlan(p, withSize(func(r *C.ctn_plan_memory_report) C.goctn_ret { return C.goctn_plan_memory_report_get(p.ptr, r) }))
	if err != nil {
		return MemoryReport{}, err
	}
	m := MemoryReport{Budget: uint64(r.budget), PeakWithoutBudget: uint64(r.peak_without_budget),
		PeakBytes: uint64(r.peak_bytes), MinimumBytes: uint64(r.minimum_bytes), Flops: uint64(r.flops),
		ExtraFlops: uint64(r.extra_flops)}
	for _, l := range strings.Split(goString(r.recomputed), "\n") {
		if l != "" {
			m.Recomputed = append(m.Recomputed, l)
		}
	}
	return m, nil
}

// Describe lists the schedule: step, op, backend, shape, arena offset.
func (p *Plan) Describe() (string, error) {
	if err := p.enter(); err != nil {
		return "", err
	}
	defer p.leave()
	var text *C.char
	if err := check(C.goctn_plan_describe(p.ptr, &text)); err != nil {
		return "", err
	}
	return goString(text), nil
}

// BackendSteps counts the steps that run on backend (op "" : every op, else only that op):
// where did the plan put its work.
func (p *Plan) BackendSteps(backend, op string) (int, error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer p.leave()
	var cs cstrings
	defer cs.free()
	b, err := cs.add(backend, "backend")
	if err != nil {
		return 0, err
	}
	var o *C.char
	if op != "" {
		if o, err = cs.add(op, "op"); err != nil {
			return 0, err
		}
	}
	var n C.uint32_t
	if err := check(C.goctn_plan_backend_steps(p.ptr, b, o, &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

func (p *Plan) checkNode(n Node, what string) error {
	if n.g == nil || n.g.serial != p.graph {
		return newError(StatusInvalidArgument, "%s: not a node of the graph this plan was compiled from", what)
	}
	return nil
}

// ReadVariable returns a copy of variable v's current value.
func (p *Plan) ReadVariable(v Node) (*Tensor, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if err := p.checkNode(v, "ReadVariable"); err != nil {
		return nil, err
	}
	var t *C.ctn_tensor
	if err := check(C.goctn_plan_variable_read(p.ptr, v.id, &t)); err != nil {
		return nil, err
	}
	return adoptTensor(t)
}

// WriteVariable overwrites variable v (same dtype and shape).
func (p *Plan) WriteVariable(v Node, value *Tensor) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.leave()
	if err := p.checkNode(v, "WriteVariable"); err != nil {
		return err
	}
	if err := value.use(); err != nil {
		return err
	}
	defer value.h.release()
	return check(C.goctn_plan_variable_write(p.ptr, v.id, value.ptr))
}
