package protocol_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tether-run/tether/protocol"
)

// mcpItems are the MCP items in the shapes the API gives them.
var mcpItems = []string{
	`{"type":"mcp_list_tools","id":"mcpl_1","server_label":"docs","tools":[{"name":"search","description":"Search the docs.","input_schema":{"type":"object","properties":{"q":{"type":"string"}}},"annotations":{"readOnlyHint":true}}]}`,
	`{"type":"mcp_approval_request","id":"mcpr_1","server_label":"docs","name":"search","arguments":"{\"q\":\"streaming\"}"}`,
	`{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true,"reason":"read-only"}`,
	`{"type":"mcp_call","id":"mcp_1","server_label":"docs","name":"search","arguments":"{\"q\":\"streaming\"}","output":"3 pages","approval_request_id":"mcpr_1","status":"completed"}`,
	`{"type":"mcp_call","id":"mcp_2","server_label":"docs","name":"search","arguments":"{}","error":"tool failed: no query","status":"failed"}`,
	`{"type":"mcp_list_tools","id":"mcpl_2","server_label":"down","tools":[],"error":"connection refused"}`,
}

// TestMCPItems: each MCP item decodes, validates and encodes back to its
// JSON; what lacks a required field is refused with the field named.
func TestMCPItems(t *testing.T) {
	t.Parallel()
	for _, raw := range mcpItems {
		sameItem(t, raw)
	}
	for raw, param := range map[string]string{
		`{"type":"mcp_call","name":"search","arguments":"{}"}`:                          "input[0].server_label",
		`{"type":"mcp_call","server_label":"docs","arguments":"{}"}`:                    "input[0].name",
		`{"type":"mcp_approval_response","approve":true}`:                               "input[0].approval_request_id",
		`{"type":"mcp_list_tools","server_label":"docs","tools":[{"input_schema":{}}]}`: "input[0].tools[0].name",
		`{"type":"mcp_call","server_label":"docs","name":"x","arguments":7}`:            "input[0]",
	} {
		_, perr := protocol.DecodeItem(json.RawMessage(raw), "input[0]")
		if perr == nil || perr.Param != param {
			t.Errorf("%s: %v, want an error about %s", raw, perr, param)
		}
	}
}

// TestMCPItemsFromSDK: openai-go's MCP input params decode as the items
// they are.
func TestMCPItemsFromSDK(t *testing.T) {
	t.Parallel()
	for want, p := range map[protocol.ItemType]responses.ResponseInputItemUnionParam{
		protocol.ItemMCPListTools: {OfMcpListTools: &responses.ResponseInputItemMcpListToolsParam{ID: "mcpl_1", ServerLabel: "docs",
			Tools: []responses.ResponseInputItemMcpListToolsToolParam{{Name: "search", InputSchema: map[string]any{"type": "object"}}}}},
		protocol.ItemMCPCall: {OfMcpCall: &responses.ResponseInputItemMcpCallParam{ID: "mcp_1", ServerLabel: "docs", Name: "search",
			Arguments: "{}", Output: openai.String("ok")}},
		protocol.ItemMCPApprovalRequest: {OfMcpApprovalRequest: &responses.ResponseInputItemMcpApprovalRequestParam{ID: "mcpr_1",
			ServerLabel: "docs", Name: "search", Arguments: "{}"}},
		protocol.ItemMCPApprovalResponse: {OfMcpApprovalResponse: &responses.ResponseInputItemMcpApprovalResponseParam{
			ApprovalRequestID: "mcpr_1", Approve: false, Reason: openai.String("no")}},
	} {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		it, perr := protocol.DecodeItem(b, "input[0]")
		if perr != nil || it.ItemType() != want {
			t.Errorf("%s: %v, %v; want a %s", b, it, perr, want)
		}
	}
}

