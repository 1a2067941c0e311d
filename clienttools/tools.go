package clienttools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/tether-run/tether/protocol"
)

// Names are the tools' names, in the order Definitions declares them.
var Names = []string{"list_dir", "read_file", "grep", "apply_patch", "shell"}

// Defaults of the zero Tools fields.
const (
	DefaultMaxOutputTokens = 8000
	DefaultShellTimeout    = 2 * time.Minute
)

// Tools executes the agent tools inside Dir. The zero value of every field
// but Dir is usable. A Tools is safe for concurrent use if Count is, but
// concurrent apply_patch calls on the same files race.
type Tools struct {
	// Dir is the directory the tools act on; paths are relative to it.
	Dir string
	// Count counts the tokens of a string, to bound read_file and grep
	// outputs; nil estimates 4 bytes a token.
	Count func(string) int
	// MaxOutputTokens bounds the output of read_file and grep, which cut it
	// with a note; 0 means DefaultMaxOutputTokens.
	MaxOutputTokens int
	// ShellTimeout bounds a shell command; 0 means DefaultShellTimeout.
	ShellTimeout time.Duration
	// Env is added to the process's environment for shell commands.
	Env []string
}

func schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
}

func str(name, desc string) string {
	d, _ := json.Marshal(desc)
	return `"` + name + `":{"type":"string","description":` + string(d) + `}`
}

// Definitions are the five function tools, with JSON schemas of their
// arguments, as a client declares them in a request's tools.
func (t *Tools) Definitions() []protocol.Tool {
	def := func(name, desc string, params json.RawMessage) protocol.Tool {
		return protocol.Tool{Type: protocol.ToolFunction, Name: name, Description: &desc, Parameters: params}
	}
	return []protocol.Tool{
		def("list_dir", "List a directory of the repository recursively: directories end in \"/\", files show their line count and size.",
			schema(str("path", "directory, relative to the repository root (\".\" for the root)"), "path")),
		def("read_file", "Read a file of the repository, its lines numbered.",
			schema(str("path", "file, relative to the repository root"), "path")),
		def("grep", "Search the files under a directory for a regular expression (Go RE2 syntax), line by line: file:line:text for every match.",
			schema(str("pattern", "regular expression")+","+str("path", "directory or file to search, relative to the repository root"), "pattern", "path")),
		def("apply_patch", "Edit files with a patch in the Codex format: *** Begin Patch, then *** Update File: PATH with @@ hunks of context ( ), removed (-) and added (+) lines, *** Add File: PATH with + lines, or *** Delete File: PATH, then *** End Patch.",
			schema(str("patch", "the patch"), "patch")),
		def("shell", "Run a command with sh in the repository root; the output is the combined stdout and stderr and the exit code.",
			schema(str("command", "the command line"), "command")),
	}
}

// Run executes the call of tool name with its arguments JSON and returns
// the output the model is sent. An error means the call could not be
// executed (unknown tool, bad arguments, a path outside Dir, a missing
// file, a patch that does not apply); a shell command that fails is not an
// error, its exit code is in the output.
func (t *Tools) Run(ctx context.Context, name, arguments string) (string, error) {
	var args map[string]any
	if err := json.Unmarshal([]byte(arguments), &args); err != nil {
		return "", fmt.Errorf("%s: arguments: %w", name, err)
	}
	get := func(key string, def string) (string, error) {
		v, ok := args[key]
		if !ok || v == nil {
			if def != "" {
				return def, nil
			}
			return "", fmt.Errorf("%s: missing argument %q", name, key)
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s: argument %q is not a string", name, key)
		}
		return s, nil
	}
	switch name {
	case "list_dir":
		p, err := get("path", ".")
		if err != nil {
			return "", err
		}
		return t.listDir(p)
	case "read_file":
		p, err := get("path", "")
		if err != nil {
			return "", err
		}
		return t.readFile(p)
	case "grep":
		pat, err := get("pattern", "")
		if err != nil {
			return "", err
		}
		p, err := get("path", ".")
		if err != nil {
			return "", err
		}
		return t.grep(pat, p)
	case "apply_patch":
		p, err := get("patch", "")
		if err != nil {
			return "", err
		}
		return t.applyPatch(p)
	case "shell":
		c, err := get("command", "")
		if err != nil {
			return "", err
		}
		return t.shell(ctx, c)
	}
	return "", fmt.Errorf("unknown tool %q", name)
}

