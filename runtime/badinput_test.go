package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// These tests feed the server bad input: each bad frame or body gets an error
// with a code and a param, the connection stays open, the next valid request
// succeeds, and the connection cache loses nothing but what the spec evicts
// ("If a continuation turn fails with a 4xx or 5xx error, the server MUST
// evict the referenced previous_response_id"). The bi helpers here serve
// limits_test.go too.

const biModel = "tether-scripted"

// biEvent is the part of a server event these tests look at.
type biEvent struct {
	Type     string `json:"type"`
	Seq      *int   `json:"sequence_number"`
	StreamID string `json:"stream_id"`
	Status   int    `json:"status"` // error events
	Response *struct {
		ID                 string  `json:"id"`
		Status             string  `json:"status"`
		PreviousResponseID *string `json:"previous_response_id"`
	} `json:"response"`
	Error map[string]any `json:"error"`
	raw   []byte
}

func biDecode(t testing.TB, b []byte) biEvent {
	t.Helper()
	var ev biEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("event is not JSON: %v: %s", err, b)
	}
	ev.raw = b
	return ev
}

func (ev biEvent) terminal() bool {
	switch ev.Type {
	case "response.completed", "response.failed", "response.incomplete", "error":
		return true
	}
	return false
}

// biWant is the error a bad request must get.
type biWant struct {
	status int
	code   string
	param  string // "" means a null param
}

// biCheckError checks an error payload: type, code, message and param are all
// present, with the code and param wanted.
func biCheckError(t testing.TB, payload map[string]any, want biWant, raw []byte) {
	t.Helper()
	for _, k := range []string{"type", "code", "message", "param"} {
		if _, ok := payload[k]; !ok {
			t.Errorf("error has no %q: %s", k, raw)
		}
	}
	if typ, _ := payload["type"].(string); typ == "" {
		t.Errorf("error type is empty: %s", raw)
	}
	if msg, _ := payload["message"].(string); msg == "" {
		t.Errorf("error message is empty: %s", raw)
	}
	if code, _ := payload["code"].(string); code != want.code {
		t.Errorf("code %q, want %q: %s", code, want.code, raw)
	}
	switch p := payload["param"].(type) {
	case nil:
		if want.param != "" {
			t.Errorf("param null, want %q: %s", want.param, raw)
		}
	case string:
		if p != want.param {
			t.Errorf("param %q, want %q: %s", p, want.param, raw)
		}
	default:
		t.Errorf("param %v is neither a string nor null: %s", p, raw)
	}
}

// biCheckWSError checks a WebSocket error event.
func biCheckWSError(t testing.TB, ev biEvent, want biWant, streamID string) {
	t.Helper()
	if ev.Type != "error" {
		t.Fatalf("got %s, want an error event", ev.raw)
	}
	if ev.Status != want.status {
		t.Errorf("status %d, want %d: %s", ev.Status, want.status, ev.raw)
	}
	if ev.StreamID != streamID {
		t.Errorf("stream_id %q, want %q: %s", ev.StreamID, streamID, ev.raw)
	}
	biCheckError(t, ev.Error, want, ev.raw)
}

// biNext reads one event.
func biNext(t testing.TB, c *wsConn) biEvent {
	t.Helper()
	return biDecode(t, c.recv(t))
}

// biTurn reads one request's events, up to its terminal event or error.
func biTurn(t testing.TB, c *wsConn) []biEvent {
	t.Helper()
	var evs []biEvent
	for {
		ev := biNext(t, c)
		evs = append(evs, ev)
		if ev.terminal() {
			return evs
		}
	}
}

// biCompleted reads one turn and checks that it completed without an error
// on the way; it returns the response id.
func biCompleted(t testing.TB, c *wsConn, streamID string) string {
	t.Helper()
	evs := biTurn(t, c)
	last := evs[len(evs)-1]
	if last.Type != "response.completed" || last.Response == nil || last.Response.Status != "completed" {
		t.Fatalf("turn ended with %s", last.raw)
	}
	if evs[0].Type != "response.created" {
		t.Fatalf("turn began with %s", evs[0].raw)
	}
	for _, ev := range evs {
		if ev.StreamID != streamID {
			t.Fatalf("event on stream %q, want %q: %s", ev.StreamID, streamID, ev.raw)
		}
	}
	return last.Response.ID
}

