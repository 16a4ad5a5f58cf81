package chutney

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"unsafe"
)

// Model is the layer library's model (nn.h): it adds layers (ordinary graph nodes and
// variables) to a graph, names and initialises their variables from a seed, and adds the
// optimizer. Layer calls are building calls: they return the node and record the first failure
// in the graph (Graph.Err). A Model keeps its graph alive until the model is closed.
type Model struct {
	h   handle
	ptr *C.ctn_model
	g   *Graph
}

func (m *Model) hdl() *handle { return &m.h }

func (m *Model) use() error { return useOwner(m, "Model") }

// NewModel creates a model that builds into g; dt (Float32 or Float64) is the dtype of every
// parameter, seed fixes every initialisation and dropout mask (parameter "name" gets a stream
// derived from (seed, name)).
func (g *Graph) NewModel(dt DType, seed uint64) (*Model, error) {
	if err := g.use(); err != nil {
		return nil, err
	}
	var p *C.ctn_model
	if err := check(C.goctn_model_create(g.ptr, C.ctn_dtype(dt), C.uint64_t(seed), &p)); err != nil {
		g.h.release()
		return nil, err
	}
	gh := &g.h
	m := &Model{ptr: p, g: g}
	m.h.init("Model", func() {
		C.ctn_model_release(p)
		gh.release()
	})
	return track(m), nil
}

// Close releases the model's bookkeeping (the graph and its nodes stay). Idempotent.
func (m *Model) Close() error { return closeOwner(m) }

// Graph is the graph the model builds into.
func (m *Model) Graph() *Graph {
	if m == nil {
		return nil
	}
	return m.g
}

// call runs a non-building call on the model.
func (m *Model) call(f func() C.goctn_ret) error {
	if err := m.use(); err != nil {
		return err
	}
	defer m.h.release()
	return check(f())
}

// build runs a layer call: skipped after a recorded failure, its own failure recorded.
func (m *Model) build(op string, f func(out *C.ctn_node) C.goctn_ret, in ...Node) Node {
	if m == nil {
		return Node{}
	}
	if err := m.h.acquire(); err != nil {
		m.g.record(err)
		return Node{}
	}
	defer m.h.release()
	return m.g.build(op, f, in...)
}

// begin prepares a layer call with several results: both the model and its graph are held
// until done is called; false after a failure (recorded in the graph).
func (m *Model) begin(op string, in []Node) (done func(), ok bool) {
	if m == nil || !m.g.begin(op, in) {
		return nil, false
	}
	if err := m.h.acquire(); err != nil {
		m.g.h.release()
		m.g.record(err)
		return nil, false
	}
	return func() { m.h.release(); m.g.h.release() }, true
}

// SetTraining selects training (true, the default) or inference behaviour for layers built
// afterwards (batch norm statistics, dropout).
func (m *Model) SetTraining(training bool) error {
	return m.call(func() C.goctn_ret { return C.goctn_model_set_training(m.ptr, cbool(training)) })
}

// NameNext names the next layer: its variables become "<name>.weight" and so on. A name in use
// with the same shape shares the variable.
func (m *Model) NameNext(name string) error {
	var cs cstrings
	defer cs.free()
	p, err := cs.add(name, "NameNext")
	if err != nil {
		return err
	}
	return m.call(func() C.goctn_ret { return C.goctn_model_name_next(m.ptr, p) })
}

// ResetNames restarts the automatic layer counters, so that building the same layers again
// reuses their variables.
func (m *Model) ResetNames() error {
	return m.call(func() C.goctn_ret { return C.goctn_model_reset_names(m.ptr) })
}

// InitFill fills contiguous Float32/Float64 tensor t by kind; gain 0 picks the kind's default.
// The values depend only on (kind, fans, gain, seed, size).
func InitFill(t *Tensor, kind Init, fanIn, fanOut int64, gain float64, seed uint64) error {
	if err := t.use(); err != nil {
		return err
	}
	defer t.h.release()
	return check(C.goctn_nn_init_fill(t.ptr, C.ctn_init(kind), C.int64_t(fanIn), C.int64_t(fanOut), C.double(gain), C.uint64_t(seed)))
}

