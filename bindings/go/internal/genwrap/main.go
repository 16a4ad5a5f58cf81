// Command genwrap writes chutney/ctn_wrap.h, the C wrappers of every status-returning CTN_API
// function of the application headers. Run it through `go generate ./chutney` after the
// headers change; the package's tests fail while the file is stale.
package main

import (
	"flag"
	"fmt"
	"os"

	"chutney/bindings/go/internal/cdecl"
)

func main() {
	abi := flag.String("abi", "../../../abi/chutney", "folder of the public headers")
	out := flag.String("o", "ctn_wrap.h", "output file")
	flag.Parse()
	funcs, err := cdecl.ParseDir(*abi)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genwrap:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, cdecl.Generate(funcs), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genwrap:", err)
		os.Exit(1)
	}
}
