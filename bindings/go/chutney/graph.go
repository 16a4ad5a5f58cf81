package chutney

/*
#include "shim.h"
*/
import "C"

import (
	"sync/atomic"
)

// Graph is a DAG of ops (ctn_graph). A lazy graph is compiled into a Plan; an eager graph
// (NewEagerGraph) computes every node as it is added.
//
// Building follows the pattern of bufio.Writer: the methods that add nodes return only the
// Node; the first failure (a shape or dtype mismatch, a node of another graph...) is recorded,
// later building calls are skipped, and Err (or Compile) returns it. A failed call adds
// nothing to the graph.
//
// A Graph must not be used by two goroutines at once (the library's rule); Close may be called
// at any time.
type Graph struct {
	h      handle
	ptr    *C.ctn_graph
	ctx    *Context
	eager  bool
	serial uint64
	err    error
}

var graphSerial atomic.Uint64

func (g *Graph) hdl() *handle { return &g.h }

func (g *Graph) use() error { return useOwner(g, "Graph") }

// Node is a node of a graph: a value the graph computes. The zero Node is invalid (building
// calls that fail return it).
type Node struct {
	g  *Graph
	id C.ctn_node
}

// Valid reports whether n is a node returned by a successful building call.
func (n Node) Valid() bool { return n.g != nil }

// ID is the node's id in its graph.
func (n Node) ID() uint32 { return uint32(n.id) }

// NewGraph creates an empty lazy graph.
func (c *Context) NewGraph() (*Graph, error) { return c.newGraph(false) }

// NewEagerGraph creates an eager graph: each op executes when it is added (Value reads it), and
// Grad works the same way. Debug eagerly, then build the same code into a lazy graph.
func (c *Context) NewEagerGraph() (*Graph, error) { return c.newGraph(true) }

func (c *Context) newGraph(eager bool) (*Graph, error) {
	if err := c.use(); err != nil {
		return nil, err
	}
	var flags C.uint32_t
	if eager {
		flags = C.CTN_GRAPH_EAGER
	}
	var p *C.ctn_graph
	if err := check(C.goctn_graph_create(c.ptr, flags, &p)); err != nil {
		c.h.release()
		return nil, err
	}
	// The graph keeps the reference taken above on its context until it is released.
	ch := &c.h
	g := &Graph{ptr: p, ctx: c, eager: eager, serial: graphSerial.Add(1)}
	g.h.init("Graph", func() {
		C.ctn_graph_release(p)
		ch.release()
	})
	return track(g), nil
}

// Close releases the graph. Idempotent. Plans compiled from it stay valid.
func (g *Graph) Close() error { return closeOwner(g) }

// Err returns the first failure of a building call, or nil.
func (g *Graph) Err() error {
	if g == nil {
		return nilError("Graph")
	}
	return g.err
}

// ClearErr returns the recorded failure and forgets it, so that building can go on (the
// failed call added nothing).
func (g *Graph) ClearErr() error {
	if g == nil {
		return nilError("Graph")
	}
	err := g.err
	g.err = nil
	return err
}

// Eager reports whether the graph is eager.
func (g *Graph) Eager() bool { return g != nil && g.eager }

// begin prepares one building call: refuses when an error is recorded, the graph is closed or
// an input is not a node of this graph. On success the caller must call g.h.release().
func (g *Graph) begin(op string, in []Node) bool {
	if g == nil || g.err != nil {
		return false
	}
	if err := g.h.acquire(); err != nil {
		g.err = err
		return false
	}
	for i, n := range in {
		if n.g != g {
			g.h.release()
			switch {
			case n.g == nil:
				g.err = newError(StatusInvalidArgument, "%s: input %d is not a valid node (the zero Node, or the result of a failed call)", op, i)
			default:
				g.err = newError(StatusInvalidArgument, "%s: input %d is a node of another graph", op, i)
			}
			return false
		}
	}
	return true
}

// record keeps the first failure.
func (g *Graph) record(err error) error {
	if err != nil && g.err == nil {
		g.err = err
	}
	return err
}

// build runs one building call that produces a node.
func (g *Graph) build(op string, call func(out *C.ctn_node) C.goctn_ret, in ...Node) Node {
	if !g.begin(op, in) {
		return Node{}
	}
	defer g.h.release()
	var out C.ctn_node
	if g.record(check(call(&out))) != nil {
		return Node{}
	}
	return Node{g: g, id: out}
}

// withString runs a building call taking one C string (the name of an op or an input).
func (g *Graph) withString(op, s string, call func(p *C.char, out *C.ctn_node) C.goctn_ret, in ...Node) Node {
	if g == nil || g.err != nil {
		return Node{}
	}
	var cs cstrings
	defer cs.free()
	var p *C.char
	if s != "" {
		var err error
		if p, err = cs.add(s, op); err != nil {
			g.record(err)
			return Node{}
		}
	}
	return g.build(op, func(out *C.ctn_node) C.goctn_ret { return call(p, out) }, in...)
}

