package chutney

/*
#include "shim.h"
*/
import "C"

// Typed helpers for the built-in ops of chutney.h; each equals Op with the name and attributes
// of ops.h. Elementwise binary ops broadcast as numpy does. Like every building call they
// return the new node and record the first failure in the graph (see Graph).

type unaryFn func(*C.ctn_graph, C.ctn_node, *C.ctn_node) C.goctn_ret
type binaryFn func(*C.ctn_graph, C.ctn_node, C.ctn_node, *C.ctn_node) C.goctn_ret

func (g *Graph) unary(op string, a Node, f unaryFn) Node {
	return g.build(op, func(out *C.ctn_node) C.goctn_ret { return f(g.ptr, a.id, out) }, a)
}

func (g *Graph) binary(op string, a, b Node, f binaryFn) Node {
	return g.build(op, func(out *C.ctn_node) C.goctn_ret { return f(g.ptr, a.id, b.id, out) }, a, b)
}

// Add is a + b (broadcasting).
func (g *Graph) Add(a, b Node) Node {
	return g.binary("Add", a, b, func(p *C.ctn_graph, x, y C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_add(p, x, y, o) })
}

// Sub is a - b (broadcasting).
func (g *Graph) Sub(a, b Node) Node {
	return g.binary("Sub", a, b, func(p *C.ctn_graph, x, y C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_sub(p, x, y, o) })
}

// Mul is a * b (broadcasting).
func (g *Graph) Mul(a, b Node) Node {
	return g.binary("Mul", a, b, func(p *C.ctn_graph, x, y C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_mul(p, x, y, o) })
}

// Div is a / b (broadcasting).
func (g *Graph) Div(a, b Node) Node {
	return g.binary("Div", a, b, func(p *C.ctn_graph, x, y C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_div(p, x, y, o) })
}

// Pow is a ^ b (broadcasting).
func (g *Graph) Pow(a, b Node) Node {
	return g.binary("Pow", a, b, func(p *C.ctn_graph, x, y C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_pow(p, x, y, o) })
}

// Neg is -a, elementwise.
func (g *Graph) Neg(a Node) Node {
	return g.unary("Neg", a, func(p *C.ctn_graph, x C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_neg(p, x, o) })
}

// Exp is e^a, elementwise.
func (g *Graph) Exp(a Node) Node {
	return g.unary("Exp", a, func(p *C.ctn_graph, x C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_exp(p, x, o) })
}

// Log is the natural logarithm of a, elementwise.
func (g *Graph) Log(a Node) Node {
	return g.unary("Log", a, func(p *C.ctn_graph, x C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_log(p, x, o) })
}

// Sqrt is the square root of a, elementwise.
func (g *Graph) Sqrt(a Node) Node {
	return g.unary("Sqrt", a, func(p *C.ctn_graph, x C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_sqrt(p, x, o) })
}

// Abs is |a|, elementwise.
func (g *Graph) Abs(a Node) Node {
	return g.unary("Abs", a, func(p *C.ctn_graph, x C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_abs(p, x, o) })
}

// Tanh is tanh(a), elementwise.
func (g *Graph) Tanh(a Node) Node {
	return g.unary("Tanh", a, func(p *C.ctn_graph, x C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_tanh(p, x, o) })
}

// Sigmoid is 1 / (1 + e^-a), elementwise.
func (g *Graph) Sigmoid(a Node) Node {
	return g.unary("Sigmoid", a, func(p *C.ctn_graph, x C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_sigmoid(p, x, o) })
}

// Relu is max(a, 0), elementwise.
func (g *Graph) Relu(a Node) Node {
	return g.unary("Relu", a, func(p *C.ctn_graph, x C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_relu(p, x, o) })
}

// Gelu is the exact GELU of a, 0.5 a (1 + erf(a / sqrt 2)), elementwise.
func (g *Graph) Gelu(a Node) Node {
	return g.unary("Gelu", a, func(p *C.ctn_graph, x C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_gelu(p, x, o) })
}

// LeakyReLU is a for a > 0, else slope * a.
func (g *Graph) LeakyReLU(a Node, slope float64) Node {
	return g.build("LeakyReLU", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_leaky_relu(g.ptr, a.id, C.double(slope), out)
	}, a)
}

// Clamp limits a to [lo, hi].
func (g *Graph) Clamp(a Node, lo, hi float64) Node {
	return g.build("Clamp", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_clamp(g.ptr, a.id, C.double(lo), C.double(hi), out)
	}, a)
}

func cbool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// MatMul is the batched matrix product over the last two dims (leading dims broadcast);
// transA/transB transpose an operand's last two dims first. Both operands are at least 2-d.
func (g *Graph) MatMul(a, b Node, transA, transB bool) Node {
	return g.build("MatMul", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_matmul(g.ptr, a.id, b.id, cbool(transA), cbool(transB), out)
	}, a, b)
}

type reduceFn func(*C.ctn_graph, C.ctn_node, C.uint32_t, *C.int32_t, C.int32_t, *C.ctn_node) C.goctn_ret

func (g *Graph) reduce(op string, a Node, axes []int, keepdims bool, f reduceFn) Node {
	ax := int32s(axes)
	return g.build(op, func(out *C.ctn_node) C.goctn_ret {
		return f(g.ptr, a.id, C.uint32_t(len(ax)), int32Ptr(ax), cbool(keepdims), out)
	}, a)
}

