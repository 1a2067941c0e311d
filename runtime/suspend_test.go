package runtime_test

import (
	"testing"

	"github.com/tether-run/tether/runtime"
)

// suspendedTurn reads until response.done or a terminal event.
func untilPause(t *testing.T, c *wsConn) [][]byte {
	t.Helper()
	var events [][]byte
	for {
		b := c.recv(t)
		events = append(events, b)
		switch eventType(t, b) {
		case "response.done", "response.completed", "response.failed", "response.incomplete", "response.cancelled", "error":
			return events
		}
	}
}

func pendingCalls(t *testing.T, done []byte) []map[string]any {
	t.Helper()
	r := obj(t, terminalResponse(t, done))
	if r["status"] != "requires_action" {
		t.Fatalf("response.done status %v", r["status"])
	}
	var out []map[string]any
	for _, c := range r["required_action"].(map[string]any)["submit_tool_outputs"].(map[string]any)["tool_calls"].([]any) {
		out = append(out, c.(map[string]any))
	}
	return out
}

func TestSuspendedBasic(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true,
		"input": "call: read_file {\"path\":\"a.go\"}\ncall: grep {\"q\":\"x\"} | list_dir {\"path\":\".\"}"}))
	ev := untilPause(t, c)
	calls := pendingCalls(t, ev[len(ev)-1])
	if len(calls) != 1 || calls[0]["name"] != "read_file" {
		t.Fatalf("step 1 calls %v", calls)
	}
	id := obj(t, terminalResponse(t, ev[len(ev)-1]))["id"]
	c.send(t, map[string]any{"type": "response.append", "response_id": id, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "package a"}}})
	ev2 := untilPause(t, c)
	calls = pendingCalls(t, ev2[len(ev2)-1])
	if len(calls) != 2 {
		t.Fatalf("step 2 calls %v", calls)
	}
	var outs []any
	for _, cl := range calls {
		outs = append(outs, map[string]any{"type": "function_call_output", "call_id": cl["call_id"], "output": "ok " + cl["name"].(string)})
	}
	c.send(t, map[string]any{"type": "response.append", "response_id": id, "input": outs})
	ev3 := untilPause(t, c)
	last := ev3[len(ev3)-1]
	if eventType(t, last) != "response.completed" {
		t.Fatalf("ended with %s", last)
	}
	all := append(append(ev, ev2...), ev3...)
	checkStreamInvariants(t, all)
	r := obj(t, terminalResponse(t, last))
	out := r["output"].([]any)
	if len(out) != 4 {
		t.Fatalf("output %v", out)
	}
	t.Logf("usage %v", r["usage"])
}
