package chutney

/*
#include "shim.h"
#include "oplib_shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"sync"
	"unsafe"
)

// OpDef defines an op written in Go: shape inference, an optional gradient rule and a CPU
// kernel. Once added to a context (Context.AddOps) the op is used like a built-in one: Graph.Op
// by name, differentiated by Graph.Grad, compiled into plans, run eagerly.
//
// The library may call Infer, Grad and Kernel from several threads at once (a context serves
// several goroutines), so they must be safe for concurrent use; they must not keep the
// HostTensor slices they are given after returning. An error they return, or a panic, becomes
// the failing call's error, with its message; nothing crashes the process.
type OpDef struct {
	// Name is what Graph.Op takes; it must not clash with a built-in op or another library's.
	Name string
	// NumInputs is the exact number of inputs (>= 1).
	NumInputs int
	// Doc is one line: what the op computes, which attributes it reads.
	Doc string
	// Infer returns the output's dtype and shape from the inputs' (required). An *Error keeps
	// its Status; any other error reports StatusShape.
	Infer func(inputs []TensorDesc, attrs Attrs) (DType, []int64, error)
	// Grad builds d loss / d input i from graph ops through b (optional: nil makes the op not
	// differentiable): one OpNode per input, NoGrad for an input without a gradient.
	Grad func(b *GradBuilder, inputs []OpNode, output, gradOut OpNode, attrs Attrs) ([]OpNode, error)
	// Kernel computes the output on the CPU (required): every tensor is contiguous row-major,
	// inputs already broadcast only if Infer demanded equal shapes. An *Error keeps its Status;
	// any other error reports StatusInvalidArgument.
	Kernel func(inputs []HostTensor, output HostTensor, attrs Attrs) error
}

// TensorDesc is the dtype and shape of an op's input or output.
type TensorDesc struct {
	DType DType
	Shape []int64
}

// HostTensor is a tensor in host memory handed to a Kernel, valid during the call only.
type HostTensor struct {
	TensorDesc
	ptr unsafe.Pointer
	n   int
}

// Len is the number of elements.
func (t HostTensor) Len() int { return t.n }

// Float32s is the tensor's data when its dtype is Float32 (else nil), valid during the call.
func (t HostTensor) Float32s() []float32 { return hostSlice[float32](t, Float32) }

// Float64s is the tensor's data when its dtype is Float64 (else nil), valid during the call.
func (t HostTensor) Float64s() []float64 { return hostSlice[float64](t, Float64) }

// Int32s is the tensor's data when its dtype is Int32 (else nil), valid during the call.
func (t HostTensor) Int32s() []int32 { return hostSlice[int32](t, Int32) }

// Int64s is the tensor's data when its dtype is Int64 (else nil), valid during the call.
func (t HostTensor) Int64s() []int64 { return hostSlice[int64](t, Int64) }

// hostSlice is the tensor's data as a []T when its dtype is dt (else nil).
func hostSlice[T any](t HostTensor, dt DType) []T {
	if t.DType != dt || t.n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(t.ptr), t.n)
}

// OpNode is a node of the graph a gradient rule is building.
type OpNode uint32

// NoGrad marks an input without a gradient in Grad's result.
const NoGrad = OpNode(C.CTN_NODE_NONE)

// GradBuilder adds nodes to the graph being differentiated, for a gradient rule. Its methods
// keep the first error (Err); after one they return NoGrad.
type GradBuilder struct {
	host *C.ctn_host_api
	g    *C.ctn_graph
	err  error
}

// Err is the first error of the builder's calls, or nil.
func (b *GradBuilder) Err() error { return b.err }

func (b *GradBuilder) fail(s C.ctn_status, what string) OpNode {
	if b.err == nil {
		b.err = &Error{Status: Status(s), Name: Status(s).String(),
			Msg: what + ": " + C.GoString(C.ctn_last_error())}
	}
	return NoGrad
}

// Op adds op `name` (built-in or from a library) with attributes (nil: none).
func (b *GradBuilder) Op(name string, attrs *Attrs, inputs ...OpNode) OpNode {
	if b.err != nil {
		return NoGrad
	}
	ca, err := attrs.toC("GradBuilder.Op(" + name + ")")
	if err != nil {
		b.err = err
		return NoGrad
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	ids := make([]C.ctn_node, len(inputs)+1)
	for i, n := range inputs {
		ids[i] = C.ctn_node(n)
	}
	var out C.ctn_node
	if s := C.goctn_host_graph_op(b.host, b.g, cn, C.uint32_t(len(inputs)), &ids[0], &ca, &out); s != C.CTN_OK {
		return b.fail(s, "GradBuilder.Op("+name+")")
	}
	return OpNode(out)
}

// Scalar adds a 0-d constant of dtype dt.
func (b *GradBuilder) Scalar(dt DType, v float64) OpNode {
	if b.err != nil {
		return NoGrad
	}
	var out C.ctn_node
	if s := C.goctn_host_graph_scalar(b.host, b.g, C.ctn_dtype(dt), C.double(v), &out); s != C.CTN_OK {
		return b.fail(s, "GradBuilder.Scalar")
	}
	return OpNode(out)
}

// Desc is the dtype and shape of node n.
func (b *GradBuilder) Desc(n OpNode) (TensorDesc, error) {
	var dt C.ctn_dtype
	var nd C.uint32_t
	var shape [C.CTN_MAX_DIMS]C.int64_t
	if s := C.goctn_host_graph_node_info(b.host, b.g, C.ctn_node(n), &dt, &nd, &shape[0]); s != C.CTN_OK {
		b.fail(s, "GradBuilder.Desc")
		return TensorDesc{}, b.err
	}
	d := TensorDesc{DType: DType(dt), Shape: make([]int64, nd)}
	for i := range d.Shape {
		d.Shape[i] = int64(shape[i])
	}
	return d, nil
}

// opLibrary is one AddOps call's C descriptor and the handles of its Go definitions; freed
// after the context that holds it.
type opLibrary struct {
	lib     *C.goctn_oplib
	handles []cgo.Handle
}

func (l *opLibrary) free() {
	for _, h := range l.handles {
		h.Delete()
	}
	C.goctn_oplib_free(l.lib)
}

// addOpsMu serialises AddOps process-wide: the C query function hands the library one pending
// descriptor.
var addOpsMu sync.Mutex

// AddOps registers ops written in Go as an op library named `library`, in this process (ABI
// 1.2 ctn_context_add_oplib): no shared object to build. Admission is that of a loaded plugin: a
// name that clashes with a built-in op or another library's rejects the whole library with
// ErrPlugin, and the context is unchanged. PluginReport lists the library as "<in-process>".
// The definitions stay registered until the context is closed.
func (c *Context) AddOps(library string, ops ...OpDef) error {
	if library == "" {
		return newError(StatusInvalidArgument, "AddOps: empty library name")
	}
	if len(ops) == 0 {
		return newError(StatusInvalidArgument, "AddOps(%s): no ops", library)
	}
	for i, op := range ops {
		switch {
		case op.Name == "":
			return newError(StatusInvalidArgument, "AddOps(%s): op %d has no name", library, i)
		case op.NumInputs < 1 || op.NumInputs > 1<<16:
			return newError(StatusInvalidArgument, "AddOps(%s): op %s: NumInputs %d out of range", library, op.Name, op.NumInputs)
		case op.Infer == nil:
			return newError(StatusInvalidArgument, "AddOps(%s): op %s has no Infer", library, op.Name)
		case op.Kernel == nil:
			return newError(StatusInvalidArgument, "AddOps(%s): op %s has no Kernel", library, op.Name)
		}
	}
	if err := c.use(); err != nil {
		return err
	}
	defer c.h.release()

	var cs cstrings
	defer cs.free()
	cname, err := cs.add(library, "library name")
	if err != nil {
		return err
	}
	l := &opLibrary{lib: C.goctn_oplib_new(cname, C.uint32_t(len(ops)))}
	if l.lib == nil {
		return newError(StatusOutOfMemory, "AddOps(%s): out of memory", library)
	}
	for i := range ops {
		op := ops[i]
		name, err := cs.add(op.Name, "op name")
		if err == nil {
			var doc *C.char
			if doc, err = cs.add(op.Doc, "op doc"); err == nil {
				h := cgo.NewHandle(&op)
				l.handles = append(l.handles, h)
				diff := C.int(0)
				if op.Grad != nil {
					diff = 1
				}
				if C.goctn_oplib_set(l.lib, C.uint32_t(i), name, doc, C.uint32_t(op.NumInputs), C.uintptr_t(h), diff) == 0 {
					err = newError(StatusOutOfMemory, "AddOps(%s): out of memory", library)
				}
			}
		}
		if err != nil {
			l.free()
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	addOpsMu.Lock()
	err = check(C.goctn_oplib_add(unsafe.Pointer(c.ptr), l.lib))
	addOpsMu.Unlock()
	if err != nil {
		l.free()
		return err
	}
	c.opLibs = append(c.opLibs, l)
	return nil
}

func attrsFromC(a *C.ctn_attrs) Attrs {
	var r Attrs
	if a == nil {
		return r
	}
	ni, nf := int(a.ni), int(a.nf)
	if ni > maxAttrInts {
		ni = maxAttrInts
	}
	if nf > maxAttrFloats {
		nf = maxAttrFloats
	}
	for i := 0; i < ni; i++ {
		r.Ints = append(r.Ints, int64(a.i[i]))
	}
	for i := 0; i < nf; i++ {
		r.Floats = append(r.Floats, float64(a.f[i]))
	}
	return r
}

func descFromC(d *C.ctn_tensor_desc) TensorDesc {
	nd := int(d.ndim)
	if nd > C.CTN_MAX_DIMS {
		nd = C.CTN_MAX_DIMS
	}
	t := TensorDesc{DType: DType(d.dtype), Shape: make([]int64, nd)}
	for i := range t.Shape {
		t.Shape[i] = int64(d.shape[i])
	}
	return t
}

// opFailure turns a callback's error (or panic) into a status and a C message the trampoline
// hands to the host (which copies it; the trampoline frees it).
func opFailure(op *OpDef, what string, err error, def Status, msg **C.char) C.ctn_status {
	s, text := def, err.Error()
	var e *Error
	if errors.As(err, &e) && e.Status != StatusOK {
		s = e.Status
		if e.Msg != "" {
			text = e.Msg
		}
	}
	*msg = C.CString(fmt.Sprintf("%s: %s (Go): %s", op.Name, what, text))
	return C.ctn_status(s)
}

func recoverOp(op *OpDef, what string, status *C.ctn_status, msg **C.char) {
	if r := recover(); r != nil {
		*status = opFailure(op, what, fmt.Errorf("panic: %v", r), StatusInternal, msg)
	}
}

//export goctnOpInfer
func goctnOpInfer(h C.uintptr_t, n C.uint32_t, inputs *C.ctn_tensor_desc, attrs *C.ctn_attrs,
	out *C.ctn_tensor_desc, msg **C.char) (status C.ctn_status) {
	op := cgo.Handle(h).Value().(*OpDef)
	defer recoverOp(op, "infer", &status, msg)
	in := unsafe.Slice(inputs, int(n))
	descs := make([]TensorDesc, len(in))
	for i := range in {
		descs[i] = descFromC(&in[i])
	}
	dt, shape, err := op.Infer(descs, attrsFromC(attrs))
	if err == nil && len(shape) > C.CTN_MAX_DIMS {
		err = newError(StatusShape, "output has %d dims; at most %d", len(shape), C.CTN_MAX_DIMS)
	}
	if err != nil {
		return opFailure(op, "infer", err, StatusShape, msg)
	}
	out.dtype = C.int32_t(dt)
	out.ndim = C.uint32_t(len(shape))
	for i, v := range shape {
		if v < 0 {
			return opFailure(op, "infer", fmt.Errorf("negative output dimension %d", v), StatusShape, msg)
		}
		out.shape[i] = C.int64_t(v)
	}
	return C.CTN_OK
}

//export goctnOpGrad
func goctnOpGrad(host *C.ctn_host_api, h C.uintptr_t, g *C.ctn_graph, n C.uint32_t, inputs *C.ctn_node,
	output, gradOut C.ctn_node, attrs *C.ctn_attrs, gradInputs *C.ctn_node, msg **C.char) (status C.ctn_status) {
	op := cgo.Handle(h).Value().(*OpDef)
	defer recoverOp(op, "gradient", &status, msg)
	in := unsafe.Slice(inputs, int(n))
	nodes := make([]OpNode, len(in))
	for i, v := range in {
		nodes[i] = OpNode(v)
	}
	b := &GradBuilder{host: host, g: g}
	grads, err := op.Grad(b, nodes, OpNode(output), OpNode(gradOut), attrsFromC(attrs))
	if err == nil {
		err = b.err
	}
	if err == nil && len(grads) != len(in) {
		err = newError(StatusInvalidArgument, "returned %d gradients for %d inputs", len(grads), len(in))
	}
	if err != nil {
		return opFailure(op, "gradient", err, StatusInvalidArgument, msg)
	}
	gi := unsafe.Slice(gradInputs, int(n))
	for i, v := range grads {
		gi[i] = C.ctn_node(v)
	}
	return C.CTN_OK
}

func hostTensor(d *C.ctn_tensor_desc) HostTensor {
	t := HostTensor{TensorDesc: descFromC(d), n: 1}
	for _, v := range t.Shape {
		t.n *= int(v)
	}
	t.ptr = unsafe.Add(d.data, uintptr(d.offset))
	return t
}

//export goctnOpKernel
func goctnOpKernel(h C.uintptr_t, args *C.ctn_kernel_args, msg **C.char) (status C.ctn_status) {
	op := cgo.Handle(h).Value().(*OpDef)
	defer recoverOp(op, "kernel", &status, msg)
	in := unsafe.Slice(args.inputs, int(args.n_inputs))
	ins := make([]HostTensor, len(in))
	for i := range in {
		ins[i] = hostTensor(&in[i])
	}
	if args.n_outputs < 1 {
		return opFailure(op, "kernel", errors.New("no output tensor"), StatusInternal, msg)
	}
	if err := op.Kernel(ins, hostTensor(args.outputs), attrsFromC(args.attrs)); err != nil {
		return opFailure(op, "kernel", err, StatusInvalidArgument, msg)
	}
	return C.CTN_OK
}

// OpInfo describes one op the context knows (ctn_context_op_info).
type OpInfo struct {
	Name           string // what Graph.Op takes: the plain name, or "ctn::softsign" for a shadowed built-in
	NumInputs      int    // exact number of inputs; -1: variadic (one or more)
	Attributes     string // the attribute slots it reads ("f[0] slope"), "" when none or unknown
	Doc            string
	Origin         string // "builtin", or the op library that defines it
	OriginPath     string // the library's file, "<in-process>" for AddOps, "" for built-in ops
	Differentiable bool
	Elementwise    bool
}

// Ops lists every op the context knows: built-in ops first, then each library's in loading
// order.
func (c *Context) Ops() ([]OpInfo, error) {
	return listContext(c, func(n *C.uint32_t) C.goctn_ret { return C.goctn_context_op_count(c.ptr, n) },
		func(i C.uint32_t, oi *C.ctn_op_info) C.goctn_ret { return C.goctn_context_op_info(c.ptr, i, oi) },
		func(oi *C.ctn_op_info) OpInfo {
			return OpInfo{Name: goString(oi.name), NumInputs: int(oi.n_inputs), Attributes: goString(oi.attributes),
				Doc: goString(oi.doc), Origin: goString(oi.origin), OriginPath: goString(oi.origin_path),
				Differentiable: oi.differentiable != 0, Elementwise: oi.flags&C.CTN_OP_INFO_ELEMENTWISE != 0}
		})
}

// OpSupport says whether backend runs op for dtype dt, and if not, why (the op's refusal of the
// dtype or the backend's reason). An unknown op or backend, or an unavailable backend, is an
// error.
func (c *Context) OpSupport(backend, op string, dt DType) (bool, string, error) {
	if err := c.use(); err != nil {
		return false, "", err
	}
	defer c.h.release()
	var cs cstrings
	defer cs.free()
	b, err := cs.add(backend, "backend")
	if err != nil {
		return false, "", err
	}
	o, err := cs.add(op, "op")
	if err != nil {
		return false, "", err
	}
	var ok C.int32_t
	var reason *C.char
	// The library's reason lives until the next call on the same OS thread, which another
	// goroutine may make: goctn_op_support copies it in the same C call.
	if err := check(C.goctn_op_support(unsafe.Pointer(c.ptr), b, o, C.ctn_dtype(dt), &ok, &reason)); err != nil {
		return false, "", err
	}
	defer C.free(unsafe.Pointer(reason))
	return ok != 0, goString(reason), nil
}