// biCreate is a valid response.create frame on lane ("" is the default lane),
// continuing from prev when prev is set.
func biCreate(lane, prev, text string) map[string]any {
	f := create(map[string]any{"model": biModel, "store": false, "input": text})
	if lane != "" {
		f["stream_id"] = lane
	}
	if prev != "" {
		f["previous_response_id"] = prev
	}
	return f
}

// biWith returns a valid create on lane with fields overridden (nil deletes).
func biWith(lane, prev string, fields map[string]any) map[string]any {
	f := biCreate(lane, prev, "hello")
	for k, v := range fields {
		if v == nil {
			delete(f, k)
		} else {
			f[k] = v
		}
	}
	return f
}

// binaryFrameCode is the error a binary frame that is not msgpack gets:
// unsupported on a JSON connection, invalid msgpack on a msgpack one.
func binaryFrameCode() string {
	if testEncoding == protocol.EncodingMsgpack {
		return "invalid_json"
	}
	return "unsupported_frame_type"
}

func biSendBinary(t testing.TB, c *wsConn, b []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageBinary, b); err != nil {
		t.Fatal(err)
	}
}

// TestBadInputWebSocket sends each bad frame on a connection whose lane has a
// cached response, then checks the error, that the cached response is still
// there (or evicted, for a failed continuation of it), and that a valid
// create completes on the same connection. Every case runs on the default
// lane and on a named lane.
func TestBadInputWebSocket(t *testing.T) {
	h := newHarness(t, runtime.Options{})
	cases := []struct {
		name string
		// frame builds the bad frame for lane, whose cached response is prev.
		frame  func(lane, prev string) any
		binary bool
		want   biWant
		// noLane: the error cannot name the lane (the frame's stream_id is
		// unreadable or invalid), so it carries no stream_id.
		noLane bool
		// evicts: the frame is a failed continuation of prev, which must be evicted.
		evicts bool
	}{
		{name: "non-JSON", frame: func(string, string) any { return []byte("hello, server") },
			want: biWant{400, "invalid_json", ""}, noLane: true},
		{name: "truncated JSON", frame: func(string, string) any { return []byte(`{"type":"response.create","model":`) },
			want: biWant{400, "invalid_json", ""}, noLane: true},
		{name: "JSON array", frame: func(string, string) any { return []byte(`[{"type":"response.create"}]`) },
			want: biWant{400, "invalid_json", ""}, noLane: true},
		{name: "empty frame", frame: func(string, string) any { return []byte{} },
			want: biWant{400, "invalid_json", ""}, noLane: true},
		{name: "binary frame", binary: true, frame: func(lane, prev string) any { return biCreate(lane, prev, "hi") },
			want: biWant{400, binaryFrameCode(), ""}, noLane: true},
		{name: "unknown event type", frame: func(lane, _ string) any { return biWith(lane, "", map[string]any{"type": "response.frobnicate"}) },
			want: biWant{400, "unknown_event_type", "type"}},
		{name: "missing event type", frame: func(lane, _ string) any { return biWith(lane, "", map[string]any{"type": nil}) },
			want: biWant{400, "missing_required_parameter", "type"}},
		{name: "missing model", frame: func(lane, _ string) any { return biWith(lane, "", map[string]any{"model": nil}) },
			want: biWant{400, "missing_required_parameter", "model"}},
		{name: "unknown model", frame: func(lane, _ string) any { return biWith(lane, "", map[string]any{"model": "gpt-nonexistent"}) },
			want: biWant{404, "model_not_found", "model"}},
		{name: "model of wrong type", frame: func(lane, _ string) any { return biWith(lane, "", map[string]any{"model": 42}) },
			want: biWant{400, "invalid_type", "model"}},
		{name: "temperature out of range", frame: func(lane, _ string) any { return biWith(lane, "", map[string]any{"temperature": 3}) },
			want: biWant{400, "invalid_value", "temperature"}},
		{name: "background", frame: func(lane, _ string) any { return biWith(lane, "", map[string]any{"background": true}) },
			want: biWant{400, "unsupported_parameter", "background"}},
		{name: "input not a list", frame: func(lane, _ string) any { return biWith(lane, "", map[string]any{"input": 42}) },
			want: biWant{400, "invalid_type", "input"}},
		{name: "item not an object", frame: func(lane, _ string) any {
			return biWith(lane, "", map[string]any{"input": []any{userMsg("hi"), 7}})
		}, want: biWant{400, "invalid_type", "input[1]"}},
		{name: "unknown item type", frame: func(lane, _ string) any {
			return biWith(lane, "", map[string]any{"input": []any{map[string]any{"type": "telegram", "content": "hi"}}})
		}, want: biWant{400, "invalid_value", "input[0].type"}},
		{name: "unknown content type", frame: func(lane, _ string) any {
			return biWith(lane, "", map[string]any{"input": []any{map[string]any{"type": "message", "role": "user",
				"content": []any{map[string]any{"type": "input_hologram", "text": "hi"}}}}})
		}, want: biWant{400, "invalid_value", "input[0].content[0].type"}},
		{name: "content type wrong for role", frame: func(lane, _ string) any {
			return biWith(lane, "", map[string]any{"input": []any{userMsg("first"), map[string]any{"type": "message", "role": "user",
				"content": []any{map[string]any{"type": "input_text", "text": "a"}, map[string]any{"type": "output_text", "text": "b"}}}}})
		}, want: biWant{400, "invalid_value", "input[1].content[1].type"}},
		{name: "unknown role", frame: func(lane, _ string) any {
			return biWith(lane, "", map[string]any{"input": []any{map[string]any{"type": "message", "role": "robot", "content": "hi"}}})
		}, want: biWant{400, "invalid_value", "input[0].role"}},
		{name: "missing role", frame: func(lane, _ string) any {
			return biWith(lane, "", map[string]any{"input": []any{map[string]any{"type": "message", "content": "hi"}}})
		}, want: biWant{400, "missing_required_parameter", "input[0].role"}},
		{name: "function_call arguments not JSON", frame: func(lane, _ string) any {
			return biWith(lane, "", map[string]any{"input": []any{userMsg("hi"),
				map[string]any{"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{not json"}}})
		}, want: biWant{400, "invalid_value", "input[1].arguments"}},
		{name: "unknown previous_response_id", frame: func(lane, _ string) any {
			return biCreate(lane, "resp_doesnotexist", "hi")
		}, want: biWant{400, "previous_response_not_found", "previous_response_id"}},
		{name: "function_call_output matching nothing", frame: func(lane, _ string) any {
			return biWith(lane, "", map[string]any{"input": []any{map[string]any{"type": "function_call_output", "call_id": "call_nomatch", "output": "x"}}})
		}, want: biWant{400, "tool_call_not_found", "input[0].call_id"}},
		{name: "invalid stream_id", frame: func(_, _ string) any { return biWith("bad stream id!", "", nil) },
			want: biWant{400, "invalid_stream_id", "stream_id"}, noLane: true},
		{name: "empty stream_id", frame: func(_, _ string) any { return biWith("", "", map[string]any{"stream_id": ""}) },
			want: biWant{400, "invalid_stream_id", "stream_id"}, noLane: true},
		{name: "stream_id too long", frame: func(_, _ string) any { return biWith(strings.Repeat("a", 257), "", nil) },
			want: biWant{400, "invalid_stream_id", "stream_id"}, noLane: true},

		// Failed continuations of the lane's cached response: 4xx, so the
		// parent is evicted, whichever stage of validation refused the turn.
		{name: "continuation: function_call_output matching nothing", frame: func(lane, prev string) any {
			return biWith(lane, prev, map[string]any{"input": []any{map[string]any{"type": "function_call_output", "call_id": "call_nomatch", "output": "x"}}})
		}, want: biWant{400, "tool_call_not_found", "input[0].call_id"}, evicts: true},
		{name: "continuation: unknown model", frame: func(lane, prev string) any {
			return biWith(lane, prev, map[string]any{"model": "gpt-nonexistent"})
		}, want: biWant{404, "model_not_found", "model"}, evicts: true},
		{name: "continuation: missing model", frame: func(lane, prev string) any {
			return biWith(lane, prev, map[string]any{"model": nil})
		}, want: biWant{400, "missing_required_parameter", "model"}, evicts: true},
		{name: "continuation: unknown role", frame: func(lane, prev string) any {
			return biWith(lane, prev, map[string]any{"input": []any{map[string]any{"type": "message", "role": "robot", "content": "hi"}}})
		}, want: biWant{400, "invalid_value", "input[0].role"}, evicts: true},
		{name: "continuation: unknown content type", frame: func(lane, prev string) any {
			return biWith(lane, prev, map[string]any{"input": []any{map[string]any{"type": "message", "role": "user",
				"content": []any{map[string]any{"type": "input_hologram"}}}}})
		}, want: biWant{400, "invalid_value", "input[0].content[0].type"}, evicts: true},
		{name: "continuation: background", frame: func(lane, prev string) any {
			return biWith(lane, prev, map[string]any{"background": true})
		}, want: biWant{400, "unsupported_parameter", "background"}, evicts: true},
	}
	for _, lane := range []string{"", "agent.lane-1"} {
		laneName := "default lane"
		if lane != "" {
			laneName = "named lane"
		}
		t.Run(laneName, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					c := h.dial(t, nil)
					c.send(t, biCreate(lane, "", "The code word is papaya."))
					prev := biCompleted(t, c, lane)

					frame := tc.frame(lane, prev)
					if tc.binary {
						b, _ := json.Marshal(frame)
						biSendBinary(t, c, b)
					} else {
						c.send(t, frame)
					}
					wantLane := lane
					if tc.noLane {
						wantLane = ""
					}
					biCheckWSError(t, biNext(t, c), tc.want, wantLane)

					// The cached response survives, unless this was a failed
					// continuation of it.
					c.send(t, biCreate(lane, prev, "What was the code word?"))
					if tc.evicts {
						biCheckWSError(t, biNext(t, c), biWant{400, "previous_response_not_found", "previous_response_id"}, lane)
						c.send(t, biCreate(lane, "", "Starting over."))
					}
					biCompleted(t, c, lane)
				})
			}
		})
	}
}

