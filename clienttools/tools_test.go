package clienttools_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/clienttools"
)

func repo(t testing.TB) string {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"main.go":      "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n",
		"lib/lib.go":   "package lib\n\n// Answer is the answer.\nconst Answer = 41\n",
		"README.md":    "# demo\n",
		"lib/data.txt": "alpha\nbeta\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func args(kv ...string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestDefinitions(t *testing.T) {
	defs := (&clienttools.Tools{}).Definitions()
	if len(defs) != len(clienttools.Names) {
		t.Fatalf("%d definitions", len(defs))
	}
	for i, d := range defs {
		var s struct {
			Type     string         `json:"type"`
			Props    map[string]any `json:"properties"`
			Required []string       `json:"required"`
		}
		if d.Name != clienttools.Names[i] || d.Type != "function" || json.Unmarshal(d.Parameters, &s) != nil || s.Type != "object" || len(s.Required) == 0 {
			t.Errorf("definition %d: %s %s", i, d.Name, d.Parameters)
		}
		for _, r := range s.Required {
			if s.Props[r] == nil {
				t.Errorf("%s: required %s is not a property", d.Name, r)
			}
		}
	}
}

func TestTools(t *testing.T) {
	dir := repo(t)
	tools := &clienttools.Tools{Dir: dir}
	ctx := context.Background()
	run := func(name, a string) string {
		t.Helper()
		out, err := tools.Run(ctx, name, a)
		if err != nil {
			t.Fatalf("%s %s: %v", name, a, err)
		}
		return out
	}
	if out := run("list_dir", args("path", ".")); !strings.HasPrefix(out, ".\n") || !strings.Contains(out, "  lib/\n") ||
		!strings.Contains(out, "  lib/lib.go                   4 lines      56 bytes\n") {
		t.Errorf("list_dir:\n%s", out)
	}
	if out := run("read_file", args("path", "lib/lib.go")); out != "   1\tpackage lib\n   2\t\n   3\t// Answer is the answer.\n   4\tconst Answer = 41\n" {
		t.Errorf("read_file:\n%q", out)
	}
	if out := run("grep", args("pattern", `^(package|const) `, "path", "lib")); !strings.HasPrefix(out, "2 matches in 1 files for /^(package|const) / under lib\n") ||
		!strings.Contains(out, "lib/lib.go:4:const Answer = 41\n") {
		t.Errorf("grep:\n%s", out)
	}
	patch := "*** Begin Patch\n*** Update File: lib/lib.go\n@@\n // Answer is the answer.\n-const Answer = 41\n+const Answer = 42\n*** Add File: lib/new.txt\n+new\n*** Delete File: README.md\n*** End Patch\n"
	out := run("apply_patch", args("patch", patch))
	if !strings.HasPrefix(out, "Success. Updated the following files:\nM lib/lib.go\nA lib/new.txt\nD README.md\n") ||
		!strings.Contains(out, "lib/lib.go, lines 1-5 after the patch:\n") || !strings.Contains(out, "   4\tconst Answer = 42\n") {
		t.Errorf("apply_patch:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "lib/lib.go")); !strings.HasSuffix(string(b), "const Answer = 42\n") {
		t.Errorf("patched file:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "lib/new.txt")); string(b) != "new\n" {
		t.Errorf("added file %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); !os.IsNotExist(err) {
		t.Errorf("deleted file: %v", err)
	}
	if out := run("shell", args("command", "cat lib/data.txt; exit 3")); out != "$ cat lib/data.txt; exit 3\nalpha\nbeta\n[exit code 3]\n" {
		t.Errorf("shell: %q", out)
	}
}

func TestToolsErrors(t *testing.T) {
	dir := repo(t)
	tools := &clienttools.Tools{Dir: dir, ShellTimeout: 200 * time.Millisecond}
	ctx := context.Background()
	for _, p := range []string{"/etc/passwd", "../x", "lib/../../x", filepath.Join(dir, "main.go")} {
		for _, name := range []string{"read_file", "list_dir"} {
			if _, err := tools.Run(ctx, name, args("path", p)); !errors.Is(err, clienttools.ErrOutside) {
				t.Errorf("%s %s: %v", name, p, err)
			}
		}
	}
	for _, c := range []struct{ name, args string }{
		{"read_file", args("path", "missing.go")},
		{"read_file", `{"path": 3}`},
		{"read_file", `not json`},
		{"grep", args("pattern", "(", "path", ".")},
		{"apply_patch", args("patch", "*** Begin Patch\n*** Update File: main.go\n@@\n-no such line\n+x\n*** End Patch\n")},
		{"apply_patch", args("patch", "*** Update File: main.go\n")},
		{"apply_patch", args("patch", "*** Begin Patch\n*** Add File: ../evil\n+x\n*** End Patch\n")},
		{"nope", `{}`},
	} {
		if out, err := tools.Run(ctx, c.name, c.args); err == nil {
			t.Errorf("%s %s: no error, output %q", c.name, c.args, out)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); err == nil {
		t.Error("a patch wrote outside the directory")
	}
	out, err := tools.Run(ctx, "shell", args("command", "sleep 5"))
	if err != nil || !strings.Contains(out, "[timed out after 200ms]") {
		t.Errorf("shell timeout: %q %v", out, err)
	}
}

func TestReadFileTruncated(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "big.txt"), []byte(strings.Repeat("0123456789abcdef\n", 100)), 0o644)
	tools := &clienttools.Tools{Dir: dir, MaxOutputTokens: 100}
	out, err := tools.Run(context.Background(), "read_file", args("path", "big.txt"))
	if err != nil || !strings.Contains(out, "[... truncated: ") || len(out) > 400 {
		t.Fatalf("%q %v", out, err)
	}
}