func nodeIDs(ns []Node) []C.ctn_node {
	ids := make([]C.ctn_node, len(ns)+1) // +1: a valid pointer even for no nodes
	for i, n := range ns {
		ids[i] = n.id
	}
	return ids
}

func shapeOK(op string, shape []int64) error {
	if len(shape) > MaxDims {
		return newError(StatusShape, "%s: shape %v has more than %d dimensions", op, shape, MaxDims)
	}
	return nil
}

// Input is a placeholder fed at run time (lazy graphs). name may be "".
func (g *Graph) Input(name string, dt DType, shape ...int64) Node {
	if g != nil && g.err == nil && g.record(shapeOK("Input", shape)) != nil {
		return Node{}
	}
	return g.withString("Input", name, func(p *C.char, out *C.ctn_node) C.goctn_ret {
		return C.goctn_input(g.ptr, p, C.ctn_dtype(dt), C.uint32_t(len(shape)), shapePtr(shape), out)
	})
}

// tensorArg runs a building call that reads a tensor (copied by the library).
func (g *Graph) tensorArg(op, name string, t *Tensor, call func(p *C.char, tp *C.ctn_tensor, out *C.ctn_node) C.goctn_ret) Node {
	if g == nil || g.err != nil {
		return Node{}
	}
	if g.record(t.use()) != nil {
		return Node{}
	}
	defer t.h.release()
	return g.withString(op, name, func(p *C.char, out *C.ctn_node) C.goctn_ret { return call(p, t.ptr, out) })
}

// Constant is a constant node holding a copy of t.
func (g *Graph) Constant(t *Tensor) Node {
	return g.tensorArg("Constant", "", t, func(_ *C.char, tp *C.ctn_tensor, out *C.ctn_node) C.goctn_ret {
		return C.goctn_constant(g.ptr, tp, out)
	})
}

// Scalar is a 0-d constant of dtype dt.
func (g *Graph) Scalar(dt DType, v float64) Node {
	return g.build("Scalar", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_scalar(g.ptr, C.ctn_dtype(dt), C.double(v), out)
	})
}

// Variable is persistent state initialised from a copy of init, updated by Assign and kept
// across runs of a plan.
func (g *Graph) Variable(name string, init *Tensor) Node {
	return g.tensorArg("Variable", name, init, func(p *C.char, tp *C.ctn_tensor, out *C.ctn_node) C.goctn_ret {
		return C.goctn_variable(g.ptr, p, tp, out)
	})
}

// Assign writes value into variable v after each run; the returned node evaluates to the new
// value. Reads of v in the same run see the old value.
func (g *Graph) Assign(v, value Node) Node {
	return g.build("Assign", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_assign(g.ptr, v.id, value.id, out)
	}, v, value)
}

// Attrs are an op's attributes (ctn_attrs): at most 16 integers and 4 floats, meaning what the
// op documents (ops.h).
type Attrs struct {
	Ints   []int64
	Floats []float64
}

const (
	maxAttrInts   = C.CTN_ATTR_INTS
	maxAttrFloats = C.CTN_ATTR_FLOATS
)

func (a *Attrs) toC(op string) (C.ctn_attrs, error) {
	var c C.ctn_attrs
	if a == nil {
		return c, nil
	}
	if len(a.Ints) > maxAttrInts || len(a.Floats) > maxAttrFloats {
		return c, newError(StatusInvalidArgument, "%s: %d integer and %d float attributes; at most %d and %d",
			op, len(a.Ints), len(a.Floats), maxAttrInts, maxAttrFloats)
	}
	for i, v := range a.Ints {
		c.i[i] = C.int64_t(v)
	}
	for i, v := range a.Floats {
		c.f[i] = C.double(v)
	}
	c.ni = C.uint32_t(len(a.Ints))
	c.nf = C.uint32_t(len(a.Floats))
	return c, nil
}

// Op adds any op by name, built in or from a loaded op library, with attributes (nil: none).
func (g *Graph) Op(name string, attrs *Attrs, inputs ...Node) Node {
	if g == nil || g.err != nil {
		return Node{}
	}
	ca, err := attrs.toC("Op(" + name + ")")
	if g.record(err) != nil {
		return Node{}
	}
	ids := nodeIDs(inputs)
	return g.withString("Op("+name+")", name, func(p *C.char, out *C.ctn_node) C.goctn_ret {
		return C.goctn_op(g.ptr, p, C.uint32_t(len(inputs)), &ids[0], &ca, out)
	}, inputs...)
}

