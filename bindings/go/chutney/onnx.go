package chutney

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"strings"
	"unsafe"
)

// ONNX import (onnx.h, since 1.2; docs/ONNX.md lists the supported ops and opsets).

// ONNXInput gives a graph input of an ONNX model a value: its dtype and shape replace the
// model's (how a symbolic dimension gets its size) and, with AsConstant, the value itself is
// baked into the graph as a constant (no input node is made), for inputs that ops need as
// constants (a Reshape's shape, a Slice's starts...).
type ONNXInput struct {
	Value      *Tensor
	AsConstant bool
}

// ONNXOptions are the options of Context.LoadONNX; the zero value (or nil) is the default.
type ONNXOptions struct {
	Inputs                  map[string]ONNXInput // by ONNX graph input name
	InitializersAsConstants bool                 // floating initializers become constants, not variables
	InspectOnly             bool                 // parse and check only: no graph (LoadONNX returns a nil *Graph)
	ExternalDataDir         string               // where external_data files are; "": the model's directory
}

// ONNXOpType is one op type an ONNX model uses: how many nodes use it, whether the importer
// supports it and, when imported, the chutney ops it was lowered to (empty when folded).
type ONNXOpType struct {
	Name      string
	Uses      int
	Supported bool
	LoweredTo []string
}

// ONNXModel lists what an imported ONNX model names: its inputs, outputs and initializers as
// nodes of the graph LoadONNX returned, its op types and versions. Close releases it (not the
// graph).
type ONNXModel struct {
	h     handle
	ptr   *C.ctn_onnx_model
	graph *Graph // nil for InspectOnly
}

func (m *ONNXModel) hdl() *handle { return &m.h }

func (m *ONNXModel) use() error { return useOwner(m, "ONNXModel") }

// Close releases the model handle; idempotent. The graph stays usable.
func (m *ONNXModel) Close() error { return closeOwner(m) }

// LoadONNX reads an ONNX model file into a new lazy graph of c: one input node per graph input,
// initializers as variables (or constants), each ONNX node lowered to chutney ops. opts may be
// nil. Errors: ErrInvalidArgument (an Inputs name the model lacks, a symbolic input dimension
// not given), ErrIO, ErrCorrupt (malformed file), ErrUnsupported (names the node and what is
// missing), ErrShape / ErrDType. Close both the graph and the model.
func (c *Context) LoadONNX(path string, opts *ONNXOptions) (*Graph, *ONNXModel, error) {
	var mp *C.ctn_onnx_model
	g, err := c.loadInto(path, func(cpath *C.char, cs *cstrings, gp **C.ctn_graph) error {
		var o C.ctn_onnx_options
		o.struct_size = C.uint32_t(unsafe.Sizeof(o))
		if opts != nil {
			if opts.InitializersAsConstants {
				o.flags |= C.CTN_ONNX_INITIALIZERS_AS_CONSTANTS
			}
			if opts.InspectOnly {
				o.flags |= C.CTN_ONNX_INSPECT_ONLY
			}
			if opts.ExternalDataDir != "" {
				var err error
				if o.external_data_dir, err = cs.add(opts.ExternalDataDir, "external data folder"); err != nil {
					return err
				}
			}
			if n := len(opts.Inputs); n > 0 {
				// C memory: the options struct points to the array, and cgo refuses Go memory
				// holding a Go pointer.
				specs := (*[1 << 20]C.ctn_onnx_input_spec)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.ctn_onnx_input_spec{}))))[:n:n]
				defer C.free(unsafe.Pointer(&specs[0]))
				i := 0
				for name, in := range opts.Inputs {
					if err := in.Value.use(); err != nil {
						return err
					}
					defer in.Value.h.release()
					var err error
					if specs[i].name, err = cs.add(name, "input name"); err != nil {
						return err
					}
					specs[i].value = in.Value.ptr
					if in.AsConstant {
						specs[i].as_constant = 1
					}
					i++
				}
				o.n_inputs = C.uint32_t(n)
				o.inputs = &specs[0]
			}
		}
		return check(C.goctn_onnx_load(c.ptr, cpath, &o, gp, &mp))
	})
	if err != nil {
		return nil, nil, err
	}
	m := &ONNXModel{ptr: mp, graph: g}
	m.h.init("ONNXModel", func() { C.ctn_onnx_model_release(mp) })
	track(m)
	return g, m, nil
}

