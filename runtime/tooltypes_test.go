package runtime_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tether-run/tether/runtime"
)

// codexTools is the tool list the Codex CLI sends (plain functions, the
// multi_agent_v1 namespace, a freeform apply_patch with a Lark grammar,
// client-side tool search and web_search), cut down.
func codexTools() []any {
	var tools []any
	json.Unmarshal([]byte(`[
		{"type":"function","name":"exec_command","description":"Run a command.","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]},"strict":false},
		{"type":"namespace","name":"multi_agent_v1","description":"Tools in the multi_agent_v1 namespace.","tools":[
			{"type":"function","name":"spawn_agent","parameters":{"type":"object","properties":{"message":{"type":"string"}}}},
			{"type":"function","name":"wait_agent","parameters":{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"}}}}}]},
		{"type":"custom","name":"apply_patch","description":"Edit files.","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch hunk+ end_patch"}},
		{"type":"tool_search","execution":"client","description":"Find deferred tools.","parameters":{"type":"object"}},
		{"type":"web_search","external_web_access":false}]`), &tools)
	return tools
}

// TestNamespacedCallSuspended: a call of a namespace's member parks a
// suspended rollout with its namespace beside its name, in the call item
// and in the pause's pending calls, and its output resumes it.
func TestNamespacedCallSuspended(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{HostedTools: []runtime.Tool{searchTool()}})
	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "tools": codexTools(),
		"input": `call: multi_agent_v1.wait_agent {"ids":["agent_1"]}`}))
	ev := untilPause(t, c)
	done := ev[len(ev)-1]
	calls := pendingCalls(t, done)
	if len(calls) != 1 || calls[0]["name"] != "wait_agent" || calls[0]["namespace"] != "multi_agent_v1" {
		t.Fatalf("pending calls %v, want wait_agent in multi_agent_v1", calls)
	}
	var item map[string]any
	for _, b := range ev {
		if eventType(t, b) == "response.output_item.done" {
			item = obj(t, b)["item"].(map[string]any)
		}
	}
	if item["type"] != "function_call" || item["name"] != "wait_agent" || item["namespace"] != "multi_agent_v1" {
		t.Fatalf("call item %v", item)
	}
	out := fco(calls[0]["call_id"].(string), "agent_1 finished")
	out["namespace"] = "multi_agent_v1"
	c.send(t, appendEv(respID(t, done), "", out))
	end := untilPause(t, c)
	if last := end[len(end)-1]; eventType(t, last) != "response.completed" {
		t.Fatalf("after the output: %s", last)
	}
	checkStreamInvariants(t, append(ev, end...))
}

// TestNamespacedCallTurns: in cached-state turns the namespaced call ends
// the response with the call open; the output continues it.
func TestNamespacedCallTurns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{HostedTools: []runtime.Tool{searchTool()}})
	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "tools": codexTools(),
		"input": `call: multi_agent_v1.spawn_agent {"message":"hi"}`}))
	evs := c.untilTerminal(t)
	r := obj(t, terminalResponse(t, evs[len(evs)-1]))
	if r["status"] != "completed" {
		t.Fatalf("status %v", r["status"])
	}
	fc := r["output"].([]any)[0].(map[string]any)
	if fc["type"] != "function_call" || fc["name"] != "spawn_agent" || fc["namespace"] != "multi_agent_v1" {
		t.Fatalf("output %v", r["output"])
	}
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "tools": codexTools(), "previous_response_id": r["id"],
		"input": []any{map[string]any{"type": "function_call_output", "call_id": fc["call_id"], "namespace": "multi_agent_v1", "output": "agent_1"}}}))
	evs = c.untilTerminal(t)
	if r := obj(t, terminalResponse(t, evs[len(evs)-1])); r["status"] != "completed" || r["output"].([]any)[0].(map[string]any)["type"] != "message" {
		t.Fatalf("continuation: %v", r)
	}
}

// TestHostedToolNotAvailable: a hosted type tether does not run is refused
// with one code and the tool's param, and the connection stays usable.
func TestHostedToolNotAvailable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	c := h.dial(t, nil)
	for _, tool := range []map[string]any{
		{"type": "file_search", "vector_store_ids": []string{"vs_1"}},
		{"type": "web_search"}, // no search backend in this server
		{"type": "shell", "environment": map[string]any{"type": "container_auto"}},
	} {
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "hi",
			"tools": []any{map[string]any{"type": "function", "name": "f"}, tool}}))
		e := decodeEv(t, c.recv(t))
		if e.Type != "error" || e.Error.Code != "tool_not_available" || e.Error.Param != "tools[1].type" {
			t.Fatalf("%v: got %+v", tool["type"], e.Error)
		}
	}
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "hi"}))
	if evs := c.untilTerminal(t); eventType(t, evs[len(evs)-1]) != "response.completed" {
		t.Fatalf("after the refusals: %s", evs[len(evs)-1])
	}
}