// Grad appends the nodes computing d loss / d wrt[i] and returns them (zero Nodes after a
// failure). loss must be a floating node with one element.
func (g *Graph) Grad(loss Node, wrt ...Node) []Node {
	out := make([]Node, len(wrt))
	all := append([]Node{loss}, wrt...)
	if !g.begin("Grad", all) {
		return out
	}
	defer g.h.release()
	ids := nodeIDs(wrt)
	grads := make([]C.ctn_node, len(wrt)+1)
	if g.record(check(C.goctn_grad(g.ptr, loss.id, C.uint32_t(len(wrt)), &ids[0], &grads[0]))) != nil {
		return out
	}
	for i := range out {
		out[i] = Node{g: g, id: grads[i]}
	}
	return out
}

// JVP appends the forward-mode derivatives of outputs when inputs[j] moves along tangents[j]
// (nodes of the inputs' dtypes and shapes): the Jacobian-vector products, as ordinary nodes.
// Composes with Grad (the JVP of a gradient is a Hessian-vector product). An op without a
// tangent rule fails naming it, and the graph is left as it was.
func (g *Graph) JVP(outputs, inputs, tangents []Node) []Node {
	out := make([]Node, len(outputs))
	if len(inputs) != len(tangents) {
		g.record(newError(StatusInvalidArgument, "JVP: %d inputs but %d tangents", len(inputs), len(tangents)))
		return out
	}
	all := append(append(append([]Node{}, outputs...), inputs...), tangents...)
	if !g.begin("JVP", all) {
		return out
	}
	defer g.h.release()
	if len(outputs) == 0 || len(inputs) == 0 {
		g.record(newError(StatusInvalidArgument, "JVP: no outputs or no inputs"))
		return out
	}
	o, in, tg := nodeIDs(outputs), nodeIDs(inputs), nodeIDs(tangents)
	res := make([]C.ctn_node, len(outputs)+1)
	if g.record(check(C.goctn_jvp(g.ptr, C.uint32_t(len(outputs)), &o[0], C.uint32_t(len(inputs)), &in[0], &tg[0], &res[0]))) != nil {
		return out
	}
	for i := range out {
		out[i] = Node{g: g, id: res[i]}
	}
	return out
}

// NodeInfo returns a node's dtype and shape.
func (g *Graph) NodeInfo(n Node) (DType, []int64, error) {
	if err := g.use(); err != nil {
		return 0, nil, err
	}
	defer g.h.release()
	if n.g != g {
		return 0, nil, newError(StatusInvalidArgument, "NodeInfo: not a valid node of this graph")
	}
	var dt C.ctn_dtype
	var ndim C.uint32_t
	var shape [MaxDims]C.int64_t
	if err := check(C.goctn_node_info(g.ptr, n.id, &dt, &ndim, &shape[0])); err != nil {
		return 0, nil, err
	}
	s := make([]int64, int(ndim))
	for i := range s {
		s[i] = int64(shape[i])
	}
	return DType(dt), s, nil
}

// Shape is a node's shape, nil after an error (NodeInfo tells which).
func (n Node) Shape() []int64 {
	if n.g == nil {
		return nil
	}
	_, s, err := n.g.NodeInfo(n)
	if err != nil {
		return nil
	}
	return s
}

// NodeCount is the number of nodes in the graph.
func (g *Graph) NodeCount() (int, error) {
	n, err := getOwned(g, "Graph", func(n *C.uint32_t) C.goctn_ret { return C.goctn_graph_node_count(g.ptr, n) })
	return int(n), err
}

// Value returns a copy of an eager graph's value of node n.
func (g *Graph) Value(n Node) (*Tensor, error) {
	if err := g.use(); err != nil {
		return nil, err
	}
	defer g.h.release()
	if n.g != g {
		return nil, newError(StatusInvalidArgument, "Value: not a valid node of this graph")
	}
	var p *C.ctn_tensor
	if err := check(C.goctn_graph_value(g.ptr, n.id, &p)); err != nil {
		return nil, err
	}
	return adoptTensor(p)
}

// NodeBackend is the backend that computed node n of an eager graph ("" for leaves).
func (g *Graph) NodeBackend(n Node) (string, error) {
	if err := g.use(); err != nil {
		return "", err
	}
	defer g.h.release()
	if n.g != g {
		return "", newError(StatusInvalidArgument, "NodeBackend: not a valid node of this graph")
	}
	var name *C.char
	if err := check(C.goctn_graph_node_backend(g.ptr, n.id, &name)); err != nil {
		return "", err
	}
	return goString(name), nil
}

// Dot writes the graph as Graphviz DOT.
func (g *Graph) Dot() (string, error) {
	if err := g.use(); err != nil {
		return "", err
	}
	defer g.h.release()
	var text *C.char
	if err := check(C.goctn_graph_to_dot(g.ptr, &text)); err != nil {
		return "", err
	}
	return goString(text), nil
}
