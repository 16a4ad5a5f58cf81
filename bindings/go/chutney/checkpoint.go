package chutney

/*
#include "shim.h"
*/
import "C"

import (
	"encoding/json"
)

// NamedTensor is a tensor and the name it is saved under.
type NamedTensor struct {
	Name   string
	Tensor *Tensor
}

// cMetadata encodes metadata as the JSON object of strings safetensors stores (NULL for none).
func cMetadata(meta map[string]string, cs *cstrings) (*C.char, error) {
	if meta == nil {
		return nil, nil
	}
	b, err := json.Marshal(meta) // keys sorted: the file is reproducible
	if err != nil {
		return nil, newError(StatusInvalidArgument, "metadata: %v", err)
	}
	return cs.add(string(b), "metadata")
}

// SaveCheckpoint writes tensors to path in the safetensors layout, atomically (a temporary file,
// fsynced and renamed): path is always either the old file or the complete new one. metadata
// (may be nil) is stored as "__metadata__".
func SaveCheckpoint(path string, tensors []NamedTensor, metadata map[string]string) error {
	var cs cstrings
	defer cs.free()
	p, err := cs.add(path, "path")
	if err != nil {
		return err
	}
	m, err := cMetadata(metadata, &cs)
	if err != nil {
		return err
	}
	names := make([]*C.char, len(tensors)+1)
	ptrs := make([]*C.ctn_tensor, len(tensors)+1)
	us := make([]user, len(tensors))
	for i, nt := range tensors {
		if names[i], err = cs.add(nt.Name, "tensor name"); err != nil {
			return err
		}
		us[i] = nt.Tensor
	}
	done, err := acquireAll(us...)
	if err != nil {
		return err
	}
	defer done()
	for i, nt := range tensors {
		ptrs[i] = nt.Tensor.ptr
	}
	return check(C.goctn_checkpoint_save(p, C.uint32_t(len(tensors)), &names[0], &ptrs[0], m))
}

// Checkpoint is a safetensors file read into memory (immutable; may be used from several
// goroutines at once).
type Checkpoint struct {
	h   handle
	ptr *C.ctn_checkpoint
}

func (c *Checkpoint) hdl() *handle { return &c.h }

func (c *Checkpoint) use() error { return useOwner(c, "Checkpoint") }

// LoadCheckpoint reads and validates a safetensors file (the file is closed on return).
func LoadCheckpoint(path string) (*Checkpoint, error) {
	var cs cstrings
	defer cs.free()
	p, err := cs.add(path, "path")
	if err != nil {
		return nil, err
	}
	var ck *C.ctn_checkpoint
	if err := check(C.goctn_checkpoint_load(p, &ck)); err != nil {
		return nil, err
	}
	c := &Checkpoint{ptr: ck}
	c.h.init("Checkpoint", func() { C.ctn_checkpoint_release(ck) })
	return track(c), nil
}

// Close frees the checkpoint. Idempotent.
func (c *Checkpoint) Close() error { return closeOwner(c) }

// Names lists the tensors in the order of the file's header.
func (c *Checkpoint) Names() ([]string, error) {
	if err := c.use(); err != nil {
		return nil, err
	}
	defer c.h.release()
	var n C.uint32_t
	if err := check(C.goctn_checkpoint_count(c.ptr, &n)); err != nil {
		return nil, err
	}
	out := make([]string, int(n))
	for i := range out {
		var s *C.char
		if err := check(C.goctn_checkpoint_name(c.ptr, C.uint32_t(i), &s)); err != nil {
			return nil, err
		}
		out[i] = goString(s)
	}
	return out, nil
}

// withName runs a call on the checkpoint with one C string.
func (c *Checkpoint) withName(name, what string, f func(p *C.char) C.goctn_ret) error {
	return withCStrings(c, "Checkpoint", []string{name, what}, func(p []*C.char) C.goctn_ret { return f(p[0]) })
}

