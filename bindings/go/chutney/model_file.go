package chutney

/*
#include "shim.h"
*/
import "C"

// Whole graphs in one file (docs/MODELS.md) and ONNX export.

// outputArgs prepares the C arguments shared by Save and ExportONNX: output ids and names.
func (g *Graph) outputArgs(outputs []NamedNode, cs *cstrings) ([]C.ctn_node, []*C.char, error) {
	ids := make([]C.ctn_node, len(outputs)+1)
	names := make([]*C.char, len(outputs)+1)
	for i, o := range outputs {
		if o.Node.g != g {
			return nil, nil, newError(StatusInvalidArgument, "output %q is not a node of this graph", o.Name)
		}
		ids[i] = o.Node.id
		var err error
		if names[i], err = cs.add(o.Name, "output name"); err != nil {
			return nil, nil, err
		}
	}
	return ids, names, nil
}

// withOutputs runs a save or export call with the graph, the plan's C handle (nil plan: the
// variables' initial values) and the outputs' C arguments.
func (g *Graph) withOutputs(plan *Plan, outputs []NamedNode, path string,
	f func(pp *C.ctn_plan, ids []C.ctn_node, names []*C.char, cpath *C.char, cs *cstrings) C.goctn_ret) error {
	if err := g.use(); err != nil {
		return err
	}
	defer g.h.release()
	var pp *C.ctn_plan
	if plan != nil {
		if err := plan.use(); err != nil {
			return err
		}
		defer plan.h.release()
		if plan.graph != g.serial {
			return newError(StatusInvalidArgument, "the plan was not compiled from this graph")
		}
		pp = plan.ptr
	}
	var cs cstrings
	defer cs.free()
	ids, names, err := g.outputArgs(outputs, &cs)
	if err != nil {
		return err
	}
	cpath, err := cs.add(path, "path")
	if err != nil {
		return err
	}
	return check(f(pp, ids, names, cpath, &cs))
}

// Save writes the whole graph (every node, ops by name with their attributes), its weights (the
// current values in plan of the variables it uses, else their initial values; plan may be nil)
// and the named outputs to path, atomically. metadata (may be nil) is stored beside them; its
// keys must not start with "chutney.". LoadGraph reads it back.
func (g *Graph) Save(path string, plan *Plan, outputs []NamedNode, metadata map[string]string) error {
	var mcs cstrings
	defer mcs.free()
	m, err := cMetadata(metadata, &mcs)
	if err != nil {
		return err
	}
	return g.withOutputs(plan, outputs, path, func(pp *C.ctn_plan, ids []C.ctn_node, names []*C.char, cpath *C.char, _ *cstrings) C.goctn_ret {
		return C.goctn_graph_save(g.ptr, pp, C.uint32_t(len(outputs)), &ids[0], &names[0], m, cpath)
	})
}

// ExportONNX writes the part of the graph the outputs depend on as an ONNX model (opset 13) to
// path, atomically; variables take their values in plan (may be nil: initial values). An op
// without an ONNX form fails with StatusUnsupported naming it.
func (g *Graph) ExportONNX(path string, plan *Plan, outputs []NamedNode) error {
	return g.withOutputs(plan, outputs, path, func(pp *C.ctn_plan, ids []C.ctn_node, names []*C.char, cpath *C.char, _ *cstrings) C.goctn_ret {
		return C.goctn_onnx_export(g.ptr, pp, C.uint32_t(len(outputs)), &ids[0], &names[0], cpath)
	})
}

// loadInto runs a call that makes a new graph of c (a graph file or ONNX load): load gets the
// path as a C string (and cs for more strings of the call) and sets *gp. The graph holds a
// reference on c; a nil *gp (an ONNX inspect-only load) gives a nil *Graph.
func (c *Context) loadInto(path string, load func(cpath *C.char, cs *cstrings, gp **C.ctn_graph) error) (*Graph, error) {
	if err := c.use(); err != nil {
		return nil, err
	}
	var cs cstrings
	defer cs.free()
	cpath, err := cs.add(path, "path")
	var gp *C.ctn_graph
	if err == nil {
		err = load(cpath, &cs, &gp)
	}
	if err != nil || gp == nil {
		c.h.release()
		return nil, err
	}
	ch := &c.h
	g := &Graph{ptr: gp, ctx: c, serial: graphSerial.Add(1)}
	g.h.init("Graph", func() {
		C.ctn_graph_release(gp)
		ch.release()
	})
	track(g)
	return g, nil
}

// SavedGraph is what a graph file names: its inputs, outputs and variables as nodes of the
// loaded graph, and its metadata.
type SavedGraph struct {
	Inputs, Outputs, Variables []NamedNode
	Metadata                   map[string]string
}

// LoadGraph reads a graph file written by Graph.Save (or ctn_graph_save) into a new lazy graph.
// A damaged file fails with StatusCorrupt naming the file and the node; an op the context does
// not know (an op library not loaded) with StatusUnsupported naming it.
func (c *Context) LoadGraph(path string) (*Graph, *SavedGraph, error) {
	var sp *C.ctn_saved_graph
	g, err := c.loadInto(path, func(cpath *C.char, _ *cstrings, gp **C.ctn_graph) error {
		return check(C.goctn_graph_load(c.ptr, cpath, gp, &sp))
	})
	if err != nil {
		return nil, nil, err
	}
	defer C.ctn_saved_graph_release(sp)
	s := &SavedGraph{Metadata: map[string]string{}}
	lists := []*[]NamedNode{&s.Inputs, &s.Outputs, &s.Variables}
	for kind, list := range lists {
		var n C.uint32_t
		if err := check(C.goctn_saved_graph_count(sp, C.int32_t(kind), &n)); err != nil {
			g.Close()
			return nil, nil, err
		}
		for i := C.uint32_t(0); i < n; i++ {
			var name *C.char
			var id C.ctn_node
			if err := check(C.goctn_saved_graph_entry(sp, C.int32_t(kind), i, &name, &id)); err != nil {
				g.Close()
				return nil, nil, err
			}
			*list = append(*list, NamedNode{Name: goString(name), Node: Node{g: g, id: id}})
		}
	}
	var cs cstrings
	defer cs.free()
	if err := s.readMetadata(path, sp, &cs); err != nil {
		g.Close()
		return nil, nil, err
	}
	return g, s, nil
}

// readMetadata fills s.Metadata with the caller's keys of the file (the checkpoint's metadata
// without the format's "chutney." keys), each read through the saved graph's handle.
func (s *SavedGraph) readMetadata(path string, sp *C.ctn_saved_graph, cs *cstrings) error {
	ck, err := LoadCheckpoint(path)
	if err != nil {
		return err
	}
	defer ck.Close()
	all, err := ck.Metadata()
	if err != nil {
		return err
	}
	for k := range all {
		if len(k) >= 8 && k[:8] == "chutney." {
			continue
		}
		ckey, err := cs.add(k, "metadata key")
		if err != nil {
			return err
		}
		var v *C.char
		if err := check(C.goctn_saved_graph_metadata_get(sp, ckey, &v)); err != nil {
			return err
		}
		if v != nil {
			s.Metadata[k] = goString(v)
		}
	}
	return nil
}
