// Command gentraces generates the embedded replay traces (sampler/traces):
// it plays scripted coding-agent sessions against a temporary copy of the
// fixture repository (sampler/traces/repo) for real, with the agent tools of
// package clienttools (those "tether trace record" runs): list_dir,
// read_file and grep read the copy's files, apply_patch edits it, and shell
// runs the commands (go test, go vet, go run) in it; the outputs are
// recorded as the agent saw them, with run times normalized so that the
// files are reproducible. Tool durations are a deterministic model of the tools'
// cost. Run it with go generate in sampler.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/sampler"
)

// Output bounds, in o200k_base tokens.
const (
	minOutputTokens = 50
	maxOutputTokens = 8000
)

var renderer *sampler.Renderer

func main() {
	repo := flag.String("repo", "traces/repo", "fixture repository")
	out := flag.String("out", "traces", "directory the traces are written to")
	flag.Parse()
	var err error
	if renderer, err = sampler.NewRenderer(); err != nil {
		fatal(err)
	}
	for _, s := range sessions {
		t := play(*repo, s)
		if err := write(filepath.Join(*out, t.Name+".jsonl"), t); err != nil {
			fatal(err)
		}
		fmt.Printf("%s: %d steps, %d calls\n", t.Name, len(t.Steps), t.Calls())
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "gentraces:", err)
	os.Exit(1)
}

// session is a scripted agent session.
type session struct {
	name, task string
	steps      []step
}

// step is one assistant step: text and parallel actions.
type step struct {
	text    string
	actions []action
}

// action is one tool call, executed against the working copy.
type action struct {
	name string
	args map[string]string
	// edits, for apply_patch: applied to the copy, and rendered as the patch.
	edits []edit
}

// edit replaces old, which must occur exactly once, by new in path.
type edit struct{ path, old, new string }

func s(text string, actions ...action) step { return step{text: text, actions: actions} }

func ls(path string) action { return action{name: "list_dir", args: map[string]string{"path": path}} }
func rf(path string) action { return action{name: "read_file", args: map[string]string{"path": path}} }
func gr(pattern, path string) action {
	return action{name: "grep", args: map[string]string{"pattern": pattern, "path": path}}
}
func sh(cmd string) action { return action{name: "shell", args: map[string]string{"command": cmd}} }
func patch(edits ...edit) action {
	return action{name: "apply_patch", edits: edits}
}

// play runs a session on a fresh copy of repo.
func play(repo string, sess session) *sampler.Trace {
	dir, err := os.MkdirTemp("", "gentraces-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := copyTree(repo, dir); err != nil {
		fatal(err)
	}
	t := &sampler.Trace{Name: sess.name, Task: sess.task, Repo: "calc"}
	context := renderer.Count(sess.task)
	for i, st := range sess.steps {
		ts := sampler.TraceStep{Text: st.text}
		for _, a := range st.actions {
			args, output, ms := run(dir, a)
			n := renderer.Count(output)
			if n < minOutputTokens || n > maxOutputTokens {
				fatal(fmt.Errorf("%s step %d: %s %s: output of %d tokens:\n%s", sess.name, i, a.name, args, n, output))
			}
			ts.Calls = append(ts.Calls, sampler.TraceCall{Name: a.name, Arguments: args, Output: output, DurationMS: ms})
			context += renderer.Count(args) + n
		}
		// Reasoning grows with what the step has to digest.
		ts.ReasoningTokens = 48 + 64*len(st.actions) + min(context/200, 400) + 16*(i%5)
		context += renderer.Count(st.text)
		t.Steps = append(t.Steps, ts)
	}
	return t
}

