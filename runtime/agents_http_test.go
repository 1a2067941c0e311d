package runtime_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/tether-run/tether/hostedtools/mcp"
	"github.com/tether-run/tether/internal/mcptest"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// deepTree is a root that spawns two sub-agents and waits for them: a
// makes two client calls one after the other; b makes one, then spawns a
// child of its own (/root/b/c, forked from b's context) that makes one,
// and waits for it.
const deepTree = "Split the work.\n" +
	`spawn: a {"message": "Count the tests.\ncall: grep {\"pattern\":\"func Test\"}\ncall: list_dir {}"} | ` +
	`b {"message": "List the files.\ncall: list_dir {}\nspawn: c {\"message\": \"call: grep {}\", \"fork_turns\": \"all\"}\nwait: c"}` + "\n" +
	"wait: a, b\n"

// followupTree is a root that spawns a sub-agent making one client call,
// waits for it, gives it a new task once it has ended (followup_task: it
// runs again, from its context and the task), and waits for it again.
const followupTree = "Delegate.\n" + `spawn: a {"message": "call: grep {}"}` + "\nwait: a\n" +
	`followup: a "and the benchmarks"` + "\nwait: a\n"

// treeRun is what a tree gave in one form: every client call, as
// "agent name arguments", sorted, their call ids, and the root's answer.
// The ids are not compared across forms: each response draws its own
// (the HTTP forms make several responses, the WebSocket one one), so they
// differ; each must be its own, and the outputs they pair must give the
// same answer.
type treeRun struct {
	calls  []string
	ids    []string
	answer string
	rounds int // requests (HTTP) or injects (WebSocket)
}

// TestAgentTreeForms: one tree, served in its three forms (over
// WebSocket, answered by injects; over HTTP, chained by
// previous_response_id; over HTTP, every item replayed), makes the same
// client calls, attributed to the same agents, and the root gives the
// same answer. Over HTTP each response completes when every agent has
// ended or waits on its client, and the next request resumes each agent
// whose outputs it brings where it stopped: all of them, or one agent's a
// request (apart), the others waiting on.
func TestAgentTreeForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script   string
		requests int // over HTTP: one, then one for each round of client calls
	}{{treeScript, 2}, {deepTree, 3}, {followupTree, 2}} {
		script := tc.script
		synctest.Test(t, func(t *testing.T) {
			h := newPipeHarness(t, runtime.Options{})
			ws := treeOverWS(t, h, script)
			if len(ws.calls) == 0 || ws.answer == "" {
				t.Fatalf("over WebSocket: %+v", ws)
			}
			distinctIDs(t, "over WebSocket", ws.ids)
			for _, form := range []struct{ chained, apart bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
				chained := form.chained
				got := treeOverHTTP(t, h, script, chained, form.apart)
				distinctIDs(t, fmt.Sprintf("over HTTP (chained %v, apart %v)", chained, form.apart), got.ids)
				if got.rounds != tc.requests && !form.apart {
					t.Errorf("over HTTP (chained %v): %d requests, want %d", chained, got.rounds, tc.requests)
				}
				if !slices.Equal(got.calls, ws.calls) || got.answer != ws.answer {
					t.Errorf("over HTTP (chained %v, %d requests):\n calls %q\nanswer %q\nover WebSocket (%d injects):\n calls %q\nanswer %q",
						chained, got.rounds, got.calls, got.answer, ws.rounds, ws.calls, ws.answer)
				}
			}
		})
	}
}

// treeOverWS runs script as one multi-agent response over WebSocket,
// injecting each client call's output as it comes.
func treeOverWS(t *testing.T, h *pipeHarness, script string) treeRun {
	t.Helper()
	c := h.dial(t, "Bearer alice")
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": script}))
	var run treeRun
	var id string
	for {
		b := c.recv(t)
		var e agentEv
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case "response.created":
			id = e.Resp.ID
		case "response.output_item.done":
			if it, ok := functionCall(e.Item); ok {
				run.calls = append(run.calls, callLine(e.Agent, it))
				run.ids = append(run.ids, it.CallID)
				c.send(t, injectEv(id, it.output()))
				run.rounds++
			}
		case "response.completed":
			run.answer = rootAnswer(t, e.Resp.Output)
			slices.Sort(run.calls)
			return run
		case "response.failed", "error", "response.inject.failed":
			t.Fatalf("%s", b)
		}
	}
}

