package chutney

/*
#include "shim.h"
*/
import "C"

import (
	"strings"
	"sync"
	"unsafe"
)

// ABIVersion is the ABI version of the loaded library (ctn_abi_version).
func ABIVersion() (major, minor int) {
	v := uint32(C.ctn_abi_version())
	return int(v >> 16), int(v & 0xffff)
}

// Version is the library's version, "major.minor.patch".
func Version() string { return C.GoString(C.ctn_version_string()) }

// Options configure NewContext. The zero value (or a nil *Options) gives the defaults.
type Options struct {
	// Backends is the preference order, ','-separated ("opencl,cpu"); "" uses CHUTNEY_BACKEND,
	// else "cpu".
	Backends string
	// PluginPath lists extra plugin folders or files to search first, ':'-separated.
	PluginPath string
	// NumThreads of host backends; 0 uses CHUTNEY_NUM_THREADS, else the number of cores.
	NumThreads int
	// NoAutoload skips the default plugin locations: only PluginPath and LoadPlugin count.
	NoAutoload bool
}

// Context owns the plugins and backends; graphs and plans are made from it. A Context may be
// used from several goroutines at once (the library's rule).
type Context struct {
	h   handle
	ptr *C.ctn_context
	// mu orders plugin loading against reads of the strings the context owns (the report,
	// backend infos), which a load may replace.
	mu sync.Mutex
	// opLibs are the ops written in Go added to this context (AddOps), freed after it.
	opLibs []*opLibrary
}

func (c *Context) hdl() *handle { return &c.h }

func (c *Context) use() error { return useOwner(c, "Context") }

// NewContext creates a context: it searches and loads plugins (see Options). A plugin that is
// rejected or whose device is absent does not make this fail: see PluginReport.
func NewContext(opts *Options) (*Context, error) {
	var o C.ctn_context_options
	o.struct_size = C.uint32_t(unsafe.Sizeof(o))
	var cs cstrings
	defer cs.free()
	if opts != nil {
		if opts.NumThreads < 0 || opts.NumThreads > 1<<20 {
			return nil, newError(StatusInvalidArgument, "Options.NumThreads %d out of range", opts.NumThreads)
		}
		o.num_threads = C.int32_t(opts.NumThreads)
		if opts.NoAutoload {
			o.flags |= C.CTN_CONTEXT_NO_AUTOLOAD
		}
		var err error
		if opts.Backends != "" {
			if o.backends, err = cs.add(opts.Backends, "Options.Backends"); err != nil {
				return nil, err
			}
		}
		if opts.PluginPath != "" {
			if o.plugin_path, err = cs.add(opts.PluginPath, "Options.PluginPath"); err != nil {
				return nil, err
			}
		}
	}
	var p *C.ctn_context
	if err := check(C.goctn_context_create(&o, &p)); err != nil {
		return nil, err
	}
	c := &Context{ptr: p}
	c.h.init("Context", func() {
		C.ctn_context_release(p)
		for _, l := range c.opLibs {
			l.free()
		}
	})
	return track(c), nil
}

// Close releases the context. Idempotent. Graphs and plans made from it keep it alive until
// they are closed too; the context's backends are shut down after the last of them.
func (c *Context) Close() error { return closeOwner(c) }

// LoadPlugin loads one plugin file (a backend or an op library). A rejected file gives
// ErrPlugin naming it and the reason; a backend whose device is absent gives ErrUnavailable.
func (c *Context) LoadPlugin(path string) error {
	return c.withString(path, "plugin path", func(p *C.char) C.goctn_ret {
		c.mu.Lock()
		defer c.mu.Unlock()
		return C.goctn_context_load_plugin(c.ptr, p)
	})
}

// PluginReport lists every plugin candidate seen: path, verdict and reason, one per line.
func (c *Context) PluginReport() (string, error) {
	if err := c.use(); err != nil {
		return "", err
	}
	defer c.h.release()
	c.mu.Lock()
	defer c.mu.Unlock()
	var text *C.char
	if err := check(C.goctn_context_plugin_report(c.ptr, &text)); err != nil {
		return "", err
	}
	return C.GoString(text), nil
}

// BackendInfo describes one backend known to a context.
type BackendInfo struct {
	Name        string
	Available   bool
	Description string // the device, or why the backend is unavailable
	Path        string // the plugin file
	ABIMajor    int    // the ABI the plugin was built against
	ABIMinor    int
}

// Backends lists every backend the context knows, available or not.
func (c *Context) Backends() ([]BackendInfo, error) {
	return listContext(c, func(n *C.uint32_t) C.goctn_ret { return C.goctn_context_backend_count(c.ptr, n) },
		func(i C.uint32_t, bi *C.ctn_backend_info) C.goctn_ret {
			return C.goctn_context_backend_info(c.ptr, i, bi)
		},
		func(bi *C.ctn_backend_info) BackendInfo {
			return BackendInfo{Name: goString(bi.name), Available: bi.available != 0,
				Description: goString(bi.description), Path: goString(bi.path),
				ABIMajor: int(bi.abi_major), ABIMinor: int(bi.abi_minor)}
		})
}

