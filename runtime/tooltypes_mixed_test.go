package runtime_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/tether-run/tether/runtime"
)

// mixedTools offer one tool of each kind a step of the mixed script calls.
func mixedTools() []any {
	var tools []any
	json.Unmarshal([]byte(`[
		{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[{"type":"function","name":"wait_agent"}]},
		{"type":"custom","name":"exec","description":"Run code.","format":{"type":"text"}},
		{"type":"apply_patch"},
		{"type":"shell","environment":{"type":"local"}},
		{"type":"web_search"}]`), &tools)
	return tools
}

// mixedScript is two steps: five calls of five kinds at once (a
// namespaced function, a custom tool, apply_patch, shell and the hosted
// web_search), then one more shell call.
const mixedScript = `Fix it.
call: multi_agent_v1.wait_agent {"ids":["a"]} | exec "print(1)" | apply_patch {"type":"create_file","path":"a.txt","diff":"+a\n"} | shell {"commands":["ls"]} | web_search {"query":"tether"}
call: shell {"commands":["go test ./..."]}`

// mixedOutput is the client's output item for a call item of any type, or
// nil for an item that is no client call.
func mixedOutput(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var it map[string]any
	json.Unmarshal(raw, &it)
	id := it["call_id"]
	switch it["type"] {
	case "function_call":
		return map[string]any{"type": "function_call_output", "call_id": id, "output": "done " + it["name"].(string)}
	case "custom_tool_call":
		return map[string]any{"type": "custom_tool_call_output", "call_id": id, "output": "1"}
	case "apply_patch_call":
		return map[string]any{"type": "apply_patch_call_output", "call_id": id, "status": "completed", "output": "created a.txt"}
	case "shell_call":
		return map[string]any{"type": "shell_call_output", "call_id": id, "output": []any{
			map[string]any{"stdout": "ok\n", "stderr": "", "outcome": map[string]any{"type": "exit", "exit_code": 0}}}}
	}
	return nil
}

// mixedKey is what the two designs must agree on for an output item.
type mixedKey struct{ Type, Name, Namespace, CallID, Payload string }

func mixedKeys(t *testing.T, items []json.RawMessage) []mixedKey {
	t.Helper()
	var out []mixedKey
	for _, raw := range items {
		var it struct {
			Type, Name, Namespace, Arguments, Input string
			CallID                                  string          `json:"call_id"`
			Action                                  json.RawMessage `json:"action"`
			Operation                               json.RawMessage `json:"operation"`
		}
		json.Unmarshal(raw, &it)
		payload := it.Arguments + it.Input + string(it.Operation)
		if it.Type == "shell_call" {
			payload += string(it.Action)
		}
		out = append(out, mixedKey{it.Type, it.Name, it.Namespace, it.CallID, payload})
	}
	return out
}

// TestMixedCallTypes: a suspended rollout whose step mixes a namespaced
// function, a custom tool, apply_patch, shell and a hosted web_search parks
// once per step, listing the four client calls with their types, takes
// each type's output back through response.append, and leaves the same
// items as the same rollout in cached-state turns.
func TestMixedCallTypes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{HostedTools: []runtime.Tool{searchTool()}})
	body := func(input any) map[string]any {
		return map[string]any{"model": "tether-scripted", "store": false, "tools": mixedTools(), "input": input}
	}

	c := h.dial(t, nil)
	b := body(mixedScript)
	b["suspend"] = true
	c.send(t, create(b))
	var suspended [][]byte
	var pauses [][]string
	for {
		evs := untilPause(t, c)
		suspended = append(suspended, evs...)
		last := evs[len(evs)-1]
		if eventType(t, last) != "response.done" {
			if eventType(t, last) != "response.completed" {
				t.Fatalf("ended with %s", last)
			}
			break
		}
		var outs []any
		var types []string
		e := decodeEv(t, last)
		for _, pc := range pendingCalls(t, last) {
			types = append(types, pc["type"].(string))
		}
		for _, raw := range e.Response.Output {
			if out := mixedOutput(t, raw); out != nil {
				outs = append(outs, out)
			}
		}
		pauses = append(pauses, types)
		c.send(t, appendEv(respID(t, last), "", outs...))
	}
	checkStreamInvariants(t, suspended)
	var commands []string
	for _, b := range suspended {
		if m := obj(t, b); m["type"] == "response.shell_call_command.done" {
			commands = append(commands, m["command"].(string))
		}
	}
	if !slices.Equal(commands, []string{"ls", "go test ./..."}) {
		t.Errorf("shell_call_command.done commands %q", commands)
	}
	want := [][]string{{"function_call", "custom_tool_call", "apply_patch_call", "shell_call"}, {"shell_call"}}
	if len(pauses) != 2 || !slices.Equal(pauses[0], want[0]) || !slices.Equal(pauses[1], want[1]) {
		t.Fatalf("pauses %v, want %v", pauses, want)
	}
	final := decodeEv(t, suspended[len(suspended)-1]).Response
	keys := mixedKeys(t, final.Output)
	t.Logf("suspended output: %v", keys)

	tc := h.dial(t, nil)
	var turnItems []json.RawMessage
	var input any = mixedScript
	prev := ""
	for turn := 0; ; turn++ {
		b := body(input)
		if prev != "" {
			b["previous_response_id"] = prev
		}
		tc.send(t, create(b))
		evs := tc.untilTerminal(t)
		end := decodeEv(t, evs[len(evs)-1])
		if end.Type != "response.completed" {
			t.Fatalf("turn %d: %s", turn, evs[len(evs)-1])
		}
		turnItems = append(turnItems, end.Response.Output...)
		var outs []any
		for _, raw := range end.Response.Output {
			if out := mixedOutput(t, raw); out != nil {
				outs = append(outs, out)
			}
		}
		if len(outs) == 0 {
			break
		}
		prev, input = end.Response.ID, outs
	}
	// The turns' responses drew other call ids than the suspended one:
	// compare the calls they name, each id its own.
	inOrder := func(keys []mixedKey) []mixedKey {
		out, seen := slices.Clone(keys), map[string]string{}
		for i := range out {
			out[i].CallID = callOrdinal(t, seen, out[i].CallID)
		}
		return out
	}
	if got := inOrder(mixedKeys(t, turnItems)); !slices.Equal(got, inOrder(keys)) {
		t.Fatalf("turns:\n%v\nsuspended:\n%v", got, keys)
	}
	types := map[string]bool{}
	for _, k := range keys {
		types[k.Type] = true
	}
	for _, typ := range []string{"function_call", "custom_tool_call", "apply_patch_call", "shell_call", "web_search_call", "message"} {
		if !types[typ] {
			t.Errorf("no %s item in %v", typ, keys)
		}
	}
}