// TestBadInputEvictionIsPerLane fails a continuation on lane a: a's cached
// response is evicted, b's and the default lane's are not.
func TestBadInputEvictionIsPerLane(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	c := h.dial(t, nil)
	ids := map[string]string{}
	for _, lane := range []string{"", "a", "b"} {
		c.send(t, biCreate(lane, "", "Remember lane "+lane))
		ids[lane] = biCompleted(t, c, lane)
	}
	c.send(t, biWith("a", ids["a"], map[string]any{"input": []any{
		map[string]any{"type": "function_call_output", "call_id": "call_nomatch", "output": "x"}}}))
	biCheckWSError(t, biNext(t, c), biWant{400, "tool_call_not_found", "input[0].call_id"}, "a")

	c.send(t, biCreate("a", ids["a"], "again"))
	biCheckWSError(t, biNext(t, c), biWant{400, "previous_response_not_found", "previous_response_id"}, "a")
	for _, lane := range []string{"b", ""} {
		c.send(t, biCreate(lane, ids[lane], "still there?"))
		biCompleted(t, c, lane)
	}
	// Lane a starts over.
	c.send(t, biCreate("a", "", "fresh start"))
	biCompleted(t, c, "a")
}

// TestBadInputTolerated sends what real clients send and OpenAI ignores:
// response.processed, the OpenAI-Beta header, client_metadata, stream: true
// and unknown top-level fields. None gets an error; every turn completes.
func TestBadInputTolerated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	c := h.dial(t, http.Header{"OpenAI-Beta": {"responses_websockets=2026-02-04"}})
	c.send(t, biCreate("", "", "hi"))
	prev := biCompleted(t, c, "")

	// response.processed gets no answer: the next frame answers the create.
	c.send(t, map[string]any{"type": "response.processed", "response_id": prev})
	c.send(t, biWith("", prev, map[string]any{
		"stream":                 true,
		"stream_options":         map[string]any{"include_obfuscation": false},
		"client_metadata":        map[string]any{"x-codex-turn": "1", "nested": map[string]any{"a": []any{1, 2}}},
		"x_unknown_field":        "ignored",
		"prompt_cache_retention": "24h",
	}))
	prev = biCompleted(t, c, "")
	c.send(t, map[string]any{"type": "response.processed", "response_id": prev})
	c.send(t, biCreate("", prev, "and again"))
	biCompleted(t, c, "")

	// Over HTTP, unknown fields are ignored too.
	status, raw := h.post(t, "/responses", map[string]any{"model": biModel, "input": "hi",
		"client_metadata": map[string]any{"k": "v"}, "x_unknown_field": 1})
	if status != 200 {
		t.Fatalf("status %d: %s", status, raw)
	}
}

