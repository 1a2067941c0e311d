package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write docs/cli.md again from the commands' flags")

const cliReference = "../../docs/cli.md"

// cliReferenceText is docs/cli.md as the commands' flags make it: the
// top-level usage, then every command's section.
func cliReferenceText(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("# Command reference\n\nEvery `tether` command and flag, generated from the flags themselves (`go test ./cmd/tether\n-run TestCLIReference -update`; the test fails when this page and the flags differ). `tether\nCOMMAND -h` prints the same.\n\n```\n")
	usage(&b)
	b.WriteString("```\n")
	for _, args := range [][]string{
		{"serve"}, {"ablate"}, {"ablate", "compare"}, {"ablate", "report"}, {"run"}, {"trace", "list"}, {"trace", "show"}, {"trace", "record"},
	} {
		b.WriteString("\n")
		if code := run(t.Context(), append(args, "-h"), referenceWriter{&b}, io.Discard); code != 0 {
			t.Fatalf("tether %s -h: exit %d", strings.Join(args, " "), code)
		}
	}
	return b.String()
}

// TestCLIReference fails when docs/cli.md is not what the commands' flags
// make; -update writes it.
func TestCLIReference(t *testing.T) {
	want := cliReferenceText(t)
	if *update {
		if err := os.WriteFile(cliReference, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(cliReference)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/cli.md differs from the commands' flags: run go test ./cmd/tether -run TestCLIReference -update\n%s", firstDiff(string(got), want))
	}
}

// firstDiff is the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  docs/cli.md: " + gl + "\n  the flags:   " + wl
		}
	}
	return ""
}

// TestHelpHidesAPIKey: -h prints every flag's default, and the key in
// $OPENAI_API_KEY is not one (it was, printed in full).
func TestHelpHidesAPIKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-do-not-print")
	for _, cmd := range []string{"run", "ablate"} {
		var out bytes.Buffer
		if code := run(t.Context(), []string{cmd, "-h"}, &out, io.Discard); code != 0 {
			t.Fatalf("tether %s -h: exit %d", cmd, code)
		}
		if strings.Contains(out.String(), "sk-do-not-print") {
			t.Errorf("tether %s -h prints the API key", cmd)
		}
	}
}
