package chutney

/*
#include "shim.h"
*/
import "C"

// Neural-network ops (chutney.h, since 1.1): layout NCHW, Float32 or Float64.

// Conv describes a 2-d convolution's geometry. Zero strides, dilations and groups mean 1.
type Conv struct {
	StrideH, StrideW int
	PadH, PadW       int
	DilH, DilW       int
	Groups           int
}

func one(v int) C.int32_t {
	if v == 0 {
		return 1
	}
	return C.int32_t(clampInt32(v))
}

func i32(v int) C.int32_t { return C.int32_t(clampInt32(v)) }

// Conv2D is the cross-correlation (no bias) of x [N,C,H,W] with w [O,C/groups,KH,KW].
func (g *Graph) Conv2D(x, w Node, c Conv) Node {
	return g.build("Conv2D", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_conv2d(g.ptr, x.id, w.id, one(c.StrideH), one(c.StrideW), i32(c.PadH), i32(c.PadW),
			one(c.DilH), one(c.DilW), one(c.Groups), out)
	}, x, w)
}

// ConvTranspose2D is the adjoint of Conv2D with respect to its input: x [N,C,H,W], w
// [C,O/groups,KH,KW]; outPadH/W are in [0, stride).
func (g *Graph) ConvTranspose2D(x, w Node, c Conv, outPadH, outPadW int) Node {
	return g.build("ConvTranspose2D", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_conv_transpose2d(g.ptr, x.id, w.id, one(c.StrideH), one(c.StrideW), i32(c.PadH), i32(c.PadW),
			one(c.DilH), one(c.DilW), one(c.Groups), i32(outPadH), i32(outPadW), out)
	}, x, w)
}

// Pool describes a pooling window. A zero stride means the window size.
type Pool struct {
	KernelH, KernelW int
	StrideH, StrideW int
	PadH, PadW       int
}

// MaxPool2D is max pooling of x [N,C,H,W].
func (g *Graph) MaxPool2D(x Node, p Pool) Node {
	return g.build("MaxPool2D", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_max_pool2d(g.ptr, x.id, i32(p.KernelH), i32(p.KernelW), i32(p.StrideH), i32(p.StrideW),
			i32(p.PadH), i32(p.PadW), out)
	}, x)
}

// AvgPool2D is average pooling of x [N,C,H,W]; countIncludePad divides by the window size,
// otherwise by the number of real elements under it.
func (g *Graph) AvgPool2D(x Node, p Pool, countIncludePad bool) Node {
	return g.build("AvgPool2D", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_avg_pool2d(g.ptr, x.id, i32(p.KernelH), i32(p.KernelW), i32(p.StrideH), i32(p.StrideW),
			i32(p.PadH), i32(p.PadW), cbool(countIncludePad), out)
	}, x)
}

// BatchNorm normalises x [N,C,...] with batch statistics (training mode), then scales by gamma
// [C] and shifts by beta [C].
func (g *Graph) BatchNorm(x, gamma, beta Node, eps float64) Node {
	return g.build("BatchNorm", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_batch_norm(g.ptr, x.id, gamma.id, beta.id, C.double(eps), out)
	}, x, gamma, beta)
}

// BatchNormInference normalises with given statistics mean [C] and variance [C].
func (g *Graph) BatchNormInference(x, gamma, beta, mean, variance Node, eps float64) Node {
	return g.build("BatchNormInference", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_batch_norm_inference(g.ptr, x.id, gamma.id, beta.id, mean.id, variance.id, C.double(eps), out)
	}, x, gamma, beta, mean, variance)
}

// LayerNorm normalises over axes firstAxis.. (negative counts from the end); gamma and beta
// have the shape of those axes.
func (g *Graph) LayerNorm(x, gamma, beta Node, firstAxis int, eps float64) Node {
	return g.build("LayerNorm", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_layer_norm(g.ptr, x.id, gamma.id, beta.id, i32(firstAxis), C.double(eps), out)
	}, x, gamma, beta)
}

// Dropout zeroes each element with probability p in [0, 1) and scales the rest by 1/(1-p); the
// mask depends only on (seed, the value of step (a one-element Int64 node), element index).
func (g *Graph) Dropout(x, step Node, p float64, seed int64) Node {
	return g.build("Dropout", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_dropout(g.ptr, x.id, step.id, C.double(p), C.int64_t(seed), out)
	}, x, step)
}

// Embedding picks rows of table [V,D] by integer ids [...] -> [..., D].
func (g *Graph) Embedding(table, ids Node) Node {
	return g.binary("Embedding", table, ids, func(p *C.ctn_graph, x, y C.ctn_node, o *C.ctn_node) C.goctn_ret {
		return C.goctn_embedding(p, x, y, o)
	})
}
