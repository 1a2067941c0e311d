package examples_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tether-run/tether/internal/ablate"
	"github.com/tether-run/tether/internal/traceimport"
	"github.com/tether-run/tether/sampler"
)

// TestOpenAIGoRecord: a session the official Go SDK drives against
// `tether serve --record` (the openai-go example: cached-state turns, then
// a suspended rollout) is kept in a traffic log; `tether trace import`
// makes each of its user turns a replay trace holding the calls the SDK
// answered, with the outputs it sent; and those traces, replayed through
// every design by ablate against a second server that records too, come
// back from its log the same: the same calls in the same order, with the
// same arguments and output sizes.
func TestOpenAIGoRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs, traceDir := filepath.Join(dir, "log"), filepath.Join(dir, "traces")
	base, stop := serveTether(t, "--tps", "1000", "--record", logs)
	out := runOK(t, ".", nil, binary(t, "openai-go"), "-url", base+"/v1")
	stop()
	wantSDKOutput(t, out)

	// What the SDK example answered: each call, its arguments and the
	// output it appended, in order; turn 1 made one call, the suspended
	// rollout (turn 2) two.
	var sent []string
	for _, m := range regexp.MustCompile(`(?m)^(?:turn 1|suspended) resp_\w+.*?: (\w+) (\{.*?\}) -> "(.*)" \(`).FindAllStringSubmatch(out, -1) {
		sent = append(sent, m[1]+" "+m[2]+" -> "+m[3])
	}
	if len(sent) != 3 {
		t.Fatalf("the example answered %d calls (%q), want 3:\n%s", len(sent), sent, out)
	}

	stdout := runOK(t, ".", nil, binary(t, "tether"), "trace", "import", "--out", traceDir, "--name", "sdk", logs)
	wantLines(t, stdout, `: \d+ lines, 2 user turns: 2 traces$`, `^  sdk-1: 2 steps, 1 calls \(get_weather 1\)`, `^  sdk-2: 3 steps, 2 calls \(get_weather 2\)`)
	traces, err := sampler.LoadTraceDir(traceDir)
	if err != nil || len(traces) != 2 {
		t.Fatalf("imported %d traces (%v)", len(traces), err)
	}
	if got := calls(traces...); strings.Join(got, "\n") != strings.Join(sent, "\n") {
		t.Errorf("imported calls:\n%s\nwant what the SDK sent:\n%s", strings.Join(got, "\n"), strings.Join(sent, "\n"))
	}
	show := runOK(t, ".", nil, binary(t, "tether"), "trace", "show", filepath.Join(traceDir, "sdk-2.jsonl"))
	if !strings.Contains(show, "imported from tether record") || !strings.Contains(show, "3 steps, 2 calls") {
		t.Errorf("trace show:\n%s", show)
	}

	// Replayed through every design against a server that records.
	logs2 := filepath.Join(dir, "log2")
	base2, stop2 := serveTether(t, "--tps", "1000", "--traces", traceDir, "--record", logs2)
	var modes []ablate.Design
	for _, m := range []string{"stateless", "chained", "turns", "suspend"} {
		d, err := ablate.ParseDesign(m)
		if err != nil {
			t.Fatal(err)
		}
		modes = append(modes, d)
	}
	for _, tr := range traces {
		w, err := ablate.TraceWorkload(tr, ablate.ToolsReplay)
		if err != nil {
			t.Fatal(err)
		}
		res, err := ablate.Run(t.Context(), ablate.Config{URL: base2 + "/v1", Workload: w, Traces: traces, Modes: modes, Speeds: []float64{1000}, Reps: 1})
		if err != nil {
			stop2()
			t.Fatalf("%s: %v", tr.Name, err)
		}
		for _, tri := range res.Trials {
			if tri.Calls != tr.Calls() {
				t.Errorf("%s %s: %d calls, want %d", tr.Name, tri.Mode, tri.Calls, tr.Calls())
			}
		}
	}
	stop2()
	files, _ := filepath.Glob(filepath.Join(logs2, "tether-record-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("second server's logs: %v", files)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	replayed, rep, err := traceimport.Record(f, "replayed")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the replays' log: %d lines, %d sessions, %d turns, skipped %v, dropped %v", rep.Lines, rep.Sessions, rep.Turns, rep.Skipped, rep.Dropped)
	// Each design replayed each trace once (beside ablate's warm-ups, of
	// another task): four of each, the same as the trace.
	for _, want := range traces {
		n := 0
		for _, r := range replayed {
			if r.Task != want.Task {
				continue
			}
			n++
			if len(r.History) != len(want.History) {
				t.Errorf("a replay of %s (%s): %d items of history, want %d", want.Name, r.Source, len(r.History), len(want.History))
			}
			if got, w := sizes(r), sizes(want); got != w {
				t.Errorf("a replay of %s (%s):\n%s\nwant\n%s", want.Name, r.Source, got, w)
			}
		}
		if n != len(modes) {
			t.Errorf("%s was replayed %d times in the log, want once a design (%d)", want.Name, n, len(modes))
		}
	}
}

// calls lists the traces' calls as "name arguments -> output".
func calls(traces ...*sampler.Trace) []string {
	var out []string
	for _, tr := range traces {
		for _, s := range tr.Steps {
			for _, c := range s.Calls {
				out = append(out, c.Name+" "+c.Arguments+" -> "+c.Output)
			}
		}
	}
	return out
}

// sizes describes a trace's steps by their calls, arguments and sizes:
// what a replay must reproduce.
func sizes(tr *sampler.Trace) string {
	var b strings.Builder
	for i, s := range tr.Steps {
		fmt.Fprintf(&b, "step %d: text %d bytes", i, len(s.Text))
		for _, c := range s.Calls {
			fmt.Fprintf(&b, "; %s %s output %d bytes", c.Name, c.Arguments, len(c.Output))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// serveTether runs the tether binary's serve on a free loopback port with
// args, and returns its base URL (http://127.0.0.1:PORT) and the function
// that stops it with SIGTERM, as a user would, and checks it exits 0.
func serveTether(t *testing.T, args ...string) (base string, stop func()) {
	t.Helper()
	cmd := exec.Command(binary(t, "tether"), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	base = strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	var stopped bool
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve %v: %v\n%s", args, err, stderr.String())
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("serve %v did not stop on SIGTERM\n%s", args, stderr.String())
		}
	}
	t.Cleanup(stop)
	return base, stop
}
