package runtime_test

import (
	"encoding/json"
	"testing"

	"github.com/tether-run/tether/internal/schematest"
	"github.com/tether-run/tether/runtime"
)

// These tests do what the 17 cases of the Open Responses compliance suite do
// (research/peers-and-conformance.md §1.4), validating every event and every
// final response against the Open Responses OpenAPI schemas (schematest).

const redHeart = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAIAAAD8GO2jAAABmklEQVR42tyWAaTyUBzFew/eG4AHz+MBSAHKBiJRGFKwIgQQJKLUIioBIhCAiCAAEizAQIAECaASqFFJq84nudjnaqvuPnxzgP9xfrq5938csPn7PwHTKSoViCIEAYEAMhmoKsU2mUCWEQqB5xEMIp/HaGQG2G6RSuH9HQ7H34rFrtPbdz4jl6PbwmEsl3QA1mt4vcRKk8dz9eg6IpF7tt9fzGY0gCgafFRFo5Blc5vLhf3eCOj1yNhM5GRMVK0aATxPZoz09YXjkQDmczJgquGQAPp9WwCNBgG027YACgUC6HRsAZRKBDAY2AJoNv/ZnwzA6WScznG3p4UAymXGAEkyXrTFAh8fLAGqagQAyGaZpYsi7bHTNPz8MEj//LxuFPo+UBS8vb0KaLXubrRa7aX0RMLCykwmn0z3+XA4WACcTpCkh9MFAZpmuVXo+mO/w+/HZvNgbblcUCxaSo/Hyck80Yu6XXDcvfVZr79cvMZjuN2U9O9vKAqjZrfbIZ0mV4TUi9Xqz6jddNy//7+e3n8Fhf/Llo2kxi8AQyGRoDkmAhAAAAAASUVORK5CYII="

var weatherTool = map[string]any{
	"type": "function", "name": "get_weather", "description": "Get the current weather for a location",
	"parameters": map[string]any{
		"type":       "object",
		"properties": map[string]any{"location": map[string]any{"type": "string", "description": "The city and state, e.g. San Francisco, CA"}},
		"required":   []string{"location"},
	},
}

// checkResponse validates a final response and returns it decoded.
func checkResponse(t *testing.T, v *schematest.Validator, raw []byte, wantStatus string) map[string]any {
	t.Helper()
	if err := v.Response(raw); err != nil {
		t.Fatalf("response does not conform: %v\n%s", err, raw)
	}
	r := obj(t, raw)
	if wantStatus != "" && r["status"] != wantStatus {
		t.Fatalf("status %v, want %s: %s", r["status"], wantStatus, raw)
	}
	return r
}

func hasOutput(t *testing.T, r map[string]any, typ string) {
	t.Helper()
	out, _ := r["output"].([]any)
	if len(out) == 0 {
		t.Fatalf("response has no output")
	}
	if typ == "" {
		return
	}
	for _, it := range out {
		if it.(map[string]any)["type"] == typ {
			return
		}
	}
	t.Fatalf("no %s item in output %v", typ, out)
}