// list reads the entries of one kind (CTN_ONNX_*); nodes are the graph's (invalid Nodes for
// inputs bound as constants and for InspectOnly models).
func (m *ONNXModel) list(kind C.int32_t) ([]NamedNode, error) {
	if err := m.use(); err != nil {
		return nil, err
	}
	defer m.h.release()
	var n C.uint32_t
	if err := check(C.goctn_onnx_model_count(m.ptr, kind, &n)); err != nil {
		return nil, err
	}
	out := make([]NamedNode, 0, int(n))
	for i := C.uint32_t(0); i < n; i++ {
		var name *C.char
		var id C.ctn_node
		if err := check(C.goctn_onnx_model_entry(m.ptr, kind, i, &name, &id)); err != nil {
			return nil, err
		}
		nn := NamedNode{Name: goString(name)}
		if m.graph != nil && id != C.CTN_NODE_NONE {
			nn.Node = Node{g: m.graph, id: id}
		}
		out = append(out, nn)
	}
	return out, nil
}

// Inputs lists the model's graph inputs (not initializers) in model order with their input
// nodes; an input bound as a constant has an invalid Node.
func (m *ONNXModel) Inputs() ([]NamedNode, error) { return m.list(C.CTN_ONNX_INPUTS) }

// Outputs lists the model's graph outputs in model order with the nodes computing them.
func (m *ONNXModel) Outputs() ([]NamedNode, error) { return m.list(C.CTN_ONNX_OUTPUTS) }

// Initializers lists the model's initializers in model order with their variable or constant
// nodes.
func (m *ONNXModel) Initializers() ([]NamedNode, error) { return m.list(C.CTN_ONNX_INITIALIZERS) }

// OpTypes lists the distinct op types the model uses, in first-use order.
func (m *ONNXModel) OpTypes() ([]ONNXOpType, error) {
	if err := m.use(); err != nil {
		return nil, err
	}
	defer m.h.release()
	var n C.uint32_t
	if err := check(C.goctn_onnx_model_count(m.ptr, C.CTN_ONNX_OP_TYPES, &n)); err != nil {
		return nil, err
	}
	out := make([]ONNXOpType, 0, int(n))
	for i := C.uint32_t(0); i < n; i++ {
		var name, lowered *C.char
		var uses C.uint32_t
		var supported C.int32_t
		if err := check(C.goctn_onnx_model_entry(m.ptr, C.CTN_ONNX_OP_TYPES, i, &name, nil)); err != nil {
			return nil, err
		}
		if err := check(C.goctn_onnx_model_op_type(m.ptr, i, &uses, &supported, &lowered)); err != nil {
			return nil, err
		}
		op := ONNXOpType{Name: goString(name), Uses: int(uses), Supported: supported != 0}
		if l := goString(lowered); l != "" {
			op.LoweredTo = strings.Split(l, ",")
		}
		out = append(out, op)
	}
	return out, nil
}

// Version returns the default-domain opset the model imports and its IR version.
func (m *ONNXModel) Version() (opset, irVersion int64, err error) {
	if err := m.use(); err != nil {
		return 0, 0, err
	}
	defer m.h.release()
	var o, ir C.int64_t
	if err := check(C.goctn_onnx_model_version(m.ptr, &o, &ir)); err != nil {
		return 0, 0, err
	}
	return int64(o), int64(ir), nil
}

// LoadONNXTensor reads a serialized ONNX TensorProto file (the input_N.pb / output_N.pb files
// of ONNX's backend test cases) into a new tensor and returns it with the tensor's name.
// Errors: ErrIO, ErrCorrupt, ErrUnsupported (a dtype chutney lacks).
func LoadONNXTensor(path string) (*Tensor, string, error) {
	var cs cstrings
	defer cs.free()
	cpath, err := cs.add(path, "path")
	if err != nil {
		return nil, "", err
	}
	var tp *C.ctn_tensor
	var name *C.char
	// The name is in a thread-local buffer: read it on the thread that wrote it, before another
	// goroutine can call the library there.
	runtime.LockOSThread()
	err = check(C.goctn_onnx_tensor_load(cpath, &tp, &name))
	n := goString(name)
	runtime.UnlockOSThread()
	if err != nil {
		return nil, "", err
	}
	t, err := adoptTensor(tp)
	if err != nil {
		return nil, "", err
	}
	return t, n, nil
}