// SetInit picks the weight initialiser of Linear and Conv2D layers built afterwards.
func (m *Model) SetInit(kind Init, gain float64) error {
	return m.call(func() C.goctn_ret { return C.goctn_model_set_init(m.ptr, C.ctn_init(kind), C.double(gain)) })
}

// VarKind is a bit set of model variable kinds.
type VarKind uint32

// Model variable kinds.
const (
	VarParameter VarKind = C.CTN_VAR_PARAMETER // trained
	VarBuffer    VarKind = C.CTN_VAR_BUFFER    // layer state: batch-norm running statistics
	VarOptimizer VarKind = C.CTN_VAR_OPTIMIZER // optimizer state: momentum, Adam moments
	VarAll               = VarParameter | VarBuffer | VarOptimizer
)

// Variable adds (or returns the existing) model variable name of the model's dtype, initialised
// by init; kind is one VarKind.
func (m *Model) Variable(name string, kind VarKind, shape []int64, init Init, fanIn, fanOut int64, gain float64) Node {
	if m == nil {
		return Node{}
	}
	if m.g.err == nil && m.g.record(shapeOK("Variable", shape)) != nil {
		return Node{}
	}
	var cs cstrings
	defer cs.free()
	p, err := cs.add(name, "Variable")
	if err != nil {
		m.g.record(err)
		return Node{}
	}
	return m.build("Variable", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_model_variable(m.ptr, p, C.uint32_t(kind), C.uint32_t(len(shape)), shapePtr(shape),
			C.ctn_init(init), C.int64_t(fanIn), C.int64_t(fanOut), C.double(gain), out)
	})
}

// AdoptVariable makes the existing variable node v of the model's graph (a Graph.Variable, or a
// floating initializer of an imported ONNX model) a model variable of kind named name ("": the
// variable's own name), so Minimize trains it, Variables lists it and CopyState moves it: how an
// imported model is fine-tuned. Adopting the same node under the same name and kind again does
// nothing. Since ABI 1.5.
func (m *Model) AdoptVariable(v Node, kind VarKind, name string) error {
	if m == nil {
		return nilError("Model")
	}
	if v.g != m.g {
		return newError(StatusInvalidArgument, "AdoptVariable: the node is not of the model's graph")
	}
	var cs cstrings
	defer cs.free()
	var p *C.char
	if name != "" {
		var err error
		if p, err = cs.add(name, "AdoptVariable"); err != nil {
			return err
		}
	}
	return m.call(func() C.goctn_ret { return C.goctn_model_adopt_variable(m.ptr, v.id, C.uint32_t(kind), p) })
}

// NamedNode is a model variable: its name and node.
type NamedNode struct {
	Name string
	Node Node
}

// Variables lists the variables of the given kinds in creation order: what to checkpoint
// (VarAll) or to differentiate (VarParameter).
func (m *Model) Variables(kinds VarKind) ([]NamedNode, error) {
	if err := m.use(); err != nil {
		return nil, err
	}
	defer m.h.release()
	var n C.uint32_t
	var names **C.char
	var nodes *C.ctn_node
	if err := check(C.goctn_model_variables(m.ptr, C.uint32_t(kinds), &n, &names, &nodes)); err != nil {
		return nil, err
	}
	out := make([]NamedNode, int(n))
	if n == 0 {
		return out, nil
	}
	ns := unsafe.Slice(names, int(n))
	ids := unsafe.Slice(nodes, int(n))
	for i := range out {
		out[i] = NamedNode{Name: goString(ns[i]), Node: Node{g: m.g, id: ids[i]}}
	}
	return out, nil
}