func TestConformanceHTTP(t *testing.T) {
	v := schematest.Load(t)
	h := newHarness(t, runtime.Options{})
	cases := []struct {
		id       string
		input    any
		tools    []any
		wantType string
	}{
		{id: "basic-response", input: []any{userMsg("Say hello in exactly 3 words.")}},
		{id: "system-prompt", input: []any{
			map[string]any{"type": "message", "role": "system", "content": "You are a pirate. Always respond in pirate speak."},
			userMsg("Say hello."),
		}},
		{id: "tool-calling", input: []any{userMsg("What's the weather like in San Francisco?")}, tools: []any{weatherTool}, wantType: "function_call"},
		{id: "image-input", input: []any{map[string]any{"type": "message", "role": "user", "content": []any{
			map[string]any{"type": "input_text", "text": "What do you see in this image? Answer in one sentence."},
			map[string]any{"type": "input_image", "image_url": redHeart},
		}}}},
		{id: "multi-turn", input: []any{
			userMsg("My name is Alice."),
			map[string]any{"type": "message", "role": "assistant", "content": "Hello Alice! Nice to meet you. How can I help you today?"},
			userMsg("What is my name?"),
		}},
		{id: "assistant-phase", input: []any{
			userMsg("Plan, then answer: what is 2+2?"),
			map[string]any{"type": "message", "role": "assistant", "phase": "commentary", "content": "Let me think about it."},
			map[string]any{"type": "message", "role": "assistant", "phase": "final_answer", "content": "4"},
			userMsg("And 3+3?"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			t.Parallel()
			body := map[string]any{"model": "tether-scripted", "input": tc.input, "stream": false}
			if tc.tools != nil {
				body["tools"] = tc.tools
			}
			status, raw := h.post(t, "/responses", body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, raw)
			}
			want := "completed"
			r := checkResponse(t, v, raw, want)
			hasOutput(t, r, tc.wantType)
		})
	}
	t.Run("response-output-phase-schema", func(t *testing.T) {
		t.Parallel()
		status, raw := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": "hi"})
		if status != 200 {
			t.Fatalf("status %d: %s", status, raw)
		}
		var r map[string]any
		json.Unmarshal(raw, &r)
		r["output"].([]any)[0].(map[string]any)["phase"] = "final_answer"
		withPhase, _ := json.Marshal(r)
		checkResponse(t, v, withPhase, "completed")
	})
	t.Run("streaming-response", func(t *testing.T) {
		t.Parallel()
		events := h.sse(t, map[string]any{"model": "tether-scripted", "input": []any{userMsg("Count from 1 to 5.")}})
		if len(events) == 0 {
			t.Fatal("no events")
		}
		for _, e := range events {
			if err := v.StreamEvent(e); err != nil {
				t.Fatalf("event does not conform: %v\n%s", err, e)
			}
		}
		checkResponse(t, v, terminalResponse(t, events[len(events)-1]), "completed")
	})
	t.Run("tool-calling-streaming", func(t *testing.T) {
		t.Parallel()
		events := h.sse(t, map[string]any{"model": "tether-scripted", "tools": []any{weatherTool},
			"input": []any{userMsg("What's the weather like in San Francisco?")}})
		seen := map[string]bool{}
		for _, e := range events {
			if err := v.StreamEvent(e); err != nil {
				t.Fatalf("event does not conform: %v\n%s", err, e)
			}
			m := obj(t, e)
			typ := m["type"].(string)
			if item, ok := m["item"].(map[string]any); ok {
				typ += ":" + item["type"].(string)
			}
			seen[typ] = true
		}
		for _, want := range []string{"response.output_item.added:function_call", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done:function_call"} {
			if !seen[want] {
				t.Errorf("missing %s", want)
			}
		}
	})
	t.Run("compact-response", func(t *testing.T) {
		t.Parallel()
		status, raw := h.post(t, "/responses/compact", map[string]any{"model": "tether-scripted", "prompt_cache_key": "k",
			"input": []any{userMsg("Create a landing page."), map[string]any{"type": "message", "role": "assistant", "content": "Done."}, userMsg("Thanks")}})
		if status != 200 {
			t.Fatalf("status %d: %s", status, raw)
		}
		if err := v.Compact(raw); err != nil {
			t.Fatalf("compact does not conform: %v\n%s", err, raw)
		}
		c := obj(t, raw)
		if c["object"] != "response.compaction" {
			t.Fatalf("object %v", c["object"])
		}
		hasOutput(t, c, "compaction")
	})
	t.Run("compact-missing-model", func(t *testing.T) {
		t.Parallel()
		status, raw := h.post(t, "/responses/compact", map[string]any{"input": []any{userMsg("hi")}})
		if status != 400 && status != 422 {
			t.Fatalf("status %d, want 400 or 422: %s", status, raw)
		}
	})
}

// wsTurn sends one create and validates every event it gets back.
func wsTurn(t *testing.T, v *schematest.Validator, c *wsConn, body map[string]any) [][]byte {
	t.Helper()
	c.send(t, create(body))
	events := c.untilTerminal(t)
	for _, e := range events {
		if err := v.WebSocketEvent(e); err != nil {
			t.Fatalf("event does not conform: %v\n%s", err, e)
		}
	}
	return events
}

func wsCompleted(t *testing.T, v *schematest.Validator, events [][]byte) map[string]any {
	t.Helper()
	last := events[len(events)-1]
	if eventType(t, last) != "response.completed" {
		t.Fatalf("turn ended with %s", last)
	}
	return checkResponse(t, v, terminalResponse(t, last), "completed")
}

func wsErrorCode(t *testing.T, events [][]byte) string {
	t.Helper()
	last := obj(t, events[len(events)-1])
	switch last["type"] {
	case "error":
		if _, ok := last["status"].(float64); !ok {
			t.Fatalf("error event without status: %v", last)
		}
		return last["error"].(map[string]any)["code"].(string)
	case "response.failed":
		return last["response"].(map[string]any)["error"].(map[string]any)["code"].(string)
	}
	t.Fatalf("turn did not fail: %v", last)
	return ""
}

// TestConformanceWebSocket runs the Open Responses WebSocket checks over
// every wire: WebSocket and WebTransport, JSON and msgpack.
func TestConformanceWebSocket(t *testing.T) {
	v := schematest.Load(t)
	forWires(t, func(t *testing.T, w wire) { conformanceWebSocket(t, v, w) })
}

