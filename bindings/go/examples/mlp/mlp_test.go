package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cli finds the chutney command-line tool: $CHUTNEY_CLI, the build tree of env.sh, or PATH.
func cli(t *testing.T) string {
	if p := os.Getenv("CHUTNEY_CLI"); p != "" {
		return p
	}
	if dir := os.Getenv("CHUTNEY_BUILD_DIR"); dir != "" {
		p := filepath.Join(dir, "tools", "chutney", "chutney")
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CHUTNEY_BUILD_DIR is set but has no CLI: %v", err)
		}
		return p
	}
	p, err := exec.LookPath("chutney")
	if err != nil {
		t.Skip("no chutney CLI to compare with: set CHUTNEY_BUILD_DIR (source env.sh) or CHUTNEY_CLI")
	}
	return p
}

// The Go example and `chutney train` (the C API) train the same MLP with the same seed: every
// update's loss must be the same float, bit for bit, and so must the epoch summaries.
func TestLossesMatchTheCLIBitForBit(t *testing.T) {
	cmd := exec.Command(cli(t), "train", "--model", "mlp", "--epochs", "2", "--limit", "1280",
		"--seed", "3", "--print-steps", "--quiet")
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	var got bytes.Buffer
	losses, err := Train(Config{Epochs: 2, Batch: 128, LR: 0.05, Momentum: 0.9, Seed: 3, Limit: 1280, PrintSteps: true}, &got)
	if err != nil {
		t.Fatal(err)
	}
	if len(losses) != 20 {
		t.Fatalf("%d updates, want 20", len(losses))
	}
	pick := func(out string, prefix string) []string {
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, prefix) {
				lines = append(lines, l)
			}
		}
		return lines
	}
	wantSteps, gotSteps := pick(string(want), "step "), pick(got.String(), "step ")
	if len(wantSteps) != 20 {
		t.Fatalf("the CLI printed %d step lines:\n%s", len(wantSteps), want)
	}
	for i := range wantSteps {
		if i >= len(gotSteps) || gotSteps[i] != wantSteps[i] {
			t.Fatalf("update %d:\n  CLI: %s\n  Go:  %s", i+1, wantSteps[i], strings.Join(gotSteps[i:i+1], ""))
		}
	}
	// "epoch 1/2: train loss 1.4893, test accuracy 0.7182" (the CLI adds timings after it).
	wantEpochs, gotEpochs := pick(string(want), "epoch "), pick(got.String(), "epoch ")
	if len(wantEpochs) != 2 || len(gotEpochs) != 2 {
		t.Fatalf("epoch lines: CLI %q, Go %q", wantEpochs, gotEpochs)
	}
	for i := range wantEpochs {
		if !strings.HasPrefix(wantEpochs[i], gotEpochs[i]+",") {
			t.Fatalf("epoch %d:\n  CLI: %s\n  Go:  %s", i+1, wantEpochs[i], gotEpochs[i])
		}
	}
}