// TestMCPServerTool: an mcp tool's allowed_tools and require_approval
// read in each of their forms, and decide what the model may call and
// what waits for approval; the tool echoes back as sent.
func TestMCPServerTool(t *testing.T) {
	t.Parallel()
	search := protocol.MCPToolInfo{Name: "search", Annotations: json.RawMessage(`{"readOnlyHint":true}`)}
	write := protocol.MCPToolInfo{Name: "write"}
	for _, tc := range []struct {
		tool             string
		allows, approves [2]bool // search, write
	}{
		{`{"type":"mcp","server_label":"d","server_url":"http://127.0.0.1:1/mcp"}`, [2]bool{true, true}, [2]bool{true, true}},
		{`{"type":"mcp","server_label":"d","server_url":"http://x","require_approval":"never","allowed_tools":["write"]}`, [2]bool{false, true}, [2]bool{false, false}},
		{`{"type":"mcp","server_label":"d","server_url":"http://x","require_approval":"always","allowed_tools":{"read_only":true}}`, [2]bool{true, false}, [2]bool{true, true}},
		{`{"type":"mcp","server_label":"d","server_url":"http://x","require_approval":{"never":{"tool_names":["search"]}}}`, [2]bool{true, true}, [2]bool{false, true}},
		{`{"type":"mcp","server_label":"d","server_url":"http://x","require_approval":{"never":{"read_only":true}},"allowed_tools":{"tool_names":["search","write"]}}`, [2]bool{true, true}, [2]bool{false, true}},
		// In both filters: always wins.
		{`{"type":"mcp","server_label":"d","server_url":"http://x","require_approval":{"always":{"tool_names":["search"]},"never":{"read_only":true}}}`, [2]bool{true, true}, [2]bool{true, true}},
	} {
		var tool protocol.Tool
		if err := json.Unmarshal([]byte(tc.tool), &tool); err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		req := protocol.CreateRequest{Model: "m", Tools: []protocol.Tool{tool}}
		if perr := req.Validate(); perr != nil {
			t.Fatalf("%s: %v", tc.tool, perr)
		}
		s := tool.MCP
		for i, info := range []protocol.MCPToolInfo{search, write} {
			if got := s.Allows(info); got != tc.allows[i] {
				t.Errorf("%s: Allows(%s) = %v", tc.tool, info.Name, got)
			}
			if got := s.NeedsApproval(info); got != tc.approves[i] {
				t.Errorf("%s: NeedsApproval(%s) = %v", tc.tool, info.Name, got)
			}
		}
		wantSameJSON(t, tc.tool, tool)
	}
	var tool protocol.Tool
	if err := json.Unmarshal([]byte(`{"type":"mcp","server_label":"d","server_url":"http://x","require_approval":7}`), &tool); err == nil {
		t.Error("require_approval 7 decoded")
	}
	tool = protocol.Tool{MCP: &protocol.MCPServer{Headers: map[string]string{"X-Key": "k"}, Authorization: "tok"}}
	if h := tool.MCP.AllHeaders(); h["Authorization"] != "Bearer tok" || h["X-Key"] != "k" {
		t.Errorf("AllHeaders = %v", h)
	}
}

// TestMCPApprovalPairs: an approval response answers its request as an
// output answers its call, by the request's id.
func TestMCPApprovalPairs(t *testing.T) {
	t.Parallel()
	req := &protocol.MCPApprovalRequest{ID: "mcpr_1", ServerLabel: "d", Name: "search", Arguments: "{}"}
	c, ok := protocol.CallOf(req)
	if !ok || c.CallID != "mcpr_1" || c.Namespace != "d" || c.Type != protocol.ItemMCPApprovalRequest {
		t.Fatalf("CallOf = %+v, %v", c, ok)
	}
	id, answers, ok := protocol.AnswerOf(&protocol.MCPApprovalResponse{ApprovalRequestID: "mcpr_1", Approve: true})
	if !ok || id != "mcpr_1" || answers != protocol.ItemMCPApprovalRequest || protocol.OutputFor(answers) != protocol.ItemMCPApprovalResponse {
		t.Fatalf("AnswerOf = %s %s %v", id, answers, ok)
	}
	if back := protocol.ItemOf(c, ""); !reflect.DeepEqual(back, protocol.Item(req)) {
		t.Errorf("ItemOf(CallOf) = %#v", back)
	}
}