// listContext reads one of the context's numbered lists under its lock: count gives the
// length, get fills the struct_size-led C struct V of an index (the first error ends the list),
// conv makes the Go value of it.
func listContext[T, V any](c *Context, count func(*C.uint32_t) C.goctn_ret, get func(C.uint32_t, *V) C.goctn_ret, conv func(*V) T) ([]T, error) {
	if err := c.use(); err != nil {
		return nil, err
	}
	defer c.h.release()
	c.mu.Lock()
	defer c.mu.Unlock()
	var n C.uint32_t
	if err := check(count(&n)); err != nil {
		return nil, err
	}
	out := make([]T, 0, int(n))
	for i := C.uint32_t(0); i < n; i++ {
		var v V
		if err := check(withSize(func(v *V) C.goctn_ret { return get(i, v) })(&v)); err != nil {
			return nil, err
		}
		out = append(out, conv(&v))
	}
	return out, nil
}

// SetBackends sets the preferred backends ("opencl,cpu") for graphs created afterwards.
// ErrUnavailable when none of the names is available.
func (c *Context) SetBackends(backends string) error {
	return c.withString(backends, "backends", func(s *C.char) C.goctn_ret {
		return C.goctn_context_set_backends(c.ptr, s)
	})
}

// SetNumThreads sets the worker-thread count of every host backend (>= 1).
func (c *Context) SetNumThreads(n int) error {
	if err := c.use(); err != nil {
		return err
	}
	defer c.h.release()
	if n < 1 || n > 1<<20 {
		return newError(StatusInvalidArgument, "SetNumThreads(%d): expected 1 or more", n)
	}
	return check(C.goctn_context_set_num_threads(c.ptr, C.int32_t(n)))
}

// SetOption sets a backend-specific option, e.g. ("cpu", "gemm", "own").
func (c *Context) SetOption(backend, key, value string) error {
	return withCStrings(c, "Context", []string{backend, "backend", key, "key", value, "value"},
		func(s []*C.char) C.goctn_ret { return C.goctn_context_set_option(c.ptr, s[0], s[1], s[2]) })
}

// withString runs one call taking the context and a C string.
func (c *Context) withString(s, what string, call func(*C.char) C.goctn_ret) error {
	return withCStrings(c, "Context", []string{s, what}, func(p []*C.char) C.goctn_ret { return call(p[0]) })
}

// withCStrings takes a use reference on o (a nil or closed o is an error naming kind), makes C
// copies of the (value, what) pairs of args and runs call with them; the copies are freed when
// it returns.
func withCStrings[T any, P ownerPtr[T]](o P, kind string, args []string, call func([]*C.char) C.goctn_ret) error {
	if err := useOwner(o, kind); err != nil {
		return err
	}
	defer o.hdl().release()
	var cs cstrings
	defer cs.free()
	ps, err := cs.addAll(args...)
	if err != nil {
		return err
	}
	return check(call(ps))
}

// cstrings holds C copies of Go strings for one call: C never keeps a Go pointer, and the copies
// are freed when the call returns (the library copies what it keeps).
type cstrings struct{ ptrs []unsafe.Pointer }

func (cs *cstrings) add(s, what string) (*C.char, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, newError(StatusInvalidArgument, "%s %q contains a NUL byte", what, s)
	}
	p := C.CString(s)
	cs.ptrs = append(cs.ptrs, unsafe.Pointer(p))
	return p, nil
}

// getOwned takes a use reference on o (a nil or closed o is an error naming kind) and returns
// what call writes into a zero V (still zero when call fails: out-parameters are untouched).
func getOwned[V any, T any, P ownerPtr[T]](o P, kind string, call func(*V) C.goctn_ret) (V, error) {
	var v V
	if err := useOwner(o, kind); err != nil {
		return v, err
	}
	defer o.hdl().release()
	return v, check(call(&v))
}

// withSize wraps a getter of a struct that begins with its struct_size (the headers pin it at
// offset 0): the size is set before the call.
func withSize[V any](call func(*V) C.goctn_ret) func(*V) C.goctn_ret {
	return func(v *V) C.goctn_ret {
		*(*C.uint32_t)(unsafe.Pointer(v)) = C.uint32_t(unsafe.Sizeof(*v))
		return call(v)
	}
}

// addAll adds each (value, what) pair of args and returns the C strings in order.
func (cs *cstrings) addAll(args ...string) ([]*C.char, error) {
	ps := make([]*C.char, 0, len(args)/2)
	for i := 0; i+1 < len(args); i += 2 {
		p, err := cs.add(args[i], args[i+1])
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func (cs *cstrings) free() {
	for _, p := range cs.ptrs {
		C.free(p)
	}
	cs.ptrs = nil
}

func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}
