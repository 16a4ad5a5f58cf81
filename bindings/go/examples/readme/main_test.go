package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Go example computes what the README's C example computes: the same first and last loss
// (printed by both with C's %g).
func TestSameLossesAsTheCExample(t *testing.T) {
	first, last, err := fit(200)
	if err != nil {
		t.Fatal(err)
	}
	if !(last < first/100) {
		t.Fatalf("loss %g -> %g", first, last)
	}
	dir := os.Getenv("CHUTNEY_BUILD_DIR")
	if dir == "" {
		t.Skip("CHUTNEY_BUILD_DIR is not set (source env.sh): no C example to compare with")
	}
	out, err := exec.Command(filepath.Join(dir, "bindings", "chutney-c-readme")).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("loss %.6g -> %.6g", first, last); got != strings.TrimSpace(string(out)) {
		t.Fatalf("Go: %q, C: %q", got, strings.TrimSpace(string(out)))
	}
}