// CopyState copies, for every variable name present in both models, the current value from
// srcPlan (compiled from src's graph) into dstPlan (compiled from dst's graph): train -> eval.
// It returns the number of variables copied.
func CopyState(src *Model, srcPlan *Plan, dst *Model, dstPlan *Plan) (int, error) {
	done, err := acquireAll(src, srcPlan, dst, dstPlan)
	if err != nil {
		return 0, err
	}
	defer done()
	defer lockPlans(srcPlan, dstPlan)()
	var n C.uint32_t
	if err := check(C.goctn_model_copy_state(src.ptr, srcPlan.ptr, dst.ptr, dstPlan.ptr, &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Step is the model's 0-d Int64 input "step" (the update number, from 1), which dropout and
// Adam read.
func (m *Model) Step() Node {
	return m.build("Step", func(out *C.ctn_node) C.goctn_ret { return C.goctn_model_step(m.ptr, out) })
}

// LR is the model's 0-d input "lr" of the model's dtype.
func (m *Model) LR() Node {
	return m.build("LR", func(out *C.ctn_node) C.goctn_ret { return C.goctn_model_lr(m.ptr, out) })
}

// SetStep sets the value Run feeds to "step" (>= 1).
func (m *Model) SetStep(step int64) error {
	return m.call(func() C.goctn_ret { return C.goctn_model_set_step(m.ptr, C.int64_t(step)) })
}

// SetLR sets the value Run feeds to "lr".
func (m *Model) SetLR(lr float64) error {
	return m.call(func() C.goctn_ret { return C.goctn_model_set_lr(m.ptr, C.double(lr)) })
}

// Run is Plan.Run with the model's step and learning rate appended to the feeds; p must be
// compiled from the model's graph.
func (m *Model) Run(p *Plan, feeds []Feed, outputs ...*Tensor) error {
	if err := m.use(); err != nil {
		return err
	}
	defer m.h.release()
	if p != nil && p.graph != m.g.serial {
		return newError(StatusInvalidArgument, "Model.Run: the plan was not compiled from the model's graph")
	}
	return p.run(m, nil, feeds, outputs)
}

// RunContext is Model.Run that ctx can cancel, with ctx's deadline (Plan.RunContext).
func (m *Model) RunContext(ctx context.Context, p *Plan, feeds []Feed, outputs ...*Tensor) error {
	if err := m.use(); err != nil {
		return err
	}
	defer m.h.release()
	if p != nil && p.graph != m.g.serial {
		return newError(StatusInvalidArgument, "Model.RunContext: the plan was not compiled from the model's graph")
	}
	return p.runContext(ctx, m, RunOptions{}, feeds, outputs)
}

// ---- layers ----------------------------------------------------------------------------------

// Linear is x @ weight^T + bias: x [..., in] -> [..., out]; weight [out, in], bias [out]
// when bias is true.
func (m *Model) Linear(x Node, in, out int64, bias bool) Node {
	return m.build("Linear", func(o *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_linear(m.ptr, x.id, C.int64_t(in), C.int64_t(out), cbool(bias), o)
	}, x)
}

// Conv2D is a square convolution with bias: x [N, in, H, W] -> [N, out, Ho, Wo].
func (m *Model) Conv2D(x Node, in, out int64, kernel, stride, pad int) Node {
	return m.build("Conv2D", func(o *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_conv2d(m.ptr, x.id, C.int64_t(in), C.int64_t(out), i32(kernel), i32(stride), i32(pad), o)
	}, x)
}

// BatchNorm normalises over axis 1 of x [N, C, ...] with a learnt scale and shift and running
// statistics (momentum 0 picks 0.1, eps 0 picks 1e-5).
func (m *Model) BatchNorm(x Node, channels int64, momentum, eps float64) Node {
	return m.build("BatchNorm", func(o *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_batch_norm(m.ptr, x.id, C.int64_t(channels), C.double(momentum), C.double(eps), o)
	}, x)
}

// LayerNorm normalises over the last axis (size features); eps 0 picks 1e-5.
func (m *Model) LayerNorm(x Node, features int64, eps float64) Node {
	return m.build("LayerNorm", func(o *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_layer_norm(m.ptr, x.id, C.int64_t(features), C.double(eps), o)
	}, x)
}

// Dropout drops with probability p while training; the identity in inference.
func (m *Model) Dropout(x Node, p float64) Node {
	return m.build("Dropout", func(o *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_dropout(m.ptr, x.id, C.double(p), o)
	}, x)
}

// Embedding picks rows of a learnt [num, dim] table by integer ids.
func (m *Model) Embedding(ids Node, num, dim int64) Node {
	return m.build("Embedding", func(o *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_embedding(m.ptr, ids.id, C.int64_t(num), C.int64_t(dim), o)
	}, ids)
}

// LSTM runs an LSTM over xSeq [T, N, I] (zero initial state) and returns every step's hidden
// state [T, N, H] and the last one [N, H].
func (m *Model) LSTM(xSeq Node, hidden int64) (hSeq, hLast Node) {
	done, ok := m.begin("LSTM", []Node{xSeq})
	if !ok {
		return Node{}, Node{}
	}
	defer done()
	var s, l C.ctn_node
	if m.g.record(check(C.goctn_nn_lstm(m.ptr, xSeq.id, C.int64_t(hidden), &s, &l))) != nil {
		return Node{}, Node{}
	}
	return Node{g: m.g, id: s}, Node{g: m.g, id: l}
}

// ReLU is max(x, 0).
func (m *Model) ReLU(x Node) Node {
	return m.build("ReLU", func(o *C.ctn_node) C.goctn_ret { return C.goctn_nn_relu(m.ptr, x.id, o) }, x)
}

// MaxPool2D is a square max pool (stride 0: the window size).
func (m *Model) MaxPool2D(x Node, kernel, stride int) Node {
	return m.build("MaxPool2D", func(o *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_max_pool2d(m.ptr, x.id, i32(kernel), i32(stride), o)
	}, x)
}

// Flatten reshapes [N, ...] to [N, prod(...)].
func (m *Model) Flatten(x Node) Node {
	return m.build("Flatten", func(o *C.ctn_node) C.goctn_ret { return C.goctn_nn_flatten(m.ptr, x.id, o) }, x)
}

// Layer is one layer of a Sequential stack (ctn_layer); unused fields zero. The constructors
// below cover the common cases.
type Layer struct {
	Kind   LayerKind
	Units  int     // Linear: out features; Conv2D: out channels
	Kernel int     // Conv2D, pools: square window
	Stride int     // Conv2D, pools
	Pad    int     // Conv2D, pools
	NoBias bool    // Linear, Conv2D
	P      float64 // Dropout: drop probability; BatchNorm: momentum
	Eps    float64 // BatchNorm, LayerNorm
	Name   string  // "" : automatic ("linear1", ...)
}

// LinearLayer is a Linear layer with out features (the input size comes from x).
func LinearLayer(out int) Layer { return Layer{Kind: LayerLinear, Units: out} }

// Conv2DLayer is a square convolution with out channels.
func Conv2DLayer(out, kernel, stride, pad int) Layer {
	return Layer{Kind: LayerConv2D, Units: out, Kernel: kernel, Stride: stride, Pad: pad}
}

// BatchNormLayer is batch normalisation with the default momentum and eps.
func BatchNormLayer() Layer { return Layer{Kind: LayerBatchNorm} }

// LayerNormLayer is layer normalisation over the last axis.
func LayerNormLayer() Layer { return Layer{Kind: LayerLayerNorm} }

// DropoutLayer drops with probability p.
func DropoutLayer(p float64) Layer { return Layer{Kind: LayerDropout, P: p} }

// ReLULayer, TanhLayer and SigmoidLayer are activations.
func ReLULayer() Layer { return Layer{Kind: LayerReLU} }

// TanhLayer is tanh.
func TanhLayer() Layer { return Layer{Kind: LayerTanh} }

// SigmoidLayer is the logistic sigmoid.
func SigmoidLayer() Layer { return Layer{Kind: LayerSigmoid} }

// MaxPool2DLayer is a square max pool with stride = kernel.
func MaxPool2DLayer(kernel int) Layer { return Layer{Kind: LayerMaxPool2D, Kernel: kernel} }

// AvgPool2DLayer is a square average pool with stride = kernel.
func AvgPool2DLayer(kernel int) Layer { return Layer{Kind: LayerAvgPool2D, Kernel: kernel} }

// FlattenLayer reshapes [N, ...] to [N, prod(...)].
func FlattenLayer() Layer { return Layer{Kind: LayerFlatten} }

// Sequential applies layers in order to x.
func (m *Model) Sequential(x Node, layers ...Layer) Node {
	if m == nil {
		return Node{}
	}
	var cs cstrings
	defer cs.free()
	// Go memory holding C pointers (the names) only: allowed by the cgo rules.
	cl := make([]C.ctn_layer, len(layers)+1)
	for i, l := range layers {
		c := &cl[i]
		c.kind = C.int32_t(l.Kind)
		c.units, c.kernel, c.stride, c.pad = i32(l.Units), i32(l.Kernel), i32(l.Stride), i32(l.Pad)
		if l.NoBias {
			c.flags = C.CTN_LAYER_NO_BIAS
		}
		c.p, c.eps = C.double(l.P), C.double(l.Eps)
		if l.Name != "" {
			p, err := cs.add(l.Name, "Layer.Name")
			if err != nil {
				m.g.record(err)
				return Node{}
			}
			c.name = p
		}
	}
	return m.build("Sequential", func(o *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_sequential(m.ptr, x.id, C.uint32_t(len(layers)), &cl[0], o)
	}, x)
}

// ---- optimizers ------------------------------------------------------------------------------

// grads runs an optimizer call over one gradient per trainable parameter.
func (m *Model) optim(op string, grads []Node, f func(ids *C.ctn_node) C.goctn_ret) {
	ids := nodeIDs(grads)
	m.build(op, func(*C.ctn_node) C.goctn_ret { return f(&ids[0]) }, grads...)
}

// SGD adds SGD updates for every parameter (grads[i]: the gradient of parameter i of
// Variables(VarParameter)).
func (m *Model) SGD(grads []Node, momentum float64, nesterov bool, weightDecay float64) {
	m.optim("SGD", grads, func(ids *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_sgd(m.ptr, ids, C.double(momentum), cbool(nesterov), C.double(weightDecay))
	})
}

// Adam adds Adam updates (L2 weight decay added to the gradient).
func (m *Model) Adam(grads []Node, beta1, beta2, eps, weightDecay float64) {
	m.optim("Adam", grads, func(ids *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_adam(m.ptr, ids, C.double(beta1), C.double(beta2), C.double(eps), C.double(weightDecay))
	})
}

// AdamW adds AdamW updates (decoupled weight decay).
func (m *Model) AdamW(grads []Node, beta1, beta2, eps, weightDecay float64) {
	m.optim("AdamW", grads, func(ids *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_adamw(m.ptr, ids, C.double(beta1), C.double(beta2), C.double(eps), C.double(weightDecay))
	})
}

// ClipGradNorm scales grads so that their global norm is at most maxNorm; it returns the
// clipped gradients and the norm before clipping.
func (m *Model) ClipGradNorm(grads []Node, maxNorm float64) (clipped []Node, norm Node) {
	clipped = make([]Node, len(grads))
	done, ok := m.begin("ClipGradNorm", grads)
	if !ok {
		return clipped, Node{}
	}
	defer done()
	ids := nodeIDs(grads)
	out := make([]C.ctn_node, len(grads)+1)
	var n C.ctn_node
	if m.g.record(check(C.goctn_nn_clip_grad_norm(m.ptr, C.uint32_t(len(grads)), &ids[0], C.double(maxNorm), &out[0], &n))) != nil {
		return clipped, Node{}
	}
	for i := range clipped {
		clipped[i] = Node{g: m.g, id: out[i]}
	}
	return clipped, Node{g: m.g, id: n}
}

// OptimKind selects the optimizer of Minimize.
type OptimKind int32

// Optimizers.
const (
	OptimSGD   OptimKind = C.CTN_OPTIM_SGD
	OptimAdam  OptimKind = C.CTN_OPTIM_ADAM
	OptimAdamW OptimKind = C.CTN_OPTIM_ADAMW
)

// Optimizer configures Minimize; zero fields pick the defaults (lr 0.01; Adam betas 0.9,
// 0.999, eps 1e-8).
type Optimizer struct {
	Kind         OptimKind
	LR           float64
	Momentum     float64 // SGD
	Nesterov     bool    // SGD
	WeightDecay  float64
	Beta1, Beta2 float64 // Adam, AdamW
	Eps          float64 // Adam, AdamW
	ClipNorm     float64 // > 0: global-norm clipping before the update
}

// Minimize adds the whole training step: gradients of loss with respect to every trainable
// parameter, optional clipping, the optimizer's updates. It returns the global gradient norm
// (before clipping).
func (m *Model) Minimize(loss Node, opt Optimizer) Node {
	var o C.ctn_optimizer
	o.struct_size = C.uint32_t(unsafe.Sizeof(o))
	o.kind = C.int32_t(opt.Kind)
	o.lr = C.double(opt.LR)
	o.momentum = C.double(opt.Momentum)
	o.nesterov = cbool(opt.Nesterov)
	o.weight_decay = C.double(opt.WeightDecay)
	o.beta1, o.beta2, o.eps = C.double(opt.Beta1), C.double(opt.Beta2), C.double(opt.Eps)
	o.clip_norm = C.double(opt.ClipNorm)
	return m.build("Minimize", func(out *C.ctn_node) C.goctn_ret {
		return C.goctn_nn_minimize(m.ptr, loss.id, &o, out)
	}, loss)
}

// LRKind is a learning-rate schedule.
type LRKind int32

// Schedules.
const (
	LRConstant LRKind = C.CTN_LR_CONSTANT
	LRStep     LRKind = C.CTN_LR_STEP   // base * gamma ^ floor(e / StepSize)
	LRCosine   LRKind = C.CTN_LR_COSINE // min + (base - min) (1 + cos(pi min(e, T) / T)) / 2
	LRLinear   LRKind = C.CTN_LR_LINEAR // base + (min - base) min(e, T) / T
)

// LRSchedule is a learning-rate schedule (ctn_lr_schedule), evaluated on the host.
type LRSchedule struct {
	Kind        LRKind
	BaseLR      float64
	WarmupSteps int64
	StepSize    int64   // Step
	Gamma       float64 // Step
	TotalSteps  int64   // Cosine, Linear
	MinLR       float64 // Cosine, Linear
}

// At is the learning rate at update step (>= 1).
func (s LRSchedule) At(step int64) (float64, error) {
	var c C.ctn_lr_schedule
	c.kind = C.int32_t(s.Kind)
	c.base_lr = C.double(s.BaseLR)
	c.warmup_steps = C.int64_t(s.WarmupSteps)
	c.step_size = C.int64_t(s.StepSize)
	c.gamma = C.double(s.Gamma)
	c.total_steps = C.int64_t(s.TotalSteps)
	c.min_lr = C.double(s.MinLR)
	var lr C.double
	if err := check(C.goctn_nn_lr_at(&c, C.int64_t(step), &lr)); err != nil {
		return 0, err
	}
	return float64(lr), nil
}

// user is implemented by every wrapper type: take a reference for a call.
type user interface {
	use() error
	hdl() *handle
}

// acquireAll takes a reference on each handle for one call, or none; done releases them.
func acquireAll(us ...user) (done func(), err error) {
	for i, u := range us {
		if err := u.use(); err != nil {
			for _, v := range us[:i] {
				v.hdl().release()
			}
			return nil, err
		}
	}
	return func() {
		for _, u := range us {
			u.hdl().release()
		}
	}, nil
}
