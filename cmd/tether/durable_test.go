package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/internal/redistest"
)

// serveProcess is a tether serve process the test may kill.
type serveProcess struct {
	base string
	cmd  *exec.Cmd
}

func startServeProcess(t *testing.T, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(tetherBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("tether serve %v: %q %v\n%s", args, line, err, stderr.String())
	}
	return &serveProcess{base: base, cmd: cmd}
}

// durableScript is a rollout of three steps, each parked on client calls.
const durableScript = "call: read_file {\"path\":\"a.go\"}\ncall: grep {\"pattern\":\"x\"} | list_dir {}\ncall: run_tests {}"

// wsRollout is one suspended rollout driven over raw WebSocket frames.
type wsRollout struct {
	id     string
	events []map[string]any
	raw    [][]byte
}

func dialWS(ctx context.Context, t *testing.T, base string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"/v1/responses", &websocket.DialOptions{
		HTTPHeader: map[string][]string{"Authorization": {"Bearer durable"}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(-1)
	return c
}

func sendJSON(ctx context.Context, t *testing.T, c *websocket.Conn, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

// untilPause reads until a pause or the end, appending to ro.
func (ro *wsRollout) untilPause(ctx context.Context, t *testing.T, c *websocket.Conn) map[string]any {
	t.Helper()
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("rollout %s: %v", ro.id, err)
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		ro.events, ro.raw = append(ro.events, ev), append(ro.raw, b)
		switch ev["type"] {
		case "error":
			t.Fatalf("rollout %s: %s", ro.id, b)
		case "response.created":
			ro.id = ev["response"].(map[string]any)["id"].(string)
		case "response.done", "response.completed", "response.failed", "response.cancelled", "response.incomplete":
			return ev
		}
	}
}

// outputs answers every call a pause lists.
func outputs(pause map[string]any) []any {
	var outs []any
	calls := pause["response"].(map[string]any)["required_action"].(map[string]any)["submit_tool_outputs"].(map[string]any)["tool_calls"].([]any)
	for _, c := range calls {
		call := c.(map[string]any)
		outs = append(outs, map[string]any{"type": "function_call_output", "call_id": call["call_id"],
			"output": fmt.Sprintf("%s says ok", call["name"])})
	}
	return outs
}

func seqOf(ev map[string]any) int { return int(ev["sequence_number"].(float64)) }

// TestDurableKill: rollouts parked on server A, which is killed (SIGKILL),
// are each resumed on server B, which shares A's Redis: each completes with
// the same output as the same rollout never interrupted, and every event
// reaches its client exactly once (the pending pause, which a resume
// repeats, aside). Real processes, a real redis-server.
func TestDurableKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two tether serve processes and a redis-server: not in -short")
	}
	t.Parallel()
	redis := redistest.Start(t)
	a := startServeProcess(t, "--store", redis.URL())
	b := startServeProcess(t, "--store", redis.URL())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	create := map[string]any{"type": "response.create", "model": "tether-scripted", "suspend": true, "store": false, "input": durableScript}

	// The same rollout, never interrupted.
	var want wsRollout
	{
		c := dialWS(ctx, t, b.base)
		sendJSON(ctx, t, c, create)
		for ev := want.untilPause(ctx, t, c); ev["type"] == "response.done"; ev = want.untilPause(ctx, t, c) {
			sendJSON(ctx, t, c, map[string]any{"type": "response.append", "response_id": want.id, "input": outputs(ev)})
		}
		c.CloseNow()
	}

	const n = 200
	ros := make([]*wsRollout, n)
	for i := range ros {
		ro := &wsRollout{}
		c := dialWS(ctx, t, a.base)
		sendJSON(ctx, t, c, create)
		pause := ro.untilPause(ctx, t, c)
		sendJSON(ctx, t, c, map[string]any{"type": "response.append", "response_id": ro.id, "input": outputs(pause)})
		ro.untilPause(ctx, t, c) // parked on its second step
		ros[i] = ro
		defer c.CloseNow()
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()

	for _, ro := range ros {
		seen := len(ro.raw)
		pending := ro.raw[seen-1]
		c := dialWS(ctx, t, b.base)
		sendJSON(ctx, t, c, map[string]any{"type": "response.resume", "response_id": ro.id, "sequence_number": seqOf(ro.events[seen-1])})
		pause := ro.untilPause(ctx, t, c)
		if !bytes.Equal(ro.raw[len(ro.raw)-1], pending) {
			t.Fatalf("rollout %s: B's resume sent %s, want the pending pause A sent", ro.id, ro.raw[len(ro.raw)-1])
		}
		// The repeated pause aside, the events are one stream.
		ro.events, ro.raw = ro.events[:seen], ro.raw[:seen]
		for ev := pause; ev["type"] == "response.done"; ev = ro.untilPause(ctx, t, c) {
			sendJSON(ctx, t, c, map[string]any{"type": "response.append", "response_id": ro.id, "input": outputs(ev)})
		}
		c.CloseNow()
		for i, ev := range ro.events {
			if seqOf(ev) != i {
				t.Fatalf("rollout %s: event %d has sequence_number %d: %s", ro.id, i, seqOf(ev), ro.raw[i])
			}
		}
		if got, want := endSummary(ro.events[len(ro.events)-1]), endSummary(want.events[len(want.events)-1]); got != want {
			t.Fatalf("rollout %s ended\n%s\nwant, as never interrupted,\n%s", ro.id, got, want)
		}
	}
}

// endSummary is what two runs of one rollout share: its status, its items'
// types, calls and text, and its output tokens (ids differ).
func endSummary(end map[string]any) string {
	resp := end["response"].(map[string]any)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v\n", resp["status"], resp["usage"].(map[string]any)["output_tokens"])
	for _, it := range resp["output"].([]any) {
		item := it.(map[string]any)
		fmt.Fprintf(&b, "%s %v %v", item["type"], item["name"], item["arguments"])
		if content, ok := item["content"].([]any); ok {
			for _, p := range content {
				fmt.Fprintf(&b, " %q", p.(map[string]any)["text"])
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
