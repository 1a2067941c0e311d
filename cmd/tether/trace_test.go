package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/internal/traceimport"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// replayServer serves every model of models() with the flags' defaults.
func replayServer(t *testing.T) *httptest.Server {
	t.Helper()
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	served, err := models(nil, timingFlags{set: map[string]bool{}}, r, sampler.NewEngine())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := runtime.NewServer(runtime.Options{Models: served, Renderer: r})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		hs.Close()
	})
	return hs
}

// agentTools are the function tools of the traces, as a client declares them.
var agentTools = func() []map[string]any {
	var out []map[string]any
	for _, name := range []string{"list_dir", "read_file", "grep", "apply_patch", "shell"} {
		out = append(out, map[string]any{"type": "function", "name": name, "parameters": map[string]any{"type": "object"}})
	}
	return out
}()

// response is the part of a response object the tests compare.
type response struct {
	ID     string            `json:"id"`
	Status string            `json:"status"`
	Output []json.RawMessage `json:"output"`
}

type outItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// keys summarizes output items: type, name, arguments, text. Call ids are
// left out: each response draws its own, so they differ from one design
// to the next; outputsFor checks that no two calls of a walk share one.
func keys(t *testing.T, out []json.RawMessage) ([]string, []outItem) {
	t.Helper()
	var ks []string
	var items []outItem
	for _, raw := range out {
		var it outItem
		if err := json.Unmarshal(raw, &it); err != nil {
			t.Fatal(err)
		}
		k := it.Type + "|" + it.Name + "|" + it.Arguments
		for _, c := range it.Content {
			k += "|" + c.Text
		}
		ks = append(ks, k)
		items = append(items, it)
	}
	return ks, items
}

// outputsFor are the trace's recorded outputs for the calls of a response,
// step k's, which must have ids no call of the walk had before (seen).
func outputsFor(t *testing.T, tr *sampler.Trace, k int, items []outItem, seen map[string]bool) []map[string]any {
	t.Helper()
	var calls []outItem
	for _, it := range items {
		if it.Type == "function_call" {
			calls = append(calls, it)
		}
	}
	if len(calls) != len(tr.Steps[k].Calls) {
		t.Fatalf("step %d: %d calls, want %d", k, len(calls), len(tr.Steps[k].Calls))
	}
	var out []map[string]any
	for i, c := range calls {
		if c.CallID == "" || seen[c.CallID] || c.Name != tr.Steps[k].Calls[i].Name || c.Arguments != tr.Steps[k].Calls[i].Arguments {
			t.Fatalf("step %d call %d: %+v, want %s %s under an id of its own", k, i, c, tr.Steps[k].Calls[i].Name, tr.Steps[k].Calls[i].Arguments)
		}
		seen[c.CallID] = true
		out = append(out, map[string]any{"type": "function_call_output", "call_id": c.CallID, "output": tr.Steps[k].Calls[i].Output})
	}
	return out
}

// replayHTTP walks a trace over stateless HTTP: the full history each turn.
func replayHTTP(t *testing.T, base string, tr *sampler.Trace) [][]string {
	var turns [][]string
	seen := map[string]bool{}
	input := []any{map[string]any{"role": "user", "content": "Fix the failing tests in the calc repository."}}
	for k := range tr.Steps {
		body, _ := json.Marshal(map[string]any{"model": sampler.ReplayPrefix + tr.Name, "input": input, "tools": agentTools, "store": false})
		resp, err := http.Post(base+"/v1/responses", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var r response
		if resp.StatusCode != 200 || json.Unmarshal(b, &r) != nil || r.Status != "completed" {
			t.Fatalf("http turn %d: %d %s", k, resp.StatusCode, b)
		}
		ks, items := keys(t, r.Output)
		turns = append(turns, ks)
		for _, raw := range r.Output {
			input = append(input, raw)
		}
		if k < len(tr.Steps)-1 {
			for _, o := range outputsFor(t, tr, k, items, seen) {
				input = append(input, o)
			}
		}
	}
	return turns
}

// replayWS walks a trace over WebSocket turns chained by
// previous_response_id, sending only the new outputs.
func replayWS(t *testing.T, url string, tr *sampler.Trace) [][]string {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(websocket.StatusNormalClosure, "")
	c.SetReadLimit(64 << 20)
	var turns [][]string
	seen := map[string]bool{}
	var input []any = []any{map[string]any{"role": "user", "content": "Fix the failing tests in the calc repository."}}
	prev := ""
	for k := range tr.Steps {
		msg := map[string]any{"type": "response.create", "model": sampler.ReplayPrefix + tr.Name, "input": input, "tools": agentTools, "store": false}
		if prev != "" {
			msg["previous_response_id"] = prev
		}
		b, _ := json.Marshal(msg)
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		var r response
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("ws turn %d: %v", k, err)
			}
			var ev struct {
				Type     string   `json:"type"`
				Response response `json:"response"`
			}
			if err := json.Unmarshal(data, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == "response.completed" {
				r = ev.Response
				break
			}
			if ev.Type == "error" || ev.Type == "response.failed" || ev.Type == "response.incomplete" {
				t.Fatalf("ws turn %d: %s", k, data)
			}
		}
		ks, items := keys(t, r.Output)
		turns = append(turns, ks)
		prev = r.ID
		input = nil
		if k < len(tr.Steps)-1 {
			for _, o := range outputsFor(t, tr, k, items, seen) {
				input = append(input, o)
			}
		}
	}
	return turns
}