// ErrOutside is returned for a path that is absolute or escapes Dir.
var ErrOutside = errors.New("path outside the working directory")

// resolve joins a relative, slash-separated path to Dir.
func (t *Tools) resolve(path string) (string, error) {
	if path == "" {
		path = "."
	}
	if filepath.IsAbs(path) || strings.HasPrefix(path, "/") || !filepath.IsLocal(filepath.FromSlash(path)) {
		return "", fmt.Errorf("%q: %w", path, ErrOutside)
	}
	return filepath.Join(t.Dir, filepath.FromSlash(path)), nil
}

func (t *Tools) count(s string) int {
	if t.Count != nil {
		return t.Count(s)
	}
	return (len(s) + 3) / 4
}

func (t *Tools) maxTokens() int {
	if t.MaxOutputTokens > 0 {
		return t.MaxOutputTokens
	}
	return DefaultMaxOutputTokens
}

// listDir lists a directory recursively: directories end in "/", files
// show their line count and size.
func (t *Tools) listDir(path string) (string, error) {
	root, err := t.resolve(path)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(root); err != nil {
		return "", err
	} else if !fi.IsDir() {
		return "", fmt.Errorf("list_dir: %s is not a directory", path)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", path)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			fmt.Fprintf(&b, "  %s/\n", filepath.ToSlash(rel))
			return nil
		}
		data, _ := os.ReadFile(p)
		fmt.Fprintf(&b, "  %-24s %5d lines %7d bytes\n", filepath.ToSlash(rel), bytes.Count(data, []byte("\n")), len(data))
		return nil
	})
	return b.String(), err
}

// readFile numbers the file's lines, cutting it at MaxOutputTokens.
func (t *Tools) readFile(path string) (string, error) {
	full, err := t.resolve(path)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return "", err
	}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var b strings.Builder
	budget := t.maxTokens() - 40
	for i, l := range lines {
		row := fmt.Sprintf("%4d\t%s", i+1, l)
		if budget -= t.count(row); budget < 0 {
			fmt.Fprintf(&b, "[... truncated: %d more lines; read a range to see them]\n", len(lines)-i)
			break
		}
		b.WriteString(row)
	}
	return b.String(), nil
}

// grep searches the files under path for a regular expression.
func (t *Tools) grep(pattern, path string) (string, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", fmt.Errorf("grep: %w", err)
	}
	root, err := t.resolve(path)
	if err != nil {
		return "", err
	}
	var hits []string
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(t.Dir, p)
		found := false
		for i, l := range strings.Split(string(data), "\n") {
			if re.MatchString(l) {
				hits = append(hits, fmt.Sprintf("%s:%d:%s", filepath.ToSlash(rel), i+1, l))
				found = true
			}
		}
		if found {
			files++
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d matches in %d files for /%s/ under %s\n", len(hits), files, pattern, path)
	budget := t.maxTokens() - 60
	for i, h := range hits {
		if budget -= t.count(h + "\n"); budget < 0 {
			fmt.Fprintf(&b, "[... %d more matches; narrow the pattern or the path]\n", len(hits)-i)
			break
		}
		b.WriteString(h + "\n")
	}
	return b.String(), nil
}

// shell runs cmd with sh in Dir: the output is the command line, its
// combined output and its exit code.
func (t *Tools) shell(ctx context.Context, cmd string) (string, error) {
	timeout := t.ShellTimeout
	if timeout <= 0 {
		timeout = DefaultShellTimeout
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.Dir = t.Dir
	c.Env = append(os.Environ(), t.Env...)
	c.WaitDelay = time.Second
	out, err := c.CombinedOutput()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return "", fmt.Errorf("shell: %w", err)
		}
		code = ee.ExitCode()
	}
	if err := parent.Err(); err != nil {
		return "", err
	}
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Sprintf("$ %s\n%s[timed out after %s]\n", cmd, out, timeout), nil
	}
	return fmt.Sprintf("$ %s\n%s[exit code %d]\n", cmd, out, code), nil
}