// treeOverHTTP runs script over HTTP: each response completes on the
// client calls of its agents, and the next request brings their outputs,
// chained to it or with every item sent again; apart, one agent's outputs
// a request, the other agents waiting on theirs meanwhile.
func treeOverHTTP(t *testing.T, h *pipeHarness, script string, chained, apart bool) treeRun {
	t.Helper()
	var run treeRun
	input := []any{map[string]any{"type": "message", "role": "user", "content": script}}
	prev := ""
	var owed []any // outputs not yet sent
	for range 20 {
		body := map[string]any{"model": "tether-scripted", "store": chained, "multi_agent": map[string]any{"enabled": true}, "input": input}
		if prev != "" {
			body["previous_response_id"] = prev
		}
		b, _ := json.Marshal(body)
		resp, err := h.client.Post("http://tether.test/v1/responses", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		run.rounds++
		var r struct {
			ID     string            `json:"id"`
			Status string            `json:"status"`
			Output []json.RawMessage `json:"output"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &r) != nil || r.Status != "completed" {
			t.Fatalf("request %d: %d %.3000s", run.rounds, resp.StatusCode, out)
		}
		for _, raw := range r.Output {
			if it, ok := functionCall(raw); ok {
				var named struct {
					Agent *struct {
						Name string `json:"agent_name"`
					} `json:"agent"`
				}
				json.Unmarshal(raw, &named)
				run.calls = append(run.calls, callLine(named.Agent, it))
				run.ids = append(run.ids, it.CallID)
				owed = append(owed, it.output())
			}
		}
		if len(owed) == 0 {
			run.answer = rootAnswer(t, r.Output)
			slices.Sort(run.calls)
			return run
		}
		outputs := owed
		if apart { // the trees' agents make one call a step: one output is one agent's
			outputs = owed[:1]
		}
		owed = owed[len(outputs):]
		if chained {
			prev, input = r.ID, outputs
			continue
		}
		for _, raw := range r.Output {
			input = append(input, raw)
		}
		input = append(input, outputs...)
	}
	t.Fatalf("no answer after %d requests: %q", run.rounds, run.calls)
	return run
}

// callLine is a client call as treeRun lists it.
func callLine(agent *struct {
	Name string `json:"agent_name"`
}, it callItem) string {
	name := "/root"
	if agent != nil {
		name = agent.Name
	}
	return fmt.Sprintf("%s %s %s", name, it.Name, it.Arguments)
}

// distinctIDs fails t when a call id of ids is there twice or empty.
func distinctIDs(t *testing.T, form string, ids []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			t.Errorf("%s: call id %q twice or empty among %q", form, id, ids)
		}
		seen[id] = true
	}
}

// rootAnswer is the text of the root's last message in output.
func rootAnswer(t *testing.T, output []json.RawMessage) string {
	t.Helper()
	for _, raw := range slices.Backward(output) {
		var m struct {
			Type    string          `json:"type"`
			Agent   json.RawMessage `json:"agent"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		json.Unmarshal(raw, &m)
		if m.Type == "message" && m.Agent == nil && len(m.Content) > 0 {
			return m.Content[0].Text
		}
	}
	t.Fatalf("no answer of the root's in %d items", len(output))
	return ""
}

// TestAgentTreeHTTPNextTurn: a chained request after a tree's answer finds
// its sub-agents there, ended: list_agents names them with how they ended,
// and a spawn may not take a name they hold.
func TestAgentTreeHTTPNextTurn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newPipeHarness(t, runtime.Options{})
		post := func(body map[string]any) []byte {
			t.Helper()
			body["model"], body["multi_agent"] = "tether-scripted", map[string]any{"enabled": true}
			b, _ := json.Marshal(body)
			resp, err := h.client.Post("http://tether.test/v1/responses", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"status":"completed"`)) {
				t.Fatalf("%d %.3000s", resp.StatusCode, out)
			}
			return out
		}
		first := post(map[string]any{"input": "Delegate.\n" + `spawn: a {"message": "Say hi."}` + "\nwait: a\n"})
		var r struct {
			ID string `json:"id"`
		}
		json.Unmarshal(first, &r)
		next := post(map[string]any{"previous_response_id": r.ID, "input": "Again.\nlist:\n" + `spawn: a {"message": "Say hi."}` + "\n"})
		wantOutput(t, next, `{\"agents\":[{\"agent_name\":\"/root/a\",\"status\":\"completed\"}]}`, `an agent /root/a exists already`)
	})
}

// TestAgentTreeModel: a multi-agent request to a model that cannot act on
// an agent tree (as an upstream one) is refused, over HTTP and WebSocket,
// naming multi_agent; a simulated model takes it.
func TestAgentTreeModel(t *testing.T) {
	t.Parallel()
	scripted := sampler.NewScripted(nil, sampler.Timing{})
	h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{"plain": plainModel{scripted}, "tether-scripted": scripted}})
	body := map[string]any{"model": "plain", "multi_agent": map[string]any{"enabled": true}, "input": "Hello"}
	status, resp := h.post(t, "/responses", body)
	if status != http.StatusBadRequest || !bytes.Contains(resp, []byte(`"code":"unsupported_parameter"`)) || !bytes.Contains(resp, []byte(`"param":"multi_agent"`)) {
		t.Errorf("over HTTP: %d %s", status, resp)
	}
	c := h.dial(t, nil)
	c.send(t, create(body))
	if b := c.recv(t); !bytes.Contains(b, []byte(`"type":"error"`)) || !bytes.Contains(b, []byte(`"param":"multi_agent"`)) {
		t.Errorf("over WebSocket: %s", b)
	}
	body["model"] = "tether-scripted"
	if status, resp := h.post(t, "/responses", body); status != http.StatusOK {
		t.Errorf("tether-scripted: %d %.300s", status, resp)
	}
}