// replaySuspended walks a trace as ONE suspended response: each pause is a
// step, answered with the step's recorded outputs by response.append. It
// returns the output items of each step, from the output_item.done events.
func replaySuspended(t *testing.T, url string, tr *sampler.Trace) [][]string {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(websocket.StatusNormalClosure, "")
	c.SetReadLimit(64 << 20)
	b, _ := json.Marshal(map[string]any{"type": "response.create", "model": sampler.ReplayPrefix + tr.Name, "suspend": true,
		"input": []any{map[string]any{"role": "user", "content": "Fix the failing tests in the calc repository."}}, "tools": agentTools, "store": false})
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	var steps [][]string
	seen := map[string]bool{}
	var step []json.RawMessage
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("suspended step %d: %v", len(steps), err)
		}
		var ev struct {
			Type     string          `json:"type"`
			Item     json.RawMessage `json:"item"`
			Response response        `json:"response"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case "response.output_item.done":
			step = append(step, ev.Item)
		case "response.done", "response.completed":
			ks, items := keys(t, step)
			steps = append(steps, ks)
			if ev.Type == "response.completed" {
				return steps
			}
			b, _ := json.Marshal(map[string]any{"type": "response.append", "response_id": ev.Response.ID,
				"input": outputsFor(t, tr, len(steps)-1, items, seen)})
			if err := c.Write(ctx, websocket.MessageText, b); err != nil {
				t.Fatal(err)
			}
			step = nil
		case "error", "response.failed", "response.incomplete":
			t.Fatalf("suspended step %d: %s", len(steps), data)
		}
	}
}

// TestReplayOverHTTPAndWebSocket replays every embedded trace end to end,
// over stateless HTTP, over WebSocket turns and as one suspended rollout:
// all three walk every step of the trace, with identical output items but
// for their call ids, which each response draws for itself (no two calls
// of a walk share one).
func TestReplayOverHTTPAndWebSocket(t *testing.T) {
	hs := replayServer(t)
	traces, err := sampler.LoadTraces()
	if err != nil {
		t.Fatal(err)
	}
	ws := "ws" + strings.TrimPrefix(hs.URL, "http") + "/v1/responses"
	for _, tr := range traces {
		httpTurns := replayHTTP(t, hs.URL, tr)
		wsTurns := replayWS(t, ws, tr)
		suspended := replaySuspended(t, ws, tr)
		if len(httpTurns) != len(tr.Steps) || len(wsTurns) != len(tr.Steps) || len(suspended) != len(tr.Steps) {
			t.Fatalf("%s: %d http turns, %d ws turns, %d suspended steps, %d steps", tr.Name, len(httpTurns), len(wsTurns), len(suspended), len(tr.Steps))
		}
		for k := range httpTurns {
			h := strings.Join(httpTurns[k], "\n")
			if h != strings.Join(wsTurns[k], "\n") || h != strings.Join(suspended[k], "\n") {
				t.Fatalf("%s turn %d:\nhttp      %q\nws        %q\nsuspended %q", tr.Name, k, httpTurns[k], wsTurns[k], suspended[k])
			}
		}
		last := httpTurns[len(httpTurns)-1]
		if final := tr.Steps[len(tr.Steps)-1].Text; len(last) != 1 || !strings.HasSuffix(last[0], "|"+final) {
			t.Fatalf("%s: last turn %q", tr.Name, last)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestTraceShow(t *testing.T) {
	var out, errOut strings.Builder
	if code := run(context.Background(), []string{"trace", "show", "calc-fix-12"}, &out, &errOut); code != 0 {
		t.Fatalf("code %d: %s", code, errOut.String())
	}
	s := out.String()
	for _, want := range []string{
		"trace calc-fix-12 (model replay:calc-fix-12): repo calc, 11 steps, 12 calls",
		"step 0: output ",
		"call  read_file   path=parser.go",
		"call  apply_patch patch=parser.go",
		"call  shell       command=go test ./...",
		"total: 12 calls, largest tool output ",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("trace show output lacks %q:\n%s", want, s)
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"trace", "list"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "replay:calc-audit-50\t36 steps\t50 calls") {
		t.Fatalf("trace list: %d %q", code, out.String())
	}
	if code := run(context.Background(), []string{"trace", "show", "no-such-trace"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "calc-fix-24") {
		t.Fatalf("unknown trace: %d %q", code, errOut.String())
	}
}

// TestShowTraceSizes checks the sizes trace show reports for the longest
// trace: the context reaches 60,000 tokens.
func TestShowTraceSizes(t *testing.T) {
	tr, err := findTrace("replay:calc-audit-50", "")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := sampler.NewRenderer()
	st := showTrace(io.Discard, r, tr)
	if st.calls != 50 || st.maxOutput > 8000 || st.maxOutput < 4000 || st.context < 60000 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTraceImport imports a directory holding a Codex rollout (the
// traceimport package's hand-made one, under a rollout file name): its
// answered turns become trace files that trace show and the replay model
// read; a directory that also holds a broken rollout imports nothing.
func TestTraceImport(t *testing.T) {
	good, err := os.ReadFile("../../internal/traceimport/testdata/every-type.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "sessions", "2026", "02", "23")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	const file = "rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"
	if err := os.WriteFile(filepath.Join(in, file), good, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"trace", "import", "--out", out, "--redact", filepath.Dir(filepath.Dir(in))}, &stdout, &stderr); code != 0 {
		t.Fatalf("code %d: %s", code, stderr.String())
	}
	for _, want := range []string{"40 lines, 3 user turns: 2 traces", "codex-fc5ab61a-1: 3 steps, 3 calls", "response_item/web_search_call 1", "no trace for turn 2: ended with 1 calls unanswered"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("import output lacks %q:\n%s", want, stdout.String())
		}
	}
	traces, err := sampler.LoadTraceDir(out)
	if err != nil || len(traces) != 2 || traces[0].Name != "codex-fc5ab61a-1" {
		t.Fatalf("imported %d traces (%v)", len(traces), err)
	}
	if strings.Contains(traces[0].Task, "parser") {
		t.Errorf("--redact left the task: %q", traces[0].Task)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"trace", "show", filepath.Join(out, "codex-fc5ab61a-1.jsonl")}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "imported from codex rollout 019c8a4c") || !strings.Contains(stdout.String(), "recorded: model 16.8 s, tools 3.5 s") ||
		!strings.Contains(stdout.String(), "history: 2 items of the session before this turn") {
		t.Errorf("trace show: %d\n%s", code, stdout.String())
	}

	// A broken file beside it: nothing is written, the error names the
	// file and the line.
	broken := strings.Replace(string(good), `"type":"turn_context"`, `"type":"turn_context"`+"\n{oops", 1)
	if err := os.WriteFile(filepath.Join(in, "rollout-2026-02-23T13-00-00-019c8a4c-0000-7000-8000-000000000000.jsonl"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	stderr.Reset()
	if code := run(context.Background(), []string{"trace", "import", "--out", empty, in}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "line 7: not JSON") {
		t.Fatalf("broken import: code %d, %q", code, stderr.String())
	}
	if left, _ := os.ReadDir(empty); len(left) != 0 {
		t.Errorf("a failed import wrote %d files", len(left))
	}
}

// TestAblateTraceFile: --workload trace:FILE replays a trace file (here one
// trace import wrote), served from its directory by a child server; a
// file named as an embedded trace, or beside --traces, is refused.
func TestAblateTraceFile(t *testing.T) {
	f, err := os.Open("../../internal/traceimport/testdata/codex-0.169.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	traces, _, err := traceimport.Codex(f, "imported-ls")
	if err != nil {
		t.Fatal(err)
	}
	b, err := traces[0].Encode()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "imported-ls.jsonl")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ablateConfig("trace:"+file, "", "replay", 0, 0, 0, 0, 0, "suspend", "1000")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workload.Model != "replay:imported-ls" || cfg.TraceDir != dir || cfg.Workload.Calls != 1 || len(cfg.Traces) < 2 {
		t.Errorf("workload %s (%d calls), trace dir %q, %d traces", cfg.Workload.Model, cfg.Workload.Calls, cfg.TraceDir, len(cfg.Traces))
	}
	if _, err := ablateConfig("trace:"+file, dir, "replay", 0, 0, 0, 0, 0, "suspend", "1000"); err == nil {
		t.Error("a file beside --traces was taken")
	}
	if _, err := ablateConfig("trace:"+file, "", "real", 0, 0, 0, 0, 0, "suspend", "1000"); err == nil || !strings.Contains(err.Error(), "no repository") {
		t.Errorf("real tools for an imported trace: %v", err)
	}
}