// patch is a custom apply_patch input, as a scripted directive carries it
// (a JSON string: line breaks and all).
const patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch"

func patchDirective() string {
	b, _ := json.Marshal(patch)
	return "call: apply_patch " + string(b)
}

// TestCustomCallSuspended: a custom tool's call streams its input as
// custom_tool_call_input events, parks the rollout with the call's type and
// input in the pause, refuses an output of the wrong type (the connection
// stays usable), and resumes on a custom_tool_call_output.
func TestCustomCallSuspended(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{HostedTools: []runtime.Tool{searchTool()}})
	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "tools": codexTools(),
		"input": patchDirective()}))
	ev := untilPause(t, c)
	done := ev[len(ev)-1]
	calls := pendingCalls(t, done)
	if len(calls) != 1 || calls[0]["type"] != "custom_tool_call" || calls[0]["name"] != "apply_patch" || calls[0]["input"] != patch {
		t.Fatalf("pending calls %v", calls)
	}
	var deltas strings.Builder
	var item map[string]any
	var inputDone string
	for _, b := range ev {
		switch m := obj(t, b); m["type"] {
		case "response.custom_tool_call_input.delta":
			deltas.WriteString(m["delta"].(string))
		case "response.custom_tool_call_input.done":
			inputDone = m["input"].(string)
		case "response.output_item.done":
			item = m["item"].(map[string]any)
		case "response.function_call_arguments.delta":
			t.Fatalf("a custom call streamed function arguments: %s", b)
		}
	}
	if deltas.String() != patch || inputDone != patch || item["type"] != "custom_tool_call" || item["input"] != patch {
		t.Fatalf("deltas %q, done %q, item %v", deltas.String(), inputDone, item)
	}
	id, callID := respID(t, done), calls[0]["call_id"].(string)
	c.send(t, appendEv(id, "", fco(callID, "wrong type")))
	e := decodeEv(t, c.recv(t))
	if e.Type != "error" || e.Error.Code != "tool_output_type_mismatch" || e.Error.Param != "input[0].type" {
		t.Fatalf("a function_call_output for a custom call: %+v", e.Error)
	}
	c.send(t, appendEv(id, "", map[string]any{"type": "custom_tool_call_output", "call_id": callID, "output": "Done!"}))
	end := untilPause(t, c)
	last := obj(t, terminalResponse(t, end[len(end)-1]))
	if last["status"] != "completed" {
		t.Fatalf("after the output: %v", last)
	}
	out := last["output"].([]any)
	if msg := out[len(out)-1].(map[string]any); !strings.Contains(mustText(t, msg), "apply_patch returned: Done!") {
		t.Fatalf("answer %v", msg)
	}
	checkStreamInvariants(t, append(ev, end...))
}

// TestCustomCallTurns: in cached-state turns a custom call ends the
// response; the continuation takes a custom_tool_call_output and refuses a
// function_call_output for it.
func TestCustomCallTurns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{HostedTools: []runtime.Tool{searchTool()}})
	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "tools": codexTools(), "input": patchDirective()}))
	evs := c.untilTerminal(t)
	r := obj(t, terminalResponse(t, evs[len(evs)-1]))
	call := r["output"].([]any)[0].(map[string]any)
	if call["type"] != "custom_tool_call" || call["input"] != patch {
		t.Fatalf("output %v", r["output"])
	}
	cont := func(out map[string]any) map[string]any {
		return create(map[string]any{"model": "tether-scripted", "store": false, "tools": codexTools(), "previous_response_id": r["id"], "input": []any{out}})
	}
	c.send(t, cont(fco(call["call_id"].(string), "wrong type")))
	if e := decodeEv(t, c.recv(t)); e.Type != "error" || e.Error.Code != "tool_output_type_mismatch" || e.Error.Param != "input[0].type" {
		t.Fatalf("a function_call_output for a custom call: %+v", e.Error)
	}
	// The refusal evicted the cached response: continue from the store's
	// absence by sending the call again with its output.
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "tools": codexTools(), "input": []any{
		call, map[string]any{"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "Done!"}}}))
	evs = c.untilTerminal(t)
	if r := obj(t, terminalResponse(t, evs[len(evs)-1])); r["status"] != "completed" || !strings.Contains(mustText(t, r["output"].([]any)[0].(map[string]any)), "apply_patch returned: Done!") {
		t.Fatalf("continuation: %v", r)
	}
}

// mustText is the text of a message item.
func mustText(t *testing.T, msg map[string]any) string {
	t.Helper()
	content, _ := msg["content"].([]any)
	if msg["type"] != "message" || len(content) == 0 {
		t.Fatalf("not a message with content: %v", msg)
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text
}

// TestForcedToolChoice: a tool_choice that forces a built-in or custom
// tool makes the scripted model call it, and one that names a tool the
// request does not offer is refused at tool_choice.
func TestForcedToolChoice(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{HostedTools: []runtime.Tool{searchTool()}})
	c := h.dial(t, nil)
	for choice, want := range map[string]string{
		`{"type":"web_search_preview"}`:             "web_search_call",
		`{"type":"custom","name":"apply_patch"}`:    "custom_tool_call",
		`{"type":"function","name":"exec_command"}`: "function_call",
	} {
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "tools": codexTools(),
			"tool_choice": json.RawMessage(choice), "input": "go vet ./..."}))
		evs := c.untilTerminal(t)
		r := obj(t, terminalResponse(t, evs[len(evs)-1]))
		if got := r["output"].([]any)[0].(map[string]any)["type"]; got != want {
			t.Errorf("tool_choice %s: first output item %v, want %s", choice, got, want)
		}
	}
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "tools": codexTools(),
		"tool_choice": map[string]any{"type": "apply_patch"}, "input": "hi"}))
	if e := decodeEv(t, c.recv(t)); e.Type != "error" || e.Error.Code != "invalid_value" || e.Error.Param != "tool_choice" {
		t.Fatalf("apply_patch forced but not offered (only a custom tool of that name): %+v", e.Error)
	}
}

