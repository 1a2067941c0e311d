package runtime_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tether-run/tether/internal/schematest"
	"github.com/tether-run/tether/runtime"
)

// fixture is a real OpenAI event stream (schematest.Recordings): the request
// that produced it (its "# request:" line) and its events.
type fixture struct {
	request map[string]any
	events  [][]byte
}

func loadFixture(t *testing.T, name string) fixture {
	t.Helper()
	var f fixture
	sc := bufio.NewScanner(bytes.NewReader(schematest.Recording(t, name)))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if rest, ok := bytes.CutPrefix(line, []byte("# request: ")); ok {
			if err := json.Unmarshal(rest, &f.request); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		f.events = append(f.events, append([]byte(nil), line...))
	}
	return f
}

// checkStreamInvariants asserts what holds of every well-formed stream:
// sequence numbers from 0 without gaps; created, in_progress, ..., one
// terminal event; deltas concatenating to their .done; content_part.done and
// output_item.done agreeing with them; the terminal output equal to the
// output_item.done items, in order.
func checkStreamInvariants(t *testing.T, events [][]byte) {
	t.Helper()
	if len(events) < 3 {
		t.Fatalf("only %d events", len(events))
	}
	deltas := map[string]*strings.Builder{}
	var doneItems []json.RawMessage
	for i, raw := range events {
		var e struct {
			Type        string          `json:"type"`
			Seq         *int            `json:"sequence_number"`
			ItemID      string          `json:"item_id"`
			OutputIndex int             `json:"output_index"`
			Delta       string          `json:"delta"`
			Text        *string         `json:"text"`
			Arguments   *string         `json:"arguments"`
			Item        json.RawMessage `json:"item"`
			Part        struct {
				Text string `json:"text"`
			} `json:"part"`
			Response struct {
				Output []json.RawMessage `json:"output"`
			} `json:"response"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		if e.Seq == nil {
			t.Fatalf("event %d (%s) has no sequence_number", i, e.Type)
		}
		if *e.Seq != i {
			t.Fatalf("event %d (%s) has sequence_number %d", i, e.Type, *e.Seq)
		}
		switch {
		case i == 0 && e.Type != "response.created", i == 1 && e.Type != "response.in_progress":
			t.Fatalf("event %d is %s", i, e.Type)
		}
		terminal := e.Type == "response.completed" || e.Type == "response.incomplete" || e.Type == "response.failed"
		if terminal != (i == len(events)-1) {
			t.Fatalf("event %d of %d is %s", i, len(events), e.Type)
		}
		key := e.ItemID
		switch e.Type {
		case "response.output_text.delta", "response.function_call_arguments.delta":
			if deltas[key] == nil {
				deltas[key] = &strings.Builder{}
			}
			deltas[key].WriteString(e.Delta)
		case "response.output_text.done", "response.function_call_arguments.done":
			done := e.Text
			if done == nil {
				done = e.Arguments
			}
			got := ""
			if deltas[key] != nil {
				got = deltas[key].String()
			}
			if done == nil || *done != got {
				t.Fatalf("%s of %s: deltas give %q, done says %v", e.Type, key, got, done)
			}
		case "response.content_part.done":
			if d := deltas[key]; d != nil && d.String() != e.Part.Text {
				t.Fatalf("content_part.done text %q, deltas %q", e.Part.Text, d.String())
			}
		case "response.output_item.done":
			if e.OutputIndex != len(doneItems) {
				t.Fatalf("output_item.done output_index %d, want %d", e.OutputIndex, len(doneItems))
			}
			doneItems = append(doneItems, e.Item)
		}
		if terminal {
			if len(e.Response.Output) != len(doneItems) {
				t.Fatalf("terminal output has %d items, output_item.done gave %d", len(e.Response.Output), len(doneItems))
			}
			for j := range doneItems {
				if !jsonEqual(t, doneItems[j], e.Response.Output[j]) {
					t.Fatalf("terminal output[%d] = %s, output_item.done gave %s", j, e.Response.Output[j], doneItems[j])
				}
			}
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// shape is a stream's event types, with reasoning items left out (the
// scripted model does not reason) and each run of deltas collapsed to one
// (token counts differ from model to model).
func shape(t *testing.T, events [][]byte) []string {
	t.Helper()
	var out []string
	reasoning := map[string]bool{}
	for _, raw := range events {
		m := obj(t, raw)
		typ := m["type"].(string)
		if item, ok := m["item"].(map[string]any); ok {
			if item["type"] == "reasoning" {
				reasoning[item["id"].(string)] = true
				continue
			}
			typ += "(" + item["type"].(string) + ")"
		}
		if id, ok := m["item_id"].(string); ok && reasoning[id] {
			continue
		}
		if strings.HasSuffix(typ, ".delta") && len(out) > 0 && out[len(out)-1] == typ {
			continue
		}
		out = append(out, typ)
	}
	return out
}

// keysByKind maps each event kind (type, plus item type) to its field names,
// and the same for the response object and items inside events.
func keysByKind(t *testing.T, events [][]byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(kind string, m map[string]any) {
		keys := make([]string, 0, len(m))
		for k := range m {
			if k == "obfuscation" { // optional SSE padding
				continue
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out[kind] = keys
	}
	for _, raw := range events {
		m := obj(t, raw)
		kind := m["type"].(string)
		if item, ok := m["item"].(map[string]any); ok {
			kind += "(" + item["type"].(string) + ")"
			status, _ := item["status"].(string)
			add("item:"+item["type"].(string)+":"+status, item)
		}
		if r, ok := m["response"].(map[string]any); ok {
			add("response:"+kind, r)
		}
		add(kind, m)
	}
	return out
}

// TestGoldenStreams reproduces the real OpenAI streams schematest records:
// the same request gives the same event order (reasoning aside) and every
// field OpenAI sent, over SSE and over every connection wire (WebSocket and
// WebTransport, JSON and msgpack).
func TestGoldenStreams(t *testing.T) {
	t.Run("sse", func(t *testing.T) { goldenStreams(t, newHarness(t, runtime.Options{}), "sse") })
	forWires(t, func(t *testing.T, w wire) { goldenStreams(t, newHarnessOn(t, runtime.Options{}, w), "ws") })
}

func goldenStreams(t *testing.T, h *harness, transport string) {
	call := loadFixture(t, "openai-recorded-function-call-stream.jsonl")
	followup := loadFixture(t, "openai-recorded-fco-followup-stream.jsonl")
	text := loadFixture(t, "openai-recorded-text-stream.jsonl")

	ours := func(t *testing.T, transport string, req map[string]any) [][]byte {
		t.Helper()
		body := map[string]any{}
		for k, v := range req {
			body[k] = v
		}
		body["model"] = "tether-scripted"
		if transport == "sse" {
			return h.sse(t, body)
		}
		delete(body, "stream")
		c := h.dial(t, nil)
		c.send(t, create(body))
		return c.untilTerminal(t)
	}
	compare := func(t *testing.T, want fixture, got [][]byte) {
		t.Helper()
		checkStreamInvariants(t, want.events) // the checker accepts OpenAI's own stream
		checkStreamInvariants(t, got)
		if w, g := shape(t, want.events), shape(t, got); !slices.Equal(w, g) {
			t.Fatalf("event order differs:\nopenai: %v\ntether: %v", w, g)
		}
		wk, gk := keysByKind(t, want.events), keysByKind(t, got)
		for kind, keys := range wk {
			if strings.Contains(kind, "reasoning") {
				continue
			}
			have, ok := gk[kind]
			if !ok {
				t.Errorf("tether sent no %s", kind)
				continue
			}
			for _, k := range keys {
				if !slices.Contains(have, k) {
					t.Errorf("%s lacks field %q that OpenAI sends", kind, k)
				}
			}
		}
	}
	t.Run("text", func(t *testing.T) { compare(t, text, ours(t, transport, text.request)) })
	t.Run("function-call-and-output", func(t *testing.T) {
		first := ours(t, transport, call.request)
		compare(t, call, first)
		resp := obj(t, terminalResponse(t, first[len(first)-1]))
		fc := resp["output"].([]any)[0].(map[string]any)
		req := map[string]any{}
		for k, v := range followup.request {
			req[k] = v
		}
		req["previous_response_id"] = resp["id"]
		req["input"] = []any{map[string]any{"type": "function_call_output", "call_id": fc["call_id"],
			"output": followup.request["input"].([]any)[0].(map[string]any)["output"]}}
		if transport == "ws" {
			// store: true makes the first turn loadable on the new connection.
			req["store"] = true
		}
		compare(t, followup, ours(t, transport, req))
	})
}