// TestAgentTreeMCP: a sub-agent's call of a hosted MCP server's tool names
// it, and over HTTP the next request puts it back in that agent's
// context: the agent goes on to its client call's answer without calling
// the MCP tool again, and the root answers from what it said.
func TestAgentTreeMCP(t *testing.T) {
	t.Parallel()
	url, _ := mcptest.HTTP(t)
	h := newHarness(t, runtime.Options{MCP: mcp.NewClient(mcp.Options{})})
	tools := []any{map[string]any{"type": "mcp", "server_label": "calc", "server_url": url, "require_approval": "never"}}
	script := "Delegate.\n" + `spawn: a {"message": "call: calc.add {\"a\":2,\"b\":3}\ncall: grep {}"}` + "\nwait: a\n"
	var r struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Output []struct {
			Type   string          `json:"type"`
			CallID string          `json:"call_id"`
			Output json.RawMessage `json:"output"`
			Agent  *struct {
				Name string `json:"agent_name"`
			} `json:"agent"`
		} `json:"output"`
	}
	status, resp := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "multi_agent": map[string]any{"enabled": true},
		"tools": tools, "input": []any{userMsg(script)}})
	if err := json.Unmarshal(resp, &r); status != http.StatusOK || err != nil || r.Status != "completed" {
		t.Fatalf("%d %.3000s", status, resp)
	}
	grep := ""
	mcpCalls := 0
	for _, it := range r.Output {
		switch {
		case it.Type == "mcp_call" && (it.Agent == nil || it.Agent.Name != "/root/a" || string(it.Output) != `"5"`):
			t.Errorf("the sub-agent's mcp_call: %.3000s", resp)
		case it.Type == "mcp_call":
			mcpCalls++
		case it.Type == "function_call":
			grep = it.CallID
		}
	}
	if mcpCalls != 1 || grep == "" {
		t.Fatalf("%d mcp_calls, grep call %q: %.3000s", mcpCalls, grep, resp)
	}
	status, resp = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "multi_agent": map[string]any{"enabled": true},
		"tools": tools, "previous_response_id": r.ID, "input": []any{fco(grep, "found 3")}})
	if status != http.StatusOK || bytes.Contains(resp, []byte(`"type":"mcp_call"`)) ||
		!bytes.Contains(resp, []byte(`/root/a said: grep returned: found 3`)) {
		t.Errorf("the next request: %d %.3000s", status, resp)
	}
}

// TestAgentTreeMemory: a spawn takes its share of the server's memory
// budget (Limits.MaxMemory) and gives it back when its agent ends: a
// budget with room for the request and one agent serves three trees one
// after the other, and one without room for the agent refuses the spawn
// with an error output the model reads, the response going on.
func TestAgentTreeMemory(t *testing.T) {
	t.Parallel()
	body := map[string]any{"model": "tether-scripted", "multi_agent": map[string]any{"enabled": true},
		"input": "Delegate.\n" + `spawn: a {"message": "Say hi."}` + "\nwait: a\n"}
	h := newHarness(t, runtime.Options{Limits: runtime.Limits{MaxMemory: 200 << 10}})
	for i := range 3 {
		if status, resp := h.post(t, "/responses", body); status != http.StatusOK || !bytes.Contains(resp, []byte(`{\"status\":{\"/root/a\":\"completed\"}}`)) {
			t.Fatalf("tree %d: %d %.2000s", i, status, resp)
		}
	}
	h = newHarness(t, runtime.Options{Limits: runtime.Limits{MaxMemory: 100 << 10}})
	if status, resp := h.post(t, "/responses", body); status != http.StatusOK || !bytes.Contains(resp, []byte(`no room for another agent`)) ||
		!bytes.Contains(resp, []byte(`"status":"completed"`)) {
		t.Errorf("%d %.2000s", status, resp)
	}
}