// Sum adds over axes (none: every axis); negative axes count from the end.
func (g *Graph) Sum(a Node, axes []int, keepdims bool) Node {
	return g.reduce("Sum", a, axes, keepdims, func(p *C.ctn_graph, x C.ctn_node, n C.uint32_t, ax *C.int32_t, k C.int32_t, o *C.ctn_node) C.goctn_ret {
		return C.goctn_sum(p, x, n, ax, k, o)
	})
}

// Mean averages over axes (none: every axis).
func (g *Graph) Mean(a Node, axes []int, keepdims bool) Node {
	return g.reduce("Mean", a, axes, keepdims, func(p *C.ctn_graph, x C.ctn_node, n C.uint32_t, ax *C.int32_t, k C.int32_t, o *C.ctn_node) C.goctn_ret {
		return C.goctn_mean(p, x, n, ax, k, o)
	})
}

// Max is the maximum over axes (none: every axis).
func (g *Graph) Max(a Node, axes []int, keepdims bool) Node {
	return g.reduce("Max", a, axes, keepdims, func(p *C.ctn_graph, x C.ctn_node, n C.uint32_t, ax *C.int32_t, k C.int32_t, o *C.ctn_node) C.goctn_ret {
		return C.goctn_max(p, x, n, ax, k, o)
	})
}

// Reshape gives a a new shape; one dim may be -1.
func (g *Graph) Reshape(a Node, shape ...int64) Node {
	if g != nil && g.err == nil && g.record(shapeOK("Reshape", shape)) != nil {
		return Node{}
	}
	return g.build("Reshape", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_reshape(g.ptr, a.id, C.uint32_t(len(shape)), shapePtr(shape), out)
	}, a)
}

// Permute reorders the axes: out.shape[i] = a.shape[perm[i]]; perm has one entry per axis.
func (g *Graph) Permute(a Node, perm ...int) Node {
	if g != nil && g.err == nil && a.g == g {
		if _, s, err := g.NodeInfo(a); err == nil && len(s) != len(perm) {
			g.record(newError(StatusShape, "Permute: %d axes for a node of shape %v", len(perm), s))
			return Node{}
		}
	}
	p32 := int32s(perm)
	return g.build("Permute", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_permute(g.ptr, a.id, int32Ptr(p32), out)
	}, a)
}

// Transpose swaps the last two axes.
func (g *Graph) Transpose(a Node) Node {
	return g.unary("Transpose", a, func(p *C.ctn_graph, x C.ctn_node, o *C.ctn_node) C.goctn_ret { return C.goctn_transpose(p, x, o) })
}

// Slice takes axis `axis` from start (inclusive) to stop (exclusive) with step > 0; negative
// bounds count from the end and are clamped as in numpy.
func (g *Graph) Slice(a Node, axis int, start, stop, step int64) Node {
	return g.build("Slice", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_slice(g.ptr, a.id, C.int32_t(clampInt32(axis)), C.int64_t(start), C.int64_t(stop), C.int64_t(step), out)
	}, a)
}

// Concat joins inputs along axis.
func (g *Graph) Concat(axis int, inputs ...Node) Node {
	ids := nodeIDs(inputs)
	return g.build("Concat", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_concat(g.ptr, C.uint32_t(len(inputs)), &ids[0], C.int32_t(clampInt32(axis)), out)
	}, inputs...)
}

// BroadcastTo expands a to shape (numpy rules).
func (g *Graph) BroadcastTo(a Node, shape ...int64) Node {
	if g != nil && g.err == nil && g.record(shapeOK("BroadcastTo", shape)) != nil {
		return Node{}
	}
	return g.build("BroadcastTo", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_broadcast_to(g.ptr, a.id, C.uint32_t(len(shape)), shapePtr(shape), out)
	}, a)
}

// Compare gives a Bool node: op is one of "eq" "ne" "lt" "le" "gt" "ge".
func (g *Graph) Compare(op string, a, b Node) Node {
	return g.withString("Compare", op, func(p *C.char, out *C.ctn_node) C.goctn_ret {
		return C.goctn_compare(g.ptr, p, a.id, b.id, out)
	}, a, b)
}

// Where is cond ? a : b elementwise; cond is Bool; all three broadcast.
func (g *Graph) Where(cond, a, b Node) Node {
	return g.build("Where", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_where(g.ptr, cond.id, a.id, b.id, out)
	}, cond, a, b)
}

// Softmax along axis.
func (g *Graph) Softmax(a Node, axis int) Node {
	return g.build("Softmax", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_softmax(g.ptr, a.id, C.int32_t(clampInt32(axis)), out)
	}, a)
}

// LogSoftmax along axis.
func (g *Graph) LogSoftmax(a Node, axis int) Node {
	return g.build("LogSoftmax", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_log_softmax(g.ptr, a.id, C.int32_t(clampInt32(axis)), out)
	}, a)
}

// CrossEntropy is the mean cross-entropy of logits [N, C] against integer labels [N] (Int32
// or Int64): a 0-d node.
func (g *Graph) CrossEntropy(logits, labels Node) Node {
	return g.binary("CrossEntropy", logits, labels, func(p *C.ctn_graph, x, y C.ctn_node, o *C.ctn_node) C.goctn_ret {
		return C.goctn_cross_entropy(p, x, y, o)
	})
}

// Cast converts a to dtype dt.
func (g *Graph) Cast(a Node, dt DType) Node {
	return g.build("Cast", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_cast(g.ptr, a.id, C.ctn_dtype(dt), out)
	}, a)
}
