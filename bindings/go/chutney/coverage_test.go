package chutney_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"chutney/bindings/go/internal/cdecl"
)

// notWrapped lists the application-facing CTN_API functions the Go package deliberately does
// not call, each with the reason. Everything else must be called from the package's Go code or
// its C shim.
var notWrapped = map[string]string{
	"ctn_tensor_data":          "a Go slice over the tensor's C storage would outlive Close; Read/Write/Values copy instead",
	"ctn_tensor_numel":         "Tensor.NumElements multiplies the shape read once at creation (a tensor's shape never changes)",
	"ctn_model_graph":          "Model.Graph returns the *Graph the model was made from, not a second wrapper of the same C graph",
	"ctn_context_backend_proc": "it returns a backend's C function pointers, which Go cannot call; a C file of the program can",
	"ctn_cancel_reset":         "RunContext makes a token per run: none is reused",
	"ctn_cancel_requested":     "RunContext reports a cancellation through the error (errors.Is ErrCancelled and ctx.Err())",
}

// headerDir finds abi/chutney: the source tree this package lives in, else the include folders
// pkg-config reports for an installed chutney.
func headerDir(t *testing.T) string {
	t.Helper()
	if d := filepath.Join("..", "..", "..", "abi", "chutney"); fileExists(filepath.Join(d, "chutney.h")) {
		return d
	}
	out, err := exec.Command("pkg-config", "--cflags-only-I", "chutney").Output()
	if err == nil {
		for _, f := range strings.Fields(string(out)) {
			if d := filepath.Join(strings.TrimPrefix(f, "-I"), "chutney"); fileExists(filepath.Join(d, "nn.h")) {
				return d
			}
		}
	}
	t.Fatal("cannot find the chutney headers (abi/chutney in the source tree, or pkg-config --cflags chutney)")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestEveryFunctionIsWrapped(t *testing.T) {
	funcs, err := cdecl.ParseDir(headerDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(funcs) < 100 {
		t.Fatalf("only %d CTN_API functions parsed", len(funcs))
	}
	var src bytes.Buffer
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	shim, err := os.ReadFile("shim.h")
	if err != nil {
		t.Fatal(err)
	}
	// The C half of the package (oplib.c: ops written in Go) calls some functions directly.
	cfiles, _ := filepath.Glob("*.c")
	for _, f := range cfiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		shim = append(shim, b...)
	}
	known := map[string]bool{}
	var missing []string
	for _, f := range funcs {
		known[f.Name] = true
		called := regexp.MustCompile(`\bC\.(`+f.Name+`|`+cdecl.WrapperName(f.Name)+`)\(`).Match(src.Bytes()) ||
			regexp.MustCompile(`\b`+f.Name+`\(`).Match(shim)
		reason, listed := notWrapped[f.Name]
		switch {
		case called && listed:
			t.Errorf("%s is called but listed as not wrapped (%s): drop it from notWrapped", f.Name, reason)
		case !called && !listed:
			missing = append(missing, f.Header+": "+f.Name)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("not wrapped and not listed in notWrapped: %s", m)
	}
	for name := range notWrapped {
		if !known[name] {
			t.Errorf("notWrapped lists %s, which no header declares", name)
		}
	}
	t.Logf("%d application functions, %d deliberately not wrapped", len(funcs), len(notWrapped))
}

// ctn_wrap.h is generated from the headers (go generate ./chutney); a stale copy would miss a
// new function or keep a changed signature.
func TestWrappersAreUpToDate(t *testing.T) {
	funcs, err := cdecl.ParseDir(headerDir(t))
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("ctn_wrap.h")
	if err != nil {
		t.Fatal(err)
	}
	if want := cdecl.Generate(funcs); !bytes.Equal(have, want) {
		t.Fatal("ctn_wrap.h is stale: run `go generate ./chutney` in bindings/go")
	}
}