// TestAgentTreeFork: response.fork of a multi-agent response whose two
// sub-agents wait on their client calls (its root waiting on them) makes
// a new response on another lane, forked from it, whose tree is built
// again from the original's items: its sub-agents wait there on the same
// calls. Each response's injects reach its own agents, and each completes
// with an answer made of its own outputs.
func TestAgentTreeFork(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newPipeHarness(t, runtime.Options{})
		c := h.dial(t, "Bearer alice")
		l := newLanes(c)
		req := create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true},
			"include": []string{"tether.waits"}, "input": treeScript})
		req["stream_id"] = "orig"
		c.send(t, req)
		var id string
		var calls []callItem
		waits := 0
		for _, b := range l.take(t, "orig", func(e ev) bool {
			waits += count([]string{e.Type}, "response.waiting")
			return waits == 2 || e.Type == "error" || isEnd(e.Type)
		}) {
			var e agentEv
			json.Unmarshal(b, &e)
			switch it, ok := functionCall(e.Item); {
			case e.Type == "response.created":
				id = e.Resp.ID
			case e.Type == "response.output_item.done" && ok:
				calls = append(calls, it)
			case isEnd(e.Type) || e.Type == "error":
				t.Fatalf("before both waits: %s", b)
			}
		}
		if len(calls) != 2 {
			t.Fatalf("%d client calls before both waits", len(calls))
		}

		c.send(t, map[string]any{"type": "response.fork", "stream_id": "orig", "response_id": id, "stream_ids": []string{"f"}})
		var forkID string
		for _, b := range l.take(t, "f", func(e ev) bool { return e.Type == "response.in_progress" || e.Type == "error" || isEnd(e.Type) }) {
			var e struct {
				Type     string `json:"type"`
				Response struct {
					ID         string `json:"id"`
					ForkedFrom string `json:"forked_from"`
				} `json:"response"`
			}
			json.Unmarshal(b, &e)
			if e.Type == "response.created" {
				forkID = e.Response.ID
				if e.Response.ForkedFrom != id || forkID == id {
					t.Fatalf("the fork: %s", b)
				}
			}
		}
		answers := map[string]string{}
		for _, r := range []struct{ lane, id, variant string }{{"f", forkID, "fork"}, {"orig", id, "original"}} {
			for _, it := range calls {
				m := injectEv(r.id, fco(it.CallID, r.variant+" "+it.Name))
				m["stream_id"] = r.lane
				c.send(t, m)
			}
			end := l.take(t, r.lane, func(e ev) bool { return e.Type == "error" || isEnd(e.Type) || e.Type == "response.inject.failed" })
			var e agentEv
			json.Unmarshal(last(end), &e)
			if e.Type != "response.completed" {
				t.Fatalf("lane %s ended %s", r.lane, last(end))
			}
			answers[r.lane] = rootAnswer(t, e.Resp.Output)
		}
		for lane, variant := range map[string]string{"f": "fork", "orig": "original"} {
			for _, it := range calls {
				if !strings.Contains(answers[lane], it.Name+" returned: "+variant+" "+it.Name) {
					t.Errorf("lane %s answered %q, want %s's output", lane, answers[lane], variant)
				}
			}
		}
	})
}

// TestAgentTreeNextTurnWS: a new turn on a WebSocket after a tree's
// answer (previous_response_id, from the connection's cache) finds its
// sub-agents there, ended as they ended: list_agents names them completed.
func TestAgentTreeNextTurnWS(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newPipeHarness(t, runtime.Options{}).dial(t, "Bearer alice")
		body := map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true},
			"input": "Delegate.\n" + `spawn: a {"message": "Say hi."}` + "\nwait: a\n"}
		c.send(t, create(body))
		first := last(c.untilTerminal(t))
		if eventType(t, first) != "response.completed" {
			t.Fatalf("ended %.2000s", first)
		}
		body["previous_response_id"], body["input"] = respID(t, first), "Again.\nlist:\n"
		c.send(t, create(body))
		next := last(c.untilTerminal(t))
		wantOutput(t, next, `{\"agents\":[{\"agent_name\":\"/root/a\",\"status\":\"completed\"}]}`)
	})
}