// TestBadInputHTTP checks the HTTP equivalents: the standard error body
// {"error":{"type","code","message","param"}} with the right status.
func TestBadInputHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	cases := []struct {
		name   string
		method string
		path   string
		body   any // []byte is sent as is
		want   biWant
	}{
		{name: "non-JSON body", method: "POST", path: "/responses", body: []byte("hello, server"),
			want: biWant{400, "invalid_json", ""}},
		{name: "missing model", method: "POST", path: "/responses", body: map[string]any{"input": "hi"},
			want: biWant{400, "missing_required_parameter", "model"}},
		{name: "unknown model", method: "POST", path: "/responses", body: map[string]any{"model": "gpt-nonexistent", "input": "hi"},
			want: biWant{404, "model_not_found", "model"}},
		{name: "unknown content type", method: "POST", path: "/responses", body: map[string]any{"model": biModel,
			"input": []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_hologram"}}}}},
			want: biWant{400, "invalid_value", "input[0].content[0].type"}},
		{name: "unknown role", method: "POST", path: "/responses", body: map[string]any{"model": biModel,
			"input": []any{map[string]any{"type": "message", "role": "robot", "content": "hi"}}},
			want: biWant{400, "invalid_value", "input[0].role"}},
		{name: "unknown previous_response_id", method: "POST", path: "/responses",
			body: map[string]any{"model": biModel, "input": "hi", "previous_response_id": "resp_doesnotexist"},
			want: biWant{400, "previous_response_not_found", "previous_response_id"}},
		{name: "function_call_output matching nothing", method: "POST", path: "/responses", body: map[string]any{"model": biModel,
			"input": []any{map[string]any{"type": "function_call_output", "call_id": "call_nomatch", "output": "x"}}},
			want: biWant{400, "tool_call_not_found", "input[0].call_id"}},
		{name: "streaming unknown model", method: "POST", path: "/responses",
			body: map[string]any{"model": "gpt-nonexistent", "input": "hi", "stream": true},
			want: biWant{404, "model_not_found", "model"}},
		{name: "GET unknown id", method: "GET", path: "/responses/resp_doesnotexist",
			want: biWant{404, "response_not_found", "response_id"}},
		{name: "DELETE unknown id", method: "DELETE", path: "/responses/resp_doesnotexist",
			want: biWant{404, "response_not_found", "response_id"}},
		{name: "input_items of unknown id", method: "GET", path: "/responses/resp_doesnotexist/input_items",
			want: biWant{404, "response_not_found", "response_id"}},
		{name: "GET without Upgrade", method: "GET", path: "/responses",
			want: biWant{400, "invalid_value", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var body io.Reader
			if tc.body != nil {
				b, ok := tc.body.([]byte)
				if !ok {
					b, _ = json.Marshal(tc.body)
				}
				body = bytes.NewReader(b)
			}
			req, err := http.NewRequest(tc.method, h.base+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			status, raw := biDo(t, req)
			biCheckHTTPError(t, status, raw, tc.want)
		})
	}
	// The server is still serving.
	if status, raw := h.post(t, "/responses", map[string]any{"model": biModel, "input": "hi"}); status != 200 {
		t.Fatalf("status %d: %s", status, raw)
	}
}

func biDo(t testing.TB, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

func biCheckHTTPError(t testing.TB, status int, raw []byte, want biWant) {
	t.Helper()
	if status != want.status {
		t.Errorf("status %d, want %d: %s", status, want.status, raw)
	}
	var body struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || body.Error == nil {
		t.Fatalf("not an error body: %s", raw)
	}
	biCheckError(t, body.Error, want, raw)
}
