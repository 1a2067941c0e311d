package runtime_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/hostedtools/mcp"
	"github.com/tether-run/tether/internal/mcptest"
	"github.com/tether-run/tether/runtime"
)

// mcpItem is the part of an MCP output item the tests look at.
type mcpItem struct {
	Type              string          `json:"type"`
	ID                string          `json:"id"`
	ServerLabel       string          `json:"server_label"`
	Name              string          `json:"name"`
	Arguments         string          `json:"arguments"`
	Output            *string         `json:"output"`
	Error             json.RawMessage `json:"error"`
	ApprovalRequestID *string         `json:"approval_request_id"`
	Status            string          `json:"status"`
	Tools             []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// mcpRun is what one rollout did, over however many turns: its events in
// order, the items done, and the final answer.
type mcpRun struct {
	types  []string  // every event's type
	done   []mcpItem // output_item.done items
	answer string
	status string
	turns  int // responses (turns) or pauses + 1 (suspended)
	code   string
}

func (r *mcpRun) count(typ string) int {
	n := 0
	for _, t := range r.types {
		if t == typ {
			n++
		}
	}
	return n
}

func (r *mcpRun) items(typ string) []mcpItem {
	var out []mcpItem
	for _, it := range r.done {
		if it.Type == typ {
			out = append(out, it)
		}
	}
	return out
}

// driveMCP runs body in design ("turns": cached-state responses chained by
// previous_response_id; "suspend": one suspended rollout), answering each
// approval request with approve.
func driveMCP(t *testing.T, c *wsConn, design string, body map[string]any, approve bool) *mcpRun {
	t.Helper()
	run := &mcpRun{}
	if design == "suspend" {
		body["suspend"] = true
	}
	c.send(t, create(body))
	for {
		var events [][]byte
		if design == "suspend" {
			events = c.next(t)
		} else {
			events = c.untilTerminal(t)
		}
		var approvals []any
		for _, b := range events {
			e := decodeEv(t, b)
			run.types = append(run.types, e.Type)
			if e.Type == "error" {
				run.code = e.Error.Code
				return run
			}
			if e.Type != "response.output_item.done" {
				continue
			}
			var it mcpItem
			if err := json.Unmarshal(e.Item, &it); err != nil {
				t.Fatal(err)
			}
			run.done = append(run.done, it)
			switch it.Type {
			case "mcp_approval_request":
				approvals = append(approvals, map[string]any{"type": "mcp_approval_response", "approval_request_id": it.ID, "approve": approve})
			case "message":
				run.answer = it.Content[0].Text
			}
		}
		run.turns++
		last := decodeEv(t, events[len(events)-1])
		run.status = last.Response.Status
		if last.Response.Error != nil {
			run.code = last.Response.Error.Code
		}
		switch {
		case len(approvals) == 0:
			return run
		case design == "suspend":
			if last.Type != "response.done" {
				t.Fatalf("approval requests, then %s", last.Type)
			}
			c.send(t, appendEv(last.Response.ID, "", approvals...))
		default:
			next := map[string]any{"model": body["model"], "tools": body["tools"], "previous_response_id": last.Response.ID, "input": approvals}
			c.send(t, create(next))
		}
	}
}

// TestMCPTool: the hosted mcp tool against real MCP servers (the official
// SDK's), one in-process over Streamable HTTP and one a subprocess over
// stdio that the operator configured, in both designs: the server's tools
// listed once per conversation (and the server asked once per
// connection), a call and its events, an error from the server, an
// approval round trip approved and denied, a tool that hangs past the
// timeout, and a server outside the allow-list refused before anything
// starts, the connection still usable.
func TestMCPTool(t *testing.T) {
	t.Parallel()
	url, _ := mcptest.HTTP(t)
	command, env := mcptest.StdioCommand()
	h := newHarness(t, runtime.Options{MCP: mcp.NewClient(mcp.Options{
		Timeout: 2 * time.Second,
		Servers: map[string]mcp.ServerConfig{"local": {Command: command, Env: env}},
	})})
	servers := map[string]map[string]any{
		"http":  {"type": "mcp", "server_label": "calc", "server_url": url},
		"stdio": {"type": "mcp", "server_label": "local"},
	}
	for _, design := range []string{"turns", "suspend"} {
		for _, kind := range []string{"http", "stdio"} {
			t.Run(design+"/"+kind, func(t *testing.T) {
				t.Parallel()
				c := h.dial(t, nil)
				label := servers[kind]["server_label"].(string)
				tool := func(approval string) []any {
					m := map[string]any{}
					for k, v := range servers[kind] {
						m[k] = v
					}
					m["require_approval"] = approval
					return []any{m}
				}
				body := func(approval, call string) map[string]any {
					return map[string]any{"model": "tether-scripted", "tools": tool(approval),
						"input": []any{userMsg("Use the server.\ncall: " + label + "." + call)}}
				}

				// List and call, no approval.
				run := driveMCP(t, c, design, body("never", `add {"a":2,"b":3}`), true)
				lists, calls := run.items("mcp_list_tools"), run.items("mcp_call")
				if run.status != "completed" || len(lists) != 1 || len(lists[0].Tools) != 5 || lists[0].ServerLabel != label ||
					len(calls) != 1 || calls[0].Output == nil || *calls[0].Output != "5" || calls[0].Status != "completed" || calls[0].Arguments != `{"a":2,"b":3}` {
					t.Fatalf("list and call: %+v", run)
				}
				if want := label + ".add returned: 5"; run.answer != want {
					t.Errorf("answer %q, want %q", run.answer, want)
				}
				for _, typ := range []string{"response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
					"response.mcp_call.in_progress", "response.mcp_call_arguments.done", "response.mcp_call.completed"} {
					if run.count(typ) != 1 {
						t.Errorf("%d %s events: %v", run.count(typ), typ, run.types)
					}
				}
				if run.count("response.mcp_call_arguments.delta") == 0 || slices.Index(run.types, "response.mcp_call.completed") < slices.Index(run.types, "response.mcp_call_arguments.done") {
					t.Errorf("argument events: %v", run.types)
				}

				// A tool's own error: the call fails, the response does not.
				run = driveMCP(t, c, design, body("never", `fail {}`), true)
				calls = run.items("mcp_call")
				if run.status != "completed" || len(calls) != 1 || calls[0].Status != "failed" || !strings.Contains(string(calls[0].Error), "the disk is full") ||
					run.count("response.mcp_call.failed") != 1 || !strings.Contains(run.answer, "failed") {
					t.Errorf("a tool's error: %+v", run)
				}

				// A tool that hangs: the call fails after the timeout.
				run = driveMCP(t, c, design, body("never", `hang {}`), true)
				calls = run.items("mcp_call")
				if run.status != "completed" || len(calls) != 1 || calls[0].Status != "failed" || !strings.Contains(string(calls[0].Error), "did not answer within 2s") {
					t.Errorf("a hanging tool: %+v", run)
				}

				// Approval: the request ends the turn or pauses; approved,
				// the call runs and names the request.
				run = driveMCP(t, c, design, body("always", `add {"a":20,"b":22}`), true)
				reqs, calls := run.items("mcp_approval_request"), run.items("mcp_call")
				if run.status != "completed" || run.turns != 2 || len(reqs) != 1 || reqs[0].Arguments != `{"a":20,"b":22}` ||
					len(calls) != 1 || calls[0].ApprovalRequestID == nil || *calls[0].ApprovalRequestID != reqs[0].ID || *calls[0].Output != "42" {
					t.Fatalf("approved: %+v", run)
				}
				if want := label + ".add returned: 42"; run.answer != want {
					t.Errorf("answer %q, want %q", run.answer, want)
				}
				if design == "turns" && len(run.items("mcp_list_tools")) != 1 {
					t.Errorf("the second turn listed the tools again: %+v", run.items("mcp_list_tools"))
				}
				// Denied: nothing runs, and the model is told.
				run = driveMCP(t, c, design, body("always", `add {"a":1,"b":1}`), false)
				if run.status != "completed" || len(run.items("mcp_call")) != 0 || !strings.Contains(run.answer, "was not approved") {
					t.Errorf("denied: %+v", run)
				}
				// An approval filter: add is read-only, so never asks.
				filtered := body("", `add {"a":1,"b":2}`)
				filtered["tools"].([]any)[0].(map[string]any)["require_approval"] = map[string]any{"never": map[string]any{"read_only": true}}
				if run = driveMCP(t, c, design, filtered, true); run.turns != 1 || len(run.items("mcp_call")) != 1 {
					t.Errorf("read-only add asked for approval: %+v", run)
				}

				// A server outside the allow-list: refused, the connection
				// goes on.
				bad := body("never", `add {}`)
				bad["tools"].([]any)[0].(map[string]any)["server_url"] = "https://mcp.example.com/mcp"
				if run = driveMCP(t, c, design, bad, true); run.code != "mcp_server_not_allowed" {
					t.Errorf("outside the allow-list: %+v", run)
				}
				unknown := body("never", `add {}`)
				unknown["tools"] = []any{map[string]any{"type": "mcp", "server_label": "nowhere"}}
				if run = driveMCP(t, c, design, unknown, true); run.code != "mcp_server_not_allowed" {
					t.Errorf("an unconfigured label: %+v", run)
				}
				if run = driveMCP(t, c, design, body("never", `add {"a":1,"b":1}`), true); run.status != "completed" {
					t.Errorf("after a refusal: %+v", run)
				}
			})
		}
	}
}

// TestMCPSessionsPerConnection: the rollouts and turns of one connection
// call an MCP server through one session, in either design (cached-state
// turns do not pay the MCP handshake each turn); another connection opens
// its own; HTTP requests each open one.
func TestMCPSessionsPerConnection(t *testing.T) {
	t.Parallel()
	url, sessions := mcptest.HTTP(t)
	h := newHarness(t, runtime.Options{MCP: mcp.NewClient(mcp.Options{Timeout: 10 * time.Second})})
	body := func() map[string]any {
		return map[string]any{"model": "tether-scripted",
			"tools": []any{map[string]any{"type": "mcp", "server_label": "calc", "server_url": url, "require_approval": "always"}},
			"input": []any{userMsg("Add.\ncall: calc.add {\"a\":1,\"b\":2}\ncall: calc.add {\"a\":3,\"b\":4}")}}
	}
	c := h.dial(t, nil)
	for _, design := range []string{"turns", "suspend", "turns"} {
		if run := driveMCP(t, c, design, body(), true); run.status != "completed" || len(run.items("mcp_call")) != 2 {
			t.Fatalf("%s: %+v", design, run)
		}
	}
	if n := sessions(); n != 1 {
		t.Errorf("one connection, three rollouts, nine turns: %d MCP sessions, want 1", n)
	}
	c2 := h.dial(t, nil)
	if run := driveMCP(t, c2, "turns", body(), true); run.status != "completed" {
		t.Fatalf("another connection: %+v", run)
	}
	if n := sessions(); n != 2 {
		t.Errorf("two connections: %d MCP sessions, want 2", n)
	}
}
