package clienttools_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/hostedtools/mcp"
	"github.com/tether-run/tether/internal/mcptest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestRunMCP: a rollout with a hosted mcp tool whose calls need approval,
// in every mode: the client's Approve sees each request and its answer
// goes back as an mcp_approval_response; approved, the call runs on the
// MCP server, and without Approve nothing runs.
func TestRunMCP(t *testing.T) {
	t.Parallel()
	url, _ := mcptest.HTTP(t)
	base := server(t, runtime.Options{MCP: mcp.NewClient(mcp.Options{Timeout: 10 * time.Second})})
	var tool protocol.Tool
	if err := json.Unmarshal([]byte(`{"type":"mcp","server_label":"calc","server_url":"`+url+`","require_approval":"always"}`), &tool); err != nil {
		t.Fatal(err)
	}
	for _, mode := range clienttools.Modes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			c := &clienttools.Client{BaseURL: base}
			ro := func(approve func(context.Context, clienttools.Call) bool) clienttools.Rollout {
				return clienttools.Rollout{Mode: mode, Approve: approve, Request: &protocol.CreateRequest{Model: sampler.ScriptedModel,
					Tools: []protocol.Tool{tool}, Input: userInput("Add.\ncall: calc.add {\"a\":40,\"b\":2}")}}
			}
			var asked []clienttools.Call
			res, err := c.Run(t.Context(), ro(func(_ context.Context, call clienttools.Call) bool {
				asked = append(asked, call)
				return true
			}))
			if err != nil {
				t.Fatal(err)
			}
			if len(asked) != 1 || asked[0].Namespace != "calc" || asked[0].Name != "add" || asked[0].Arguments != `{"a":40,"b":2}` {
				t.Fatalf("asked %+v", asked)
			}
			if len(res.Calls) != 1 || !res.Calls[0].Approved || res.Calls[0].Type != protocol.ItemMCPApprovalRequest {
				t.Errorf("calls %+v", res.Calls)
			}
			var ran *protocol.MCPCall
			for _, it := range res.Output {
				if c, ok := it.(*protocol.MCPCall); ok {
					ran = c
				}
			}
			if ran == nil || ran.Output == nil || *ran.Output != "42" || ran.ApprovalRequestID == nil || *ran.ApprovalRequestID != res.Calls[0].CallID {
				t.Fatalf("the call on the MCP server: %+v", ran)
			}
			if res.Text() != "calc.add returned: 42" {
				t.Errorf("answer %q", res.Text())
			}

			res, err = c.Run(t.Context(), ro(nil))
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range res.Output {
				if _, ok := it.(*protocol.MCPCall); ok {
					t.Errorf("without Approve, a call ran: %+v", it)
				}
			}
			if res.Text() != "add was not approved" {
				t.Errorf("answer %q", res.Text())
			}
		})
	}
}
