// Command genabi writes everything generated from the public headers abi/chutney/*.h: the C
// wrappers of the Go package (chutney/ctn_wrap.h), the Rust FFI of chutney-sys (src/ffi.rs,
// probe.c, tests/layout.rs, tests/symbols.rs) and the layout pins of libchutney
// (core/capi/abi_layout_gen.h), all from one parse (internal/cdecl). Run it through
// `go generate ./chutney`; -root writes the same files under another folder, which is how the
// Go test stage (tools/test.d/65-go.sh) checks that the checked-in copies are up to date.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"chutney/bindings/go/internal/cdecl"
)

func main() {
	root := flag.String("root", "../../..", "repository root the files are written under")
	abi := flag.String("abi", "", "folder of the public headers (default: <root>/abi/chutney)")
	flag.Parse()
	if *abi == "" {
		*abi = filepath.Join(*root, "abi", "chutney")
	}
	if err := run(*abi, *root); err != nil {
		fmt.Fprintln(os.Stderr, "genabi:", err)
		os.Exit(1)
	}
}

func run(abi, root string) error {
	entries, err := os.ReadDir(abi)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".h") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	hs, err := cdecl.ParseHeaders(abi, names)
	if err != nil {
		return err
	}
	api := cdecl.NewAPI(hs)
	ffi, err := api.GenerateRust()
	if err != nil {
		return err
	}
	pins, err := api.GeneratePins()
	if err != nil {
		return err
	}
	sys := filepath.Join("bindings", "rust", "chutney-sys")
	files := map[string][]byte{
		filepath.Join("bindings", "go", "chutney", "ctn_wrap.h"): cdecl.Generate(appOrder(hs)),
		filepath.Join(sys, "src", "ffi.rs"):                      ffi,
		filepath.Join(sys, "probe.c"):                            api.GenerateProbe(),
		filepath.Join(sys, "tests", "layout.rs"):                 api.GenerateLayoutTest(),
		filepath.Join(sys, "tests", "symbols.rs"):                api.GenerateSymbolsTest(),
		filepath.Join("core", "capi", "abi_layout_gen.h"):        pins,
	}
	for rel, data := range files {
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// appOrder returns the functions of cdecl.AppHeaders in that order (the order of ctn_wrap.h).
func appOrder(hs []*cdecl.Header) []cdecl.Func {
	var funcs []cdecl.Func
	for _, name := range cdecl.AppHeaders {
		for _, h := range hs {
			if h.Name == name {
				funcs = append(funcs, h.Funcs...)
			}
		}
	}
	return funcs
}
