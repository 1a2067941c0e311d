package runtime_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// A replay calls its trace's tools whatever a request offers.
var _ runtime.FixedToolSampler = (*sampler.Replay)(nil)

// replayHarness serves tether-scripted and the embedded traces as
// replay:NAME, unpaced.
func replayHarness(t *testing.T) *harness {
	t.Helper()
	traces, err := sampler.LoadTraces()
	if err != nil {
		t.Fatal(err)
	}
	r := renderer(t)
	models := map[string]runtime.Sampler{sampler.ScriptedModel: sampler.NewScripted(r, sampler.Timing{})}
	for _, tr := range traces {
		models[sampler.ReplayPrefix+tr.Name] = sampler.NewReplay(r, sampler.Timing{}, tr)
	}
	return newHarness(t, runtime.Options{Models: models, Renderer: r})
}

func functionTool(name string) map[string]any {
	return map[string]any{"type": "function", "name": name, "parameters": map[string]any{"type": "object"}}
}

// TestReplayToolsNotOffered: a replay model calls its trace's tools
// (list_dir, shell, read_file, grep, apply_patch) whatever a request
// offers, so a request that does not offer them all as function tools is
// refused before anything starts, naming the missing ones: a 400 over
// HTTP (JSON, SSE, Chat Completions), an error event on a WebSocket, which
// stays usable. A custom tool or a namespace's member of the same name is
// not the function the replay calls. Offering them all, or tool_choice
// "none" (the replay only answers), is accepted.
func TestReplayToolsNotOffered(t *testing.T) {
	t.Parallel()
	h := replayHarness(t)
	const model = "replay:calc-fix-12"
	partial := []any{functionTool("list_dir"), functionTool("grep"), functionTool("apply_patch"),
		map[string]any{"type": "custom", "name": "read_file"},
		map[string]any{"type": "namespace", "name": "sh", "description": "Shell.", "tools": []any{functionTool("shell")}}}
	const want = "Model 'replay:calc-fix-12' replays a rollout that calls list_dir, shell, read_file, grep and apply_patch; the request does not offer shell and read_file"
	checkRefusal := func(t *testing.T, status int, code, param, message string) {
		t.Helper()
		if status != 400 || code != "tool_not_offered" || param != "tools" || !strings.HasPrefix(message, want) || !strings.Contains(message, "tether-scripted") {
			t.Fatalf("got %d %s (%s): %q, want 400 tool_not_offered (tools): %q…", status, code, param, message, want)
		}
	}
	httpError := func(t *testing.T, status int, body []byte) {
		t.Helper()
		code, param, message := errorOf(t, body)
		checkRefusal(t, status, code, param, message)
	}

	t.Run("http", func(t *testing.T) {
		t.Parallel()
		for _, tools := range [][]any{nil, partial} {
			status, body := h.post(t, "/responses", map[string]any{"model": model, "input": "Fix the build.", "tools": tools})
			if tools == nil {
				if code, _, message := errorOf(t, body); status != 400 || code != "tool_not_offered" ||
					!strings.Contains(message, "the request does not offer list_dir, shell, read_file, grep and apply_patch (") {
					t.Fatalf("no tools: %d %s", status, body)
				}
				continue
			}
			httpError(t, status, body)
		}
		status, body := h.post(t, "/responses", map[string]any{"model": model, "input": "Fix the build.", "tools": partial, "stream": true})
		httpError(t, status, body)
		status, body = h.post(t, "/chat/completions", map[string]any{"model": model,
			"messages": []any{map[string]any{"role": "user", "content": "Fix the build."}},
			"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": "list_dir"}}}})
		if code, _, message := errorOf(t, body); status != 400 || code != "tool_not_offered" ||
			!strings.Contains(message, "the request does not offer shell, read_file, grep and apply_patch (") {
			t.Fatalf("chat completions: %d %s", status, body)
		}

		// Accepted: every tool offered (the first step's calls stay open
		// for the client), or tool_choice "none".
		var all []any
		for _, name := range []string{"shell", "apply_patch", "grep", "read_file", "list_dir"} {
			all = append(all, functionTool(name))
		}
		status, body = h.post(t, "/responses", map[string]any{"model": model, "input": "Fix the build.", "tools": all})
		if r := obj(t, body); status != 200 || r["status"] != "completed" || !strings.Contains(string(body), `"function_call"`) {
			t.Fatalf("every tool offered: %d %s", status, body)
		}
		// Offered, but tool_choice lets the model call only some.
		for _, choice := range []any{
			map[string]any{"type": "allowed_tools", "mode": "auto", "tools": []any{map[string]any{"type": "function", "name": "grep"}}},
			map[string]any{"type": "function", "name": "grep"},
		} {
			status, body = h.post(t, "/responses", map[string]any{"model": model, "input": "Fix the build.", "tools": all, "tool_choice": choice})
			if code, _, message := errorOf(t, body); status != 400 || code != "tool_not_offered" ||
				!strings.Contains(message, "the request does not offer list_dir, shell, read_file and apply_patch (or its tool_choice") {
				t.Fatalf("tool_choice %v: %d %s", choice, status, body)
			}
		}
		status, body = h.post(t, "/responses", map[string]any{"model": model, "input": "Fix the build.", "tool_choice": "none"})
		if r := obj(t, body); status != 200 || r["status"] != "completed" || strings.Contains(string(body), `"function_call"`) {
			t.Fatalf("tool_choice none: %d %s", status, body)
		}
	})

	t.Run("websocket", func(t *testing.T) {
		t.Parallel()
		c := h.dial(t, nil)
		for _, suspend := range []bool{false, true} {
			c.send(t, create(map[string]any{"model": model, "store": false, "suspend": suspend, "input": "Fix the build.", "tools": partial}))
			b := c.recv(t)
			var e struct {
				Type   string `json:"type"`
				Status int    `json:"status"`
				Error  struct {
					Code, Param, Message string
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" {
				t.Fatalf("suspend %v: got %s, want an error event", suspend, b)
			}
			checkRefusal(t, e.Status, e.Error.Code, e.Error.Param, e.Error.Message)
		}
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "hi"}))
		if evs := c.untilTerminal(t); eventType(t, evs[len(evs)-1]) != "response.completed" {
			t.Fatalf("after the refusals: %s", evs[len(evs)-1])
		}
	})
}

// errorOf is the code, param and message of an HTTP error body; empty
// when the body is not one.
func errorOf(t *testing.T, body []byte) (code, param, message string) {
	t.Helper()
	var b struct {
		Error struct{ Code, Param, Message string } `json:"error"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
	return b.Error.Code, b.Error.Param, b.Error.Message
}
