package chutney_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"chutney/bindings/go/chutney"
)

func TestVersions(t *testing.T) {
	major, minor := chutney.ABIVersion()
	if major != 1 || minor < 1 {
		t.Fatalf("ABI %d.%d", major, minor)
	}
	if v := chutney.Version(); strings.Count(v, ".") != 2 {
		t.Fatalf("version %q", v)
	}
}

func TestBackendsAndPluginReport(t *testing.T) {
	bs := must(ctx.Backends())
	found := false
	for _, b := range bs {
		if b.Name == "cpu" {
			found = b.Available && b.Path != "" && b.ABIMajor == 1
		}
	}
	if !found {
		t.Fatalf("no available cpu backend in %+v", bs)
	}
	r := must(ctx.PluginReport())
	if !strings.Contains(r, "ctn-cpu") || !strings.Contains(r, "loaded") {
		t.Fatalf("plugin report: %q", r)
	}
	// An unknown name is a usage error naming the known backends (a known backend without its
	// device would be ErrUnavailable).
	if e := wantErr(t, ctx.SetBackends("no-such-backend"), chutney.ErrInvalidArgument); !strings.Contains(e.Msg, "known backends: cpu") {
		t.Fatalf("SetBackends: %v", e)
	}
	wantErr(t, ctx.SetBackends("cpu\x00"), chutney.ErrInvalidArgument)
	if err := ctx.SetBackends("cpu"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, ctx.SetNumThreads(0), chutney.ErrInvalidArgument)
	wantErr(t, ctx.SetOption("cpu", "no-such-key", "1"), chutney.ErrInvalidArgument)
	wantErr(t, ctx.SetOption("nope", "gemm", "own"), chutney.ErrInvalidArgument)
	wantErr(t, ctx.LoadPlugin("/nonexistent/ctn-nothing.so"), chutney.ErrPlugin)
}

func TestContextOptions(t *testing.T) {
	_, err := chutney.NewContext(&chutney.Options{Backends: "no-such-backend"})
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, err = chutney.NewContext(&chutney.Options{NumThreads: -1})
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, err = chutney.NewContext(&chutney.Options{PluginPath: "a\x00b"})
	wantErr(t, err, chutney.ErrInvalidArgument)

	// No plugins at all: building works, compiling has no backend.
	c := closer(t, must(chutney.NewContext(&chutney.Options{NoAutoload: true, NumThreads: 1})))
	if bs := must(c.Backends()); len(bs) != 0 {
		t.Fatalf("NoAutoload context has backends %+v", bs)
	}
	// Load the cpu backend explicitly when the build tree is known (env.sh sets it).
	if dir := os.Getenv("CHUTNEY_BUILD_DIR"); dir != "" {
		if err := c.LoadPlugin(filepath.Join(dir, "backends", "cpu", "ctn-cpu.so")); err != nil {
			t.Fatal(err)
		}
		if bs := must(c.Backends()); len(bs) != 1 || bs[0].Name != "cpu" || !bs[0].Available {
			t.Fatalf("after LoadPlugin: %+v", bs)
		}
		if err := c.SetNumThreads(2); err != nil {
			t.Fatal(err)
		}
		if err := c.SetOption("cpu", "gemm", "own"); err != nil {
			t.Fatal(err)
		}
	}
	var nilC *chutney.Context
	_, err = nilC.NewGraph()
	wantErr(t, err, chutney.ErrInvalidArgument)
	_, err = nilC.PluginReport()
	wantErr(t, err, chutney.ErrInvalidArgument)
}
