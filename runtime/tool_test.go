package runtime_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// sideOutputTool is a hosted tool in web_search's place whose result is a
// new item (a function_call_output for its call) rather than a finished
// copy of its call's item.
type sideOutputTool struct{}

func (sideOutputTool) Definition() protocol.Tool { return protocol.Tool{Type: protocol.ToolWebSearch} }

func (sideOutputTool) Call(ctx context.Context, call protocol.Call, emit func(protocol.Event)) (protocol.Item, error) {
	return &protocol.FunctionCallOutput{CallID: call.CallID, Output: protocol.ToolOutput{Text: "the secret word is papaya"}}, nil
}

// checkSideOutput checks a response of the sideOutputTool script: its
// web_search_call completed, and the model's answer, sampled after it,
// quotes the tool's output, which the scripted model only does when the
// output is in its context.
func checkSideOutput(t *testing.T, via string, resp []byte) {
	t.Helper()
	var r struct {
		Status string            `json:"status"`
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatalf("%s: %v: %s", via, err, resp)
	}
	if r.Status != "completed" {
		t.Fatalf("%s: status %q: %s", via, r.Status, resp)
	}
	var search, answer *itemKey
	for _, k := range itemKeys(t, r.Output) {
		switch k.Type {
		case "web_search_call":
			search = &k
		case "message":
			answer = &k
		}
	}
	if search == nil || answer == nil {
		t.Fatalf("%s: want a web_search_call and a message, got %s", via, resp)
	}
	if search.Status != "completed" {
		t.Errorf("%s: the web_search_call ended %q, want completed: its tool returned a result", via, search.Status)
	}
	if !strings.Contains(answer.Text, "papaya") {
		t.Errorf("%s: the tool's result did not reach the next step's context: the model answered %q", via, answer.Text)
	}
}

// TestToolResultJoinsContext: a hosted tool whose result is not its call's
// item (another item, here a function_call_output) still completes the call
// and its result joins the context the next sampling step reads. It guards
// against such a result being lost to the next step.
func TestToolResultJoinsContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t), HostedTools: []runtime.Tool{sideOutputTool{}}})
	input := script([][]dcall{{{"web_search", `{"query":"x"}`}}})

	t.Run("http", func(t *testing.T) {
		t.Parallel()
		status, resp := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "store": true, "tools": []any{webSearchTool}, "input": input})
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, resp)
		}
		checkSideOutput(t, "POST /v1/responses", resp)
		id := obj(t, resp)["id"].(string)
		status, stored := h.get(t, "/responses/"+id)
		if status != http.StatusOK {
			t.Fatalf("GET /v1/responses/%s: status %d: %s", id, status, stored)
		}
		checkSideOutput(t, "the stored response", stored)
	})
	t.Run("websocket", func(t *testing.T) {
		t.Parallel()
		c := h.dial(t, nil)
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "tools": []any{webSearchTool}, "input": input}))
		events := c.untilTerminal(t)
		if eventType(t, last(events)) != "response.completed" {
			t.Fatalf("ended with %s", last(events))
		}
		for _, raw := range events {
			e := decodeEv(t, raw)
			if e.Type != "response.output_item.done" {
				continue
			}
			if k := itemKeys(t, []json.RawMessage{e.Item})[0]; k.Type == "web_search_call" && k.Status != "completed" {
				t.Errorf("output_item.done of the web_search_call has status %q, want completed: %s", k.Status, raw)
			}
		}
		checkSideOutput(t, "WebSocket", terminalResponse(t, last(events)))
	})
}
