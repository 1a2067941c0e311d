package protocol

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/go-json-experiment/json/jsontext"
)

// MCPServer is a hosted mcp tool's definition, as OpenAI's Responses API
// has it: the MCP server a request lets the model use, which of its tools,
// and which calls the client must approve first.
//
// The model sees the server as a namespace named ServerLabel whose members
// are the tools the server lists (those AllowedTools lets through), so it
// calls them "label.tool"; the label shares the request's tool names with
// functions, custom tools and namespaces.
type MCPServer struct {
	ServerLabel       string            `json:"server_label"`
	ServerURL         string            `json:"server_url,omitempty"`
	ConnectorID       string            `json:"connector_id,omitempty"`
	ServerDescription string            `json:"server_description,omitempty"`
	Headers           map[string]string `json:"headers,omitempty"`
	// Authorization is an OAuth access token for the server, sent as a
	// bearer token.
	Authorization string `json:"authorization,omitempty"`
	// AllowedTools is the tools the model may call; nil is all of them.
	AllowedTools *MCPToolFilter `json:"allowed_tools,omitempty"`
	// RequireApproval says which calls wait for the client's
	// mcp_approval_response; the zero value is "always", OpenAI's default.
	RequireApproval MCPApproval `json:"require_approval"`
}

// MCPToolFilter picks a server's tools: by name, or those that declare
// themselves read-only (the readOnlyHint annotation), or both.
type MCPToolFilter struct {
	ToolNames []string `json:"tool_names,omitempty"`
	ReadOnly  *bool    `json:"read_only,omitempty"`
}

// MCPApproval is require_approval: "always", "never", or filters of the
// tools that always and that never need approval (a tool in neither, or
// in both, needs it).
type MCPApproval struct {
	Mode   string // "always", "never", or "" with the filters (or nothing: always)
	Always *MCPToolFilter
	Never  *MCPToolFilter
}

// Matches reports whether f picks the tool info.
func (f *MCPToolFilter) Matches(info MCPToolInfo) bool {
	if f.ToolNames != nil && !slices.Contains(f.ToolNames, info.Name) {
		return false
	}
	if f.ReadOnly != nil && readOnly(info) != *f.ReadOnly {
		return false
	}
	return true
}

// readOnly reports a tool's readOnlyHint annotation.
func readOnly(info MCPToolInfo) bool {
	var a struct {
		ReadOnlyHint bool `json:"readOnlyHint"`
	}
	_ = json.Unmarshal(info.Annotations, &a)
	return a.ReadOnlyHint
}

// Allows reports whether the model may call the server's tool.
func (s *MCPServer) Allows(info MCPToolInfo) bool {
	return s.AllowedTools == nil || s.AllowedTools.Matches(info)
}

// NeedsApproval reports whether a call of the tool waits for the client.
func (s *MCPServer) NeedsApproval(info MCPToolInfo) bool {
	a := s.RequireApproval
	switch {
	case a.Mode == "never":
		return false
	case a.Mode == "always", a.Always != nil && a.Always.Matches(info):
		return true
	case a.Never != nil && a.Never.Matches(info):
		return false
	}
	return true
}

// AllHeaders is the headers sent with every request to the server: the
// request's headers and its authorization as a bearer token.
func (s *MCPServer) AllHeaders() map[string]string {
	if s.Authorization == "" {
		return s.Headers
	}
	h := make(map[string]string, len(s.Headers)+1)
	for k, v := range s.Headers {
		h[k] = v
	}
	h["Authorization"] = "Bearer " + s.Authorization
	return h
}

// UnmarshalJSONFrom is UnmarshalJSON, the path of a type error placed
// below the filter's own (unmarshalPlaced).
func (f *MCPToolFilter) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return unmarshalPlaced(dec, f.UnmarshalJSON)
}

