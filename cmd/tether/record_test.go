package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// recordWorkdir is a small repository for the tools to act on.
func recordWorkdir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{
		"notes.txt":    "first line\nsecond line\n",
		"pkg/util.go":  "package pkg\n\nfunc Util() int { return 42 }\n",
		"pkg/other.go": "package pkg\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readTrace(t *testing.T, path string) *sampler.Trace {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := sampler.ParseTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestTraceRecord records a rollout through tether A, whose model "remote"
// samples tether B's scripted model over chat completions; the scripted
// directives of the task make it call list_dir, then read_file and grep in
// parallel, then answer. The recorded trace carries the tools' real
// outputs, and replayed, it makes the same calls again.
func TestTraceRecord(t *testing.T) {
	srv, err := runtime.NewServer(runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := httptest.NewServer(srv)
	defer b.Close()
	path := writeConfig(t, map[string]any{"models": map[string]any{"remote": map[string]any{"upstream": map[string]any{
		"base_url": b.URL + "/v1", "api": "chat", "model": sampler.ScriptedModel, "timeout": "30s"}}}})
	base, stop := startServe(t, "--config", path)
	defer func() {
		if code := stop(); code != 0 {
			t.Errorf("serve exit code %d", code)
		}
	}()

	task := "Look around the repository.\n" +
		`call: list_dir {"path":"."}` + "\n" +
		`call: read_file {"path":"pkg/util.go"} | grep {"pattern":"line","path":"."}` + "\n"
	out := filepath.Join(t.TempDir(), "rec.jsonl")
	var stdout, stderr strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The base as OpenAI clients take it, with /v1 (the recording of the
	// replay below gives it without).
	if code := run(ctx, []string{"trace", "record", "--url", base + "/v1", "--upstream-model", "remote", "--workdir", recordWorkdir(t),
		"--out", out, "--name", "rec", task}, &stdout, &stderr); code != 0 {
		t.Fatalf("trace record: code %d: %s", code, stderr.String())
	}
	tr := readTrace(t, out)
	if tr.Name != "rec" || tr.Task != task || len(tr.Steps) != 3 {
		t.Fatalf("trace %q task %q, %d steps: %+v", tr.Name, tr.Task, len(tr.Steps), tr.Steps)
	}
	s0, s1 := tr.Steps[0].Calls, tr.Steps[1].Calls
	if len(s0) != 1 || s0[0].Name != "list_dir" || s0[0].Arguments != `{"path":"."}` ||
		!strings.Contains(s0[0].Output, "notes.txt") || !strings.Contains(s0[0].Output, "pkg/\n") || !strings.Contains(s0[0].Output, "pkg/util.go") {
		t.Fatalf("step 0: %+v", s0)
	}
	if len(s1) != 2 || s1[0].Name != "read_file" || s1[0].Output != "   1\tpackage pkg\n   2\t\n   3\tfunc Util() int { return 42 }\n" ||
		s1[1].Name != "grep" || !strings.Contains(s1[1].Output, "notes.txt:2:second line") {
		t.Fatalf("step 1: %+v", s1)
	}
	if tr.Steps[2].Text == "" || len(tr.Steps[2].Calls) != 0 {
		t.Fatalf("final step: %+v", tr.Steps[2])
	}

	// Served as a replay and recorded again, the trace makes the same calls
	// with the same outputs.
	rsrv, err := runtime.NewServer(runtime.Options{Models: map[string]runtime.Sampler{"replay:rec": sampler.NewReplay(nil, sampler.Timing{}, tr)}})
	if err != nil {
		t.Fatal(err)
	}
	rs := httptest.NewServer(rsrv)
	defer rs.Close()
	out2 := filepath.Join(t.TempDir(), "again.jsonl")
	if code := run(ctx, []string{"trace", "record", "--url", rs.URL, "--upstream-model", "replay:rec", "--workdir", recordWorkdir(t),
		"--out", out2, "--name", "rec", task}, &stdout, &stderr); code != 0 {
		t.Fatalf("trace record of the replay: code %d: %s", code, stderr.String())
	}
	again := readTrace(t, out2)
	if len(again.Steps) != len(tr.Steps) || again.Steps[2].Text != tr.Steps[2].Text {
		t.Fatalf("replayed: %+v", again.Steps)
	}
	for k := range 2 {
		for i, c := range tr.Steps[k].Calls {
			g := again.Steps[k].Calls[i]
			if g.Name != c.Name || g.Arguments != c.Arguments || g.Output != c.Output {
				t.Errorf("step %d call %d: %+v, want %+v", k, i, g, c)
			}
		}
	}
}

func TestTraceRecordFlags(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"trace", "record", "--url", "http://127.0.0.1:1", "task"}, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "--upstream-model") {
		t.Fatalf("missing flags: code %d: %s", code, stderr.String())
	}
}