func conformanceWebSocket(t *testing.T, v *schematest.Validator, w wire) {
	h := newHarnessOn(t, runtime.Options{}, w)
	model := "tether-scripted"

	t.Run("websocket-response", func(t *testing.T) {
		t.Parallel()
		c := h.dial(t, nil)
		r := wsCompleted(t, v, wsTurn(t, v, c, map[string]any{"model": model, "input": "Say hello."}))
		hasOutput(t, r, "message")
	})
	t.Run("websocket-sequential-responses", func(t *testing.T) {
		t.Parallel()
		c := h.dial(t, nil)
		for _, q := range []string{"First question.", "Second question."} {
			wsCompleted(t, v, wsTurn(t, v, c, map[string]any{"model": model, "store": false, "input": q}))
		}
	})
	t.Run("websocket-continuation", func(t *testing.T) {
		t.Parallel()
		c := h.dial(t, nil)
		r1 := wsCompleted(t, v, wsTurn(t, v, c, map[string]any{"model": model, "store": false, "input": "The code word is papaya."}))
		r2 := wsCompleted(t, v, wsTurn(t, v, c, map[string]any{"model": model, "store": false,
			"previous_response_id": r1["id"], "input": "What was the code word?"}))
		if r2["previous_response_id"] != r1["id"] {
			t.Fatalf("previous_response_id %v, want %v", r2["previous_response_id"], r1["id"])
		}
		u1 := r1["usage"].(map[string]any)
		u2 := r2["usage"].(map[string]any)
		if u2["input_tokens"].(float64) <= u1["input_tokens"].(float64)+u1["output_tokens"].(float64) {
			t.Fatalf("turn 2 did not see turn 1's context: usage %v then %v", u1, u2)
		}
	})
	t.Run("websocket-reconnect-store-false-recovery", func(t *testing.T) {
		t.Parallel()
		a := h.dial(t, nil)
		r1 := wsCompleted(t, v, wsTurn(t, v, a, map[string]any{"model": model, "store": false, "input": "Remember me."}))
		b := h.dial(t, nil)
		if code := wsErrorCode(t, wsTurn(t, v, b, map[string]any{"model": model, "store": false,
			"previous_response_id": r1["id"], "input": "Do you?"})); code != "previous_response_not_found" {
			t.Fatalf("code %s", code)
		}
		wsCompleted(t, v, wsTurn(t, v, b, map[string]any{"model": model, "store": false, "input": "Start over."}))
	})
	t.Run("websocket-previous-response-not-found", func(t *testing.T) {
		t.Parallel()
		c := h.dial(t, nil)
		if code := wsErrorCode(t, wsTurn(t, v, c, map[string]any{"model": model, "store": false,
			"previous_response_id": "resp_doesnotexist", "input": "hi"})); code != "previous_response_not_found" {
			t.Fatalf("code %s", code)
		}
	})
	t.Run("websocket-failed-continuation-evicts-cache", func(t *testing.T) {
		t.Parallel()
		c := h.dial(t, nil)
		r1 := wsCompleted(t, v, wsTurn(t, v, c, map[string]any{"model": model, "store": false, "input": "hi"}))
		wsErrorCode(t, wsTurn(t, v, c, map[string]any{"model": model, "store": false, "previous_response_id": r1["id"],
			"input": []any{map[string]any{"type": "function_call_output", "call_id": "call_nomatch", "output": "x"}}}))
		if code := wsErrorCode(t, wsTurn(t, v, c, map[string]any{"model": model, "store": false,
			"previous_response_id": r1["id"], "input": "again"})); code != "previous_response_not_found" {
			t.Fatalf("code %s", code)
		}
	})
	t.Run("websocket-compact-new-chain", func(t *testing.T) {
		t.Parallel()
		status, raw := h.post(t, "/responses/compact", map[string]any{"model": model,
			"input": []any{userMsg("one"), map[string]any{"type": "message", "role": "assistant", "content": "two"}, userMsg("three")}})
		if status != 200 {
			t.Fatalf("compact: %d %s", status, raw)
		}
		var compacted struct {
			Output []json.RawMessage `json:"output"`
		}
		json.Unmarshal(raw, &compacted)
		input := []any{}
		for _, it := range compacted.Output {
			input = append(input, json.RawMessage(it))
		}
		input = append(input, userMsg("four"))
		c := h.dial(t, nil)
		r := wsCompleted(t, v, wsTurn(t, v, c, map[string]any{"model": model, "store": false, "input": input}))
		hasOutput(t, r, "message")
	})
	t.Run("websocket-generate-false", func(t *testing.T) {
		t.Parallel()
		c := h.dial(t, nil)
		warm := wsCompleted(t, v, wsTurn(t, v, c, map[string]any{"model": model, "store": false, "generate": false,
			"instructions": "Be brief.", "tools": []any{weatherTool}, "input": "Context to prepare."}))
		if out := warm["output"].([]any); len(out) != 0 {
			t.Fatalf("warm-up produced output %v", out)
		}
		r := wsCompleted(t, v, wsTurn(t, v, c, map[string]any{"model": model, "store": false,
			"previous_response_id": warm["id"], "input": []any{}}))
		hasOutput(t, r, "")
	})
}