// run executes an action in dir with clienttools and returns its arguments
// JSON, output and modeled duration in milliseconds.
func run(dir string, a action) (string, string, int) {
	tools := &clienttools.Tools{Dir: dir, Count: renderer.Count, MaxOutputTokens: maxOutputTokens,
		Env: []string{"GOWORK=off", "GOFLAGS=", "GO111MODULE=on"}}
	args := mustJSON(a.args)
	if a.name == "apply_patch" {
		args = mustJSON(map[string]string{"patch": patchText(dir, a.edits)})
	}
	out, err := tools.Run(context.Background(), a.name, args)
	if err != nil {
		fatal(err)
	}
	switch a.name {
	case "apply_patch":
		return args, out, 6 + 2*len(a.edits)
	case "list_dir":
		return args, out, 3 + strings.Count(out, "\n")/10
	case "read_file":
		return args, out, 2 + len(out)/20000
	case "grep":
		return args, out, 9 + strings.Count(out, "\n")/20
	case "shell":
		return args, normalize(dir, out), shellMS(a.args["command"])
	}
	fatal(fmt.Errorf("unknown tool %s", a.name))
	return "", "", 0
}

func mustJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}

// patchText renders edits as a patch in the Codex format, against the
// copy's files as they are (clienttools applies it): each hunk has up to 3
// context lines either side, then the - and + lines of the changed lines.
func patchText(dir string, edits []edit) string {
	var p strings.Builder
	p.WriteString("*** Begin Patch\n")
	byFile := map[string][]edit{}
	var order []string
	for _, e := range edits {
		if _, ok := byFile[e.path]; !ok {
			order = append(order, e.path)
		}
		byFile[e.path] = append(byFile[e.path], e)
	}
	for _, f := range order {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			fatal(err)
		}
		src := string(data)
		fmt.Fprintf(&p, "*** Update File: %s\n", f)
		for _, e := range byFile[f] {
			if strings.Count(src, e.old) != 1 {
				fatal(fmt.Errorf("patch %s: %q occurs %d times", f, e.old, strings.Count(src, e.old)))
			}
			at := strings.Index(src, e.old)
			before := strings.Split(src[:at], "\n")
			lead := before[len(before)-1] // text on the first changed line before e.old
			ctxLines := before[max(0, len(before)-4) : len(before)-1]
			restStart := at + len(e.old)
			lineEnd := strings.IndexByte(src[restStart:], '\n')
			if lineEnd < 0 {
				lineEnd = len(src) - restStart
			}
			tail := src[restStart : restStart+lineEnd]
			after := strings.Split(src[restStart+lineEnd:], "\n")
			if len(after) > 0 {
				after = after[1:]
			}
			after = after[:min(3, len(after))]
			p.WriteString("@@\n")
			for _, l := range ctxLines {
				fmt.Fprintf(&p, " %s\n", l)
			}
			for _, l := range strings.Split(lead+e.old+tail, "\n") {
				fmt.Fprintf(&p, "-%s\n", l)
			}
			for _, l := range strings.Split(lead+e.new+tail, "\n") {
				fmt.Fprintf(&p, "+%s\n", l)
			}
			for _, l := range after {
				fmt.Fprintf(&p, " %s\n", l)
			}
			src = src[:at] + e.new + src[restStart:]
		}
	}
	p.WriteString("*** End Patch\n")
	return p.String()
}

var (
	elapsedRe = regexp.MustCompile(`\(\d+\.\d+s\)`)
	pkgTimeRe = regexp.MustCompile(`\t\d+\.\d+s`)
)

// normalize makes a shell output reproducible: run times are normalized and
// the copy's directory reads /work/calc.
func normalize(dir, out string) string {
	out = elapsedRe.ReplaceAllString(out, "(0.00s)")
	out = pkgTimeRe.ReplaceAllString(out, "\t0.004s")
	return strings.ReplaceAll(out, dir, "/work/calc")
}

// shellMS is the modeled duration of a shell command.
func shellMS(cmd string) int {
	switch {
	case strings.Contains(cmd, "go test") && strings.Contains(cmd, "go vet"):
		return 2600
	case strings.Contains(cmd, "go test"):
		return 1400
	case strings.Contains(cmd, "go run"), strings.Contains(cmd, "go vet"):
		return 900
	}
	return 350
}

func write(path string, t *sampler.Trace) error {
	var b bytes.Buffer
	b.WriteString(mustJSON(map[string]string{"trace": t.Name, "task": t.Task, "repo": t.Repo}))
	b.WriteByte('\n')
	for _, s := range t.Steps {
		b.WriteString(mustJSON(s))
		b.WriteByte('\n')
	}
	// Check the file reads back.
	if _, err := sampler.ParseTrace(bytes.NewReader(b.Bytes())); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