// Info returns tensor name's dtype and shape without copying it.
func (c *Checkpoint) Info(name string) (DType, []int64, error) {
	var dt C.ctn_dtype
	var ndim C.uint32_t
	var shape [MaxDims]C.int64_t
	var ndimOnly C.uint32_t
	// The file may hold more dimensions than a tensor can: ask for ndim first.
	if err := c.withName(name, "name", func(p *C.char) C.goctn_ret {
		return C.goctn_checkpoint_info(c.ptr, p, &dt, &ndimOnly, nil)
	}); err != nil {
		return 0, nil, err
	}
	if ndimOnly > MaxDims {
		big := make([]C.int64_t, int(ndimOnly))
		if err := c.withName(name, "name", func(p *C.char) C.goctn_ret {
			return C.goctn_checkpoint_info(c.ptr, p, &dt, &ndim, &big[0])
		}); err != nil {
			return 0, nil, err
		}
		return DType(dt), int64s(big[:ndim]), nil
	}
	if err := c.withName(name, "name", func(p *C.char) C.goctn_ret {
		return C.goctn_checkpoint_info(c.ptr, p, &dt, &ndim, &shape[0])
	}); err != nil {
		return 0, nil, err
	}
	return DType(dt), int64s(shape[:ndim]), nil
}

func int64s(v []C.int64_t) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// Tensor returns a new tensor holding a copy of tensor name.
func (c *Checkpoint) Tensor(name string) (*Tensor, error) {
	var t *C.ctn_tensor
	if err := c.withName(name, "name", func(p *C.char) C.goctn_ret {
		return C.goctn_checkpoint_get(c.ptr, p, &t)
	}); err != nil {
		return nil, err
	}
	return adoptTensor(t)
}

// Metadata returns the "__metadata__" object.
func (c *Checkpoint) Metadata() (map[string]string, error) {
	if err := c.use(); err != nil {
		return nil, err
	}
	defer c.h.release()
	var s *C.char
	if err := check(C.goctn_checkpoint_metadata(c.ptr, &s)); err != nil {
		return nil, err
	}
	out := map[string]string{}
	if err := json.Unmarshal([]byte(goString(s)), &out); err != nil {
		return nil, newError(StatusCorrupt, "checkpoint metadata: %v", err)
	}
	return out, nil
}

// MetadataValue returns the metadata value of key and whether it is present.
func (c *Checkpoint) MetadataValue(key string) (string, bool, error) {
	var v *C.char
	if err := c.withName(key, "key", func(p *C.char) C.goctn_ret {
		return C.goctn_checkpoint_metadata_get(c.ptr, p, &v)
	}); err != nil {
		return "", false, err
	}
	if v == nil {
		return "", false, nil
	}
	return C.GoString(v), true, nil
}

// withVariableArgs converts vars (each checked to be a node of this plan's graph) and path to
// C, calls f with them and frees them; cs may hold more strings for f.
func (p *Plan) withVariableArgs(path string, vars []NamedNode, f func(names **C.char, ids *C.ctn_node, cpath *C.char, cs *cstrings) error) error {
	var cs cstrings
	defer cs.free()
	names := make([]*C.char, len(vars)+1)
	ids := make([]C.ctn_node, len(vars)+1)
	for i, v := range vars {
		if err := p.checkNode(v.Node, "variable "+v.Name); err != nil {
			return err
		}
		var err error
		if names[i], err = cs.add(v.Name, "variable name"); err != nil {
			return err
		}
		ids[i] = v.Node.id
	}
	cpath, err := cs.add(path, "path")
	if err != nil {
		return err
	}
	return f(&names[0], &ids[0], cpath, &cs)
}

// SaveVariables saves the current value of each variable under its name (atomically, as
// SaveCheckpoint). Model.Variables(VarAll) is the list to checkpoint a model.
func (p *Plan) SaveVariables(path string, vars []NamedNode, metadata map[string]string) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.leave()
	return p.withVariableArgs(path, vars, func(names **C.char, ids *C.ctn_node, cpath *C.char, cs *cstrings) error {
		m, err := cMetadata(metadata, cs)
		if err != nil {
			return err
		}
		return check(C.goctn_plan_save_variables(p.ptr, C.uint32_t(len(vars)), names, ids, cpath, m))
	})
}

// LoadVariables writes tensor name into each variable, all checked before the first write (on
// failure the plan is unchanged).
func (p *Plan) LoadVariables(path string, vars []NamedNode) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.leave()
	return p.withVariableArgs(path, vars, func(names **C.char, ids *C.ctn_node, cpath *C.char, _ *cstrings) error {
		return check(C.goctn_plan_load_variables(p.ptr, C.uint32_t(len(vars)), names, ids, cpath))
	})
}
