package runtime_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/tether-run/tether/runtime"
)

// untilPause reads until response.done or a terminal event.
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
	forWires(t, func(t *testing.T, w wire) {
		h := newHarnessOn(t, runtime.Options{}, w)
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
	})
}

// TestSuspendedTakeover: a client whose connection died half-open resumes on
// a new connection before the server noticed the drop; the rollout moves to
// the new connection, which gets the pending response.done and finishes it.
// Other credentials still cannot take it.
func TestSuspendedTakeover(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		h := newHarnessOn(t, runtime.Options{}, w)
		auth := http.Header{"Authorization": {"Bearer same"}}
		a := h.dial(t, auth)
		a.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true,
			"input": "call: read_file {\"path\":\"a.go\"}"}))
		ev := untilPause(t, a)
		done := ev[len(ev)-1]
		id := obj(t, terminalResponse(t, done))["id"]

		other := h.dial(t, http.Header{"Authorization": {"Bearer other"}})
		other.send(t, map[string]any{"type": "response.resume", "response_id": id})
		if code := wsErrorCode(t, [][]byte{other.recv(t)}); code != "response_not_found" {
			t.Fatalf("foreign resume: %s", code)
		}

		b := h.dial(t, auth) // a is still open: the server has not noticed anything
		b.send(t, map[string]any{"type": "response.resume", "response_id": id})
		again := b.recv(t)
		if !bytes.Equal(again, done) {
			t.Fatalf("resume sent %s, want the pending response.done again", again)
		}
		call := pendingCalls(t, again)[0]
		b.send(t, map[string]any{"type": "response.append", "response_id": id, "input": []any{
			map[string]any{"type": "function_call_output", "call_id": call["call_id"], "output": "package a"}}})
		end := untilPause(t, b)
		if eventType(t, end[len(end)-1]) != "response.completed" {
			t.Fatalf("ended with %s", end[len(end)-1])
		}
		// The old connection may no longer append to it.
		a.send(t, map[string]any{"type": "response.append", "response_id": id, "input": []any{}})
		if code := wsErrorCode(t, [][]byte{a.recv(t)}); code != "response_not_found" {
			t.Fatalf("append on the old connection: %s", code)
		}
	})
}

// TestSuspendedStoredContext: a stored suspended rollout keeps the tool
// outputs appended between its steps, so a continuation loaded from the
// store sees the same context as one served from the connection cache (same
// input tokens).
func TestSuspendedStoredContext(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		h := newHarnessOn(t, runtime.Options{}, w)
		c := h.dial(t, nil)
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": true, "suspend": true,
			"input": "call: read_file {\"path\":\"a.go\"}"}))
		ev := untilPause(t, c)
		id := obj(t, terminalResponse(t, ev[len(ev)-1]))["id"]
		call := pendingCalls(t, ev[len(ev)-1])[0]
		c.send(t, map[string]any{"type": "response.append", "response_id": id, "input": []any{
			map[string]any{"type": "function_call_output", "call_id": call["call_id"], "output": "package a // a long enough output to count"}}})
		if end := untilPause(t, c); eventType(t, end[len(end)-1]) != "response.completed" {
			t.Fatalf("ended with %s", end[len(end)-1])
		}
		next := map[string]any{"model": "tether-scripted", "store": false, "previous_response_id": id, "input": "Thanks."}
		c.send(t, create(next))
		cached := c.untilTerminal(t)
		fromCache := obj(t, terminalResponse(t, cached[len(cached)-1]))["usage"].(map[string]any)["input_tokens"]
		status, raw := h.post(t, "/responses", next)
		if status != 200 {
			t.Fatalf("HTTP continuation: %d %s", status, raw)
		}
		fromStore := obj(t, raw)["usage"].(map[string]any)["input_tokens"]
		if fromCache != fromStore {
			t.Fatalf("input tokens: %v from the connection cache, %v from the store", fromCache, fromStore)
		}
	})
}

// TestSuspendedLimit: the server holds at most Suspension.Max suspended
// rollouts; one more is refused with too_many_suspended, and the connection
// stays usable.
func TestSuspendedLimit(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		h := newHarnessOn(t, runtime.Options{Suspension: runtime.SuspensionOptions{Max: 1}}, w)
		c := h.dial(t, nil)
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "a",
			"input": "call: read_file {\"path\":\"a.go\"}"}))
		untilPause(t, c) // parked: it holds the server's one place
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "b", "input": "hi"}))
		if code := wsErrorCode(t, [][]byte{c.recv(t)}); code != "too_many_suspended" {
			t.Fatalf("code %s", code)
		}
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "b", "input": "hi"}))
		if end := c.untilTerminal(t); eventType(t, end[len(end)-1]) != "response.completed" {
			t.Fatalf("turn after the refusal: %s", end[len(end)-1])
		}
	})
}

// TestSuspendedTakenOverRollout: once a suspended rollout is resumed on a new
// connection, its old connection (still open, half-open for all it knows)
// may neither append to it nor cancel it: both are response_not_found, as
// for any response not on the connection. It guards against the old
// connection's cancel ending the rollout under the new one.
func TestSuspendedTakenOverRollout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t)})
	auth := http.Header{"Authorization": {"Bearer same"}}
	a := h.dial(t, auth)
	a.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true,
		"input": script([][]dcall{{{"read_file", `{"path":"a.go"}`}}})}))
	pause := last(a.next(t))
	id := respID(t, pause)

	b := h.dial(t, auth)
	b.send(t, refEv("response.resume", id, ""))
	if again := b.recv(t); eventType(t, again) != "response.done" {
		t.Fatalf("resume sent %s", again)
	}
	a.send(t, appendEv(id, "", outputsFor(t, pause)...))
	a.wantError(t, "response_not_found")
	a.send(t, refEv("response.cancel", id, ""))
	a.wantError(t, "response_not_found")

	b.send(t, appendEv(id, "", outputsFor(t, pause)...))
	if end := last(b.next(t)); eventType(t, end) != "response.completed" {
		t.Fatalf("the rollout ended with %s", end)
	}
}
