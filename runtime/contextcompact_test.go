package runtime_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tether-run/tether/runtime"
)

// longOutput is a tool output of about n tokens.
func longOutput(n int) string { return strings.Repeat("lorem ", n) }

// compactRun is what one run of the long rollout showed.
type compactRun struct {
	calls       []string // the calls made, in order
	compactions int      // compaction output items
	compacting  int      // response.compaction.compacting events
	inputTokens int      // usage.input_tokens over the rollout
	answer      string
}

// TestContextCompaction: a long rollout whose tool outputs push its context
// past compact_threshold compacts (a compaction output item, created_by
// context_management, announced by response.compaction.compacting) and goes
// on: every scripted step runs in order and the answer comes, in a
// suspended rollout (one response), in cached-state turns on a WebSocket
// and in chained turns over HTTP (the store); and it reads fewer tokens
// than the same rollout without compaction.
func TestContextCompaction(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	const steps = 6
	var script strings.Builder
	script.WriteString("Fix the build.\n")
	for i := range steps {
		fmt.Fprintf(&script, "call: read_file {\"path\":\"f%d.go\"}\n", i)
	}
	tools := []any{map[string]any{"type": "function", "name": "read_file", "parameters": map[string]any{"type": "object"}}}
	body := func(cm bool) map[string]any {
		b := map[string]any{"model": "tether-scripted", "tools": tools, "input": script.String()}
		if cm {
			b["context_management"] = []any{map[string]any{"type": "compaction", "compact_threshold": 1000}}
		}
		return b
	}
	read := func(run *compactRun, events [][]byte) {
		for _, raw := range events {
			var e struct {
				Type string          `json:"type"`
				Item json.RawMessage `json:"item"`
			}
			json.Unmarshal(raw, &e)
			switch e.Type {
			case "response.compaction.compacting":
				run.compacting++
			case "response.output_item.done":
				var it struct{ Type, Name, Arguments, CreatedBy string }
				json.Unmarshal(e.Item, &it)
				var cb struct {
					CreatedBy string `json:"created_by"`
				}
				json.Unmarshal(e.Item, &cb)
				switch it.Type {
				case "function_call":
					run.calls = append(run.calls, it.Arguments)
				case "compaction":
					if cb.CreatedBy != "context_management" {
						t.Errorf("a compaction item made by %q", cb.CreatedBy)
					}
					run.compactions++
				case "message":
					run.answer = string(e.Item)
				}
			}
		}
	}
	want := func(name string, run, plain compactRun) {
		t.Helper()
		if len(run.calls) != steps || run.answer == "" || !strings.Contains(run.answer, "read_file returned") {
			t.Fatalf("%s: %d calls %q, answer %s: it did not go on to the end", name, len(run.calls), run.calls, run.answer)
		}
		for i, c := range run.calls {
			if !strings.Contains(c, fmt.Sprintf("f%d.go", i)) {
				t.Errorf("%s: call %d %s, want f%d.go", name, i, c, i)
			}
		}
		if run.compactions < 2 || run.compacting != run.compactions || plain.compactions != 0 {
			t.Errorf("%s: %d compactions (%d announced), %d without context_management", name, run.compactions, run.compacting, plain.compactions)
		}
		if run.inputTokens*2 > plain.inputTokens {
			t.Errorf("%s: %d input tokens with compaction, %d without: want well under half", name, run.inputTokens, plain.inputTokens)
		}
		t.Logf("%s: %d compactions; %d input tokens, %d without", name, run.compactions, run.inputTokens, plain.inputTokens)
	}
	usageOf := func(raw []byte) int {
		var e struct {
			Response struct {
				Usage struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
			} `json:"response"`
		}
		json.Unmarshal(raw, &e)
		return e.Response.Usage.InputTokens
	}

	// One suspended rollout.
	suspended := func(cm bool) compactRun {
		var run compactRun
		c := h.dial(t, nil)
		b := body(cm)
		b["suspend"] = true
		c.send(t, create(b))
		for {
			evs := c.next(t)
			read(&run, evs)
			end := last(evs)
			if eventType(t, end) != "response.done" {
				if eventType(t, end) != "response.completed" {
					t.Fatalf("suspended: %s", end)
				}
				run.inputTokens = usageOf(end)
				return run
			}
			var outs []any
			for _, o := range outputsFor(t, end) {
				m := o.(map[string]any)
				m["output"] = longOutput(400)
				outs = append(outs, m)
			}
			c.send(t, appendEv(respID(t, end), "", outs...))
		}
	}
	want("suspended", suspended(true), suspended(false))

	// Turns: on a WebSocket (the cache) and over HTTP (the store).
	turns := func(cm, ws bool) compactRun {
		var run compactRun
		var c *wsConn
		if ws {
			c = h.dial(t, nil)
		}
		b := body(cm)
		for {
			var events [][]byte
			if ws {
				c.send(t, create(b))
				events = c.untilTerminal(t)
			} else {
				b["stream"] = true
				events = h.sse(t, b)
			}
			read(&run, events)
			end := last(events)
			if eventType(t, end) != "response.completed" {
				t.Fatalf("turn: %s", end)
			}
			run.inputTokens += usageOf(end)
			var e struct {
				Response struct {
					ID     string `json:"id"`
					Output []struct {
						Type   string `json:"type"`
						CallID string `json:"call_id"`
					} `json:"output"`
				} `json:"response"`
			}
			json.Unmarshal(end, &e)
			var outs []any
			for _, o := range e.Response.Output {
				if o.Type == "function_call" {
					outs = append(outs, fco(o.CallID, longOutput(400)))
				}
			}
			if len(outs) == 0 {
				return run
			}
			b = body(cm)
			b["previous_response_id"], b["input"] = e.Response.ID, outs
		}
	}
	want("websocket turns", turns(true, true), turns(false, true))
	want("http turns", turns(true, false), turns(false, false))

	for _, tc := range []struct {
		cm    any
		code  string
		param string
	}{
		{[]any{map[string]any{"type": "truncation", "compact_threshold": 1000}}, "invalid_value", "context_management[0].type"},
		{[]any{map[string]any{"type": "compaction"}}, "missing_required_parameter", "context_management[0].compact_threshold"},
		{[]any{map[string]any{"type": "compaction", "compact_threshold": 10}}, "invalid_value", "context_management[0].compact_threshold"},
	} {
		code, b := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": "x", "context_management": tc.cm})
		var e struct {
			Error struct{ Code, Param string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		if code != 400 || e.Error.Code != tc.code || e.Error.Param != tc.param {
			t.Errorf("%v: %d %s, want %s (%s)", tc.cm, code, b, tc.code, tc.param)
		}
	}
}