// UnmarshalJSON reads allowed_tools as a list of names or a filter.
func (f *MCPToolFilter) UnmarshalJSON(b []byte) error {
	var names []string
	if unmarshal(b, &names) == nil {
		*f = MCPToolFilter{ToolNames: names}
		if f.ToolNames == nil {
			f.ToolNames = []string{}
		}
		return nil
	}
	type wire MCPToolFilter
	return unmarshal(b, (*wire)(f))
}

// MarshalJSON writes require_approval as it came: a mode or the filters.
func (a MCPApproval) MarshalJSON() ([]byte, error) {
	if a.Always == nil && a.Never == nil {
		mode := a.Mode
		if mode == "" {
			mode = "always"
		}
		return json.Marshal(mode)
	}
	return json.Marshal(struct {
		Always *MCPToolFilter `json:"always,omitempty"`
		Never  *MCPToolFilter `json:"never,omitempty"`
	}{a.Always, a.Never})
}

// UnmarshalJSONFrom is UnmarshalJSON, the path of a type error placed
// below require_approval (unmarshalPlaced).
func (a *MCPApproval) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return unmarshalPlaced(dec, a.UnmarshalJSON)
}

// UnmarshalJSON reads require_approval as a mode or as filters.
func (a *MCPApproval) UnmarshalJSON(b []byte) error {
	*a = MCPApproval{}
	if isNull(b) {
		return nil
	}
	if unmarshal(b, &a.Mode) == nil {
		return nil
	}
	var w struct {
		Always *MCPToolFilter `json:"always"`
		Never  *MCPToolFilter `json:"never"`
	}
	if err := unmarshal(b, &w); err != nil {
		return fmt.Errorf("require_approval is \"always\", \"never\" or an object with always and never filters")
	}
	a.Always, a.Never = w.Always, w.Never
	return nil
}

// validateMCPServer checks an mcp tool at param; its label takes a name
// in names.
func validateMCPServer(s *MCPServer, param string, names map[string]bool) *Error {
	if s == nil {
		return Invalid(CodeMissingRequired, param+".server_label", "Missing required parameter: '%s.server_label'.", param)
	}
	if perr := claimName(s.ServerLabel, param+".server_label", names); perr != nil {
		return perr
	}
	switch s.RequireApproval.Mode {
	case "", "always", "never":
	default:
		return Invalid(CodeInvalidValue, param+".require_approval", "Invalid value: '%s'. Supported values are: 'always', 'never', or an object with 'always' and 'never' tool filters.", s.RequireApproval.Mode)
	}
	if s.ConnectorID != "" {
		return Invalid(CodeToolNotAvailable, param+".connector_id",
			"Connectors ('%s') are OpenAI's own MCP servers, which this server cannot reach: give a 'server_url', or the label of an MCP server this server's operator configured.", s.ConnectorID)
	}
	return nil
}

// MCP events.
const (
	EventMCPListToolsInProgress EventType = "response.mcp_list_tools.in_progress"
	EventMCPListToolsCompleted  EventType = "response.mcp_list_tools.completed"
	EventMCPListToolsFailed     EventType = "response.mcp_list_tools.failed"
	EventMCPCallInProgress      EventType = "response.mcp_call.in_progress"
	EventMCPCallCompleted       EventType = "response.mcp_call.completed"
	EventMCPCallFailed          EventType = "response.mcp_call.failed"
	EventMCPArgsDelta           EventType = "response.mcp_call_arguments.delta"
	EventMCPArgsDone            EventType = "response.mcp_call_arguments.done"
)

// MCPEvent is the progress of an mcp_list_tools or mcp_call item:
// response.mcp_list_tools.* and response.mcp_call.*.
type MCPEvent struct {
	EventHeader
	OutputIndex int    `json:"output_index"`
	ItemID      string `json:"item_id"`
}

// MCPArgsDeltaEvent is response.mcp_call_arguments.delta.
type MCPArgsDeltaEvent struct {
	EventHeader
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
}

// MCPArgsDoneEvent is response.mcp_call_arguments.done.
type MCPArgsDoneEvent struct {
	EventHeader
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Arguments   string `json:"arguments"`
}