// TestSerialToolCalls: with parallel_tool_calls false, a scripted step of
// two calls becomes two turns of one call each.
func TestSerialToolCalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	c := h.dial(t, nil)
	tools := []any{map[string]any{"type": "function", "name": "a"}, map[string]any{"type": "function", "name": "b"}}
	var input any = "call: a {} | b {}"
	prev := ""
	var calls []string
	for turn := 0; turn < 4; turn++ {
		body := map[string]any{"model": "tether-scripted", "store": false, "tools": tools, "parallel_tool_calls": false, "input": input}
		if prev != "" {
			body["previous_response_id"] = prev
		}
		c.send(t, create(body))
		evs := c.untilTerminal(t)
		r := obj(t, terminalResponse(t, evs[len(evs)-1]))
		var outs []any
		for _, it := range r["output"].([]any) {
			if it := it.(map[string]any); it["type"] == "function_call" {
				calls = append(calls, it["name"].(string))
				outs = append(outs, fco(it["call_id"].(string), "ok"))
			}
		}
		if len(outs) > 1 {
			t.Fatalf("turn %d made %d calls with parallel_tool_calls false", turn, len(outs))
		}
		if len(outs) == 0 {
			break
		}
		prev, input = r["id"].(string), outs
	}
	if strings.Join(calls, ",") != "a,b" {
		t.Fatalf("calls %v, want a then b", calls)
	}
}

// TestMCPHistory: a conversation continued from a server that ran MCP
// tools (its mcp_list_tools, an approval round trip and an mcp_call in the
// input) is taken, rendered for the model and kept: the response completes,
// its input_items list the MCP items as sent, and a continuation reads
// them from the store.
func TestMCPHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	var input []any
	for _, raw := range []string{
		`{"type":"message","role":"user","content":"Find the streaming docs."}`,
		`{"type":"mcp_list_tools","id":"mcpl_1","server_label":"docs","tools":[{"name":"search","input_schema":{"type":"object"}}]}`,
		`{"type":"mcp_approval_request","id":"mcpr_1","server_label":"docs","name":"search","arguments":"{\"q\":\"streaming\"}"}`,
		`{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}`,
		`{"type":"mcp_call","id":"mcp_1","server_label":"docs","name":"search","arguments":"{\"q\":\"streaming\"}","output":"3 pages","status":"completed"}`,
		`{"type":"message","role":"user","content":"Summarize."}`,
	} {
		input = append(input, json.RawMessage(raw))
	}
	status, body := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "store": true, "input": input})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var r struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Usage  struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	json.Unmarshal(body, &r)
	if r.Status != "completed" || r.Usage.InputTokens < 40 {
		t.Fatalf("status %s, %d input tokens: %s", r.Status, r.Usage.InputTokens, body)
	}
	status, body = h.get(t, "/responses/"+r.ID+"/input_items?order=asc")
	for _, want := range []string{`"mcp_list_tools"`, `"mcp_approval_request"`, `"mcp_approval_response"`, `"mcp_call"`, `"3 pages"`} {
		if status != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("input_items lack %s: %d %s", want, status, body)
		}
	}
	if status, body := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "previous_response_id": r.ID, "input": "And?"}); status != 200 {
		t.Fatalf("continuing from the stored MCP history: %d %s", status, body)
	}
}
