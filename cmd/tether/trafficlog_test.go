package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/record"
	"github.com/tether-run/tether/sampler"
)

// TestServeRecordRotated: serve --record with small files rotates its log
// as it serves, every file whole lines within --record-file-bytes; trace
// import, given the directory, reads the rotated set as one log, whose
// sessions cross files. Cut inside the last session's answer (a server
// stopped mid-write), the log, named by its current file, imports up to
// the cut's last whole line: stderr names the file and the line, the exit
// status is 0, and every session that ended before the cut is a trace.
func TestServeRecordRotated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := filepath.Join(dir, "log")
	base, stop := serveInProcess(t, "--record", logs, "--record-file-bytes", "16KiB", "--record-files", "100", "--record-bytes", "100MiB")
	c := &clienttools.Client{BaseURL: base + "/v1"}
	look := []clienttools.Func{{Name: "look", Parameters: []byte(`{"type":"object"}`), Run: func(context.Context, string) (string, error) { return "seen", nil }}}
	modes := []clienttools.Mode{clienttools.ModeStateless, clienttools.ModeSuspend, clienttools.ModeStateless, clienttools.ModeSuspend}
	for i, mode := range modes {
		task := fmt.Sprintf("Task %d.\ncall: look {\"at\":\"one\"}\ncall: look {\"at\":\"two\"}", i)
		if _, err := c.Run(t.Context(), clienttools.Rollout{Mode: mode, Funcs: look,
			Request: &protocol.CreateRequest{Model: "tether-scripted", Input: protocol.Items{protocol.UserMessage(task)}}}); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
	}
	stop()

	files, err := filepath.Glob(filepath.Join(logs, "tether-record-*.jsonl"))
	if err != nil || len(files) < 3 {
		t.Fatalf("the log's files: %v (%v): want it rotated, three files at least", files, err)
	}
	var current string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 16<<10 || !strings.HasPrefix(string(b), `{"tether_record":1,`) || !strings.HasSuffix(string(b), "\n") {
			t.Errorf("%s: %d bytes, %.30q…%q: want at most 16 KiB of whole lines from a header", f, len(b), b, b[max(len(b)-10, 0):])
		}
		if !regexp.MustCompile(`\.\d+\.jsonl$`).MatchString(f) {
			current = f
		}
	}

	var stdout, stderr strings.Builder
	out := filepath.Join(dir, "traces")
	if code := run(t.Context(), []string{"trace", "import", "--out", out, logs}, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
		t.Fatalf("import: exit %d: %s", code, stderr.String())
	}
	if want := fmt.Sprintf("%s (%d files): ", current, len(files)); !strings.HasPrefix(stdout.String(), want) || !strings.Contains(stdout.String(), "4 sessions, 4 user turns: 4 traces") {
		t.Errorf("import of the log, want %q… and 4 traces:\n%s", want, stdout.String())
	}
	traces, err := sampler.LoadTraceDir(out)
	if err != nil || len(traces) != 4 {
		t.Fatalf("imported %d traces (%v)", len(traces), err)
	}
	for _, tr := range traces {
		if tr.Calls() != 2 {
			t.Errorf("%s (%s): %d calls, want 2", tr.Name, tr.Task, tr.Calls())
		}
	}

	// Cut inside the line of the last session's answer, as a server
	// stopped while writing it leaves the log (the file it is in may be
	// rotated out already: the next is read on).
	set, err := record.Files(current)
	if err != nil || len(set) != len(files) || set[len(set)-1] != current {
		t.Fatalf("the log's files in order: %v (%v)", set, err)
	}
	cutFile, cutLine := "", 0
	for i := len(set) - 1; cutFile == ""; i-- {
		b, err := os.ReadFile(set[i])
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(b), "\n")
		for k := len(lines) - 1; k > 0 && cutFile == ""; k-- {
			if strings.Contains(lines[k], `"type":"response.output_item.done"`) && strings.Contains(lines[k], `"type":"message"`) {
				cutFile, cutLine = set[i], k+1
				if err := os.WriteFile(cutFile, []byte(strings.Join(lines[:k], "")+lines[k][:len(lines[k])/2]), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	stdout.Reset()
	stderr.Reset()
	out = filepath.Join(dir, "cut")
	if code := run(t.Context(), []string{"trace", "import", "--out", out, current}, &stdout, &stderr); code != 0 {
		t.Fatalf("import of the cut log: exit %d: %s", code, stderr.String())
	}
	if want := fmt.Sprintf("tether: trace import: %s ends inside line %d, which its writer did not finish: read up to line %d\n", cutFile, cutLine, cutLine-1); stderr.String() != want {
		t.Errorf("stderr %q\nwant %q", stderr.String(), want)
	}
	if !strings.Contains(stdout.String(), "4 sessions, 4 user turns: 3 traces") || !strings.Contains(stdout.String(), "no trace for session 4 turn 1") {
		t.Errorf("import of the cut log: want the 3 sessions that ended before the cut:\n%s", stdout.String())
	}
}

// TestServeRecordBounds: a file larger than the whole log is refused, by
// the flags' names, before anything is recorded.
func TestServeRecordBounds(t *testing.T) {
	t.Parallel()
	logs := filepath.Join(t.TempDir(), "log")
	var stderr strings.Builder
	code := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--record", logs, "--record-file-bytes", "2MiB", "--record-bytes", "1MiB"}, &strings.Builder{}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--record-file-bytes 2097152 is more than --record-bytes 1048576") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(logs); !os.IsNotExist(err) {
		t.Errorf("a log refused made its directory: %v", err)
	}
}
