package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"slices"
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
	for _, args := range referenceCommands {
		b.WriteString("\n")
		if code := run(t.Context(), append(args, "-h"), referenceWriter{&b}, io.Discard); code != 0 {
			t.Fatalf("tether %s -h: exit %d", strings.Join(args, " "), code)
		}
	}
	return b.String()
}

// referenceCommands are the commands docs/cli.md has a section of: every
// command and subcommand (TestCLICommandsListed).
var referenceCommands = [][]string{
	{"serve"}, {"ablate"}, {"ablate", "compare"}, {"ablate", "report"}, {"ablate", "floor"}, {"ablate", "waits"}, {"run"},
	{"trace", "list"}, {"trace", "show"}, {"trace", "record"}, {"trace", "import"},
}

// TestCLICommandsListed: every command that tether's usage, and each
// command's own, lists under "Commands:" has its section in docs/cli.md
// (referenceCommands), so that a subcommand added without one fails.
func TestCLICommandsListed(t *testing.T) {
	listed := func(args ...string) []string {
		var out bytes.Buffer
		run(t.Context(), append(args, "-h"), &out, io.Discard)
		_, cmds, ok := strings.Cut(out.String(), "\nCommands:\n")
		if !ok {
			t.Fatalf("tether %s -h lists no commands:\n%s", strings.Join(args, " "), out.String())
		}
		var names []string
		for _, line := range strings.Split(cmds, "\n") {
			if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
				if strings.TrimSpace(line) == "" {
					break
				}
				continue // a description's next line
			}
			names = append(names, strings.Fields(line)[0])
		}
		return names
	}
	has := func(path ...string) bool {
		return slices.ContainsFunc(referenceCommands, func(c []string) bool { return slices.Equal(c, path) })
	}
	for _, top := range listed() {
		if top == "version" {
			continue // no flags
		}
		if !has(top) && !slices.ContainsFunc(referenceCommands, func(c []string) bool { return c[0] == top }) {
			t.Errorf("tether %s has no section in docs/cli.md", top)
		}
	}
	for _, parent := range []string{"ablate", "trace"} {
		subs := listed(parent)
		if len(subs) == 0 {
			t.Errorf("tether %s -h lists no commands", parent)
		}
		for _, sub := range subs {
			if !has(parent, sub) {
				t.Errorf("tether %s %s has no section in docs/cli.md", parent, sub)
			}
		}
	}
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
