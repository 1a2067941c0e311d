package protocol

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// The items of the hosted mcp tool, as OpenAI's Responses API has them: the
// tools a server listed, a call of one of them and its result, and the
// approval round trip of a call that needs it. A history that holds them
// (a conversation continued from OpenAI, or from a server that runs MCP)
// decodes, renders and round-trips; running MCP servers is the hosted
// tool's business.

// MCP item types.
const (
	ItemMCPListTools        ItemType = "mcp_list_tools"
	ItemMCPCall             ItemType = "mcp_call"
	ItemMCPApprovalRequest  ItemType = "mcp_approval_request"
	ItemMCPApprovalResponse ItemType = "mcp_approval_response"
)

// MCPListTools is the tools an MCP server listed, or why it could not.
type MCPListTools struct {
	ID          string        `json:"id,omitempty"`
	ServerLabel string        `json:"server_label"`
	Tools       []MCPToolInfo `json:"tools"`
	Error       *string       `json:"error,omitempty"`
}

// MCPToolInfo is one tool of a server's list.
type MCPToolInfo struct {
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// MCPCall is a call of a server's tool and, once done, its output or its
// error (kept as sent: a string, or an object from some servers).
type MCPCall struct {
	ID                string          `json:"id,omitempty"`
	ServerLabel       string          `json:"server_label"`
	Name              string          `json:"name"`
	Arguments         string          `json:"arguments"`
	Output            *string         `json:"output,omitempty"`
	Error             json.RawMessage `json:"error,omitempty"`
	ApprovalRequestID *string         `json:"approval_request_id,omitempty"`
	Status            ItemStatus      `json:"status,omitempty"`
	Agent             *AgentRef       `json:"agent,omitempty"` // a multi-agent response's sub-agent that called it
}

// MCPApprovalRequest asks the client whether a call may run.
type MCPApprovalRequest struct {
	ID          string    `json:"id,omitempty"`
	ServerLabel string    `json:"server_label"`
	Name        string    `json:"name"`
	Arguments   string    `json:"arguments"`
	Agent       *AgentRef `json:"agent,omitempty"` // a multi-agent response's sub-agent that called it
}

// MCPApprovalResponse is the client's answer to an approval request.
type MCPApprovalResponse struct {
	ID                string  `json:"id,omitempty"`
	ApprovalRequestID string  `json:"approval_request_id"`
	Approve           bool    `json:"approve"`
	Reason            *string `json:"reason,omitempty"`
}

func (*MCPListTools) ItemType() ItemType        { return ItemMCPListTools }
func (*MCPCall) ItemType() ItemType             { return ItemMCPCall }
func (*MCPApprovalRequest) ItemType() ItemType  { return ItemMCPApprovalRequest }
func (*MCPApprovalResponse) ItemType() ItemType { return ItemMCPApprovalResponse }

func (i *MCPListTools) ItemID() string        { return i.ID }
func (i *MCPCall) ItemID() string             { return i.ID }
func (i *MCPApprovalRequest) ItemID() string  { return i.ID }
func (i *MCPApprovalResponse) ItemID() string { return i.ID }

type (
	wireMCPListTools        MCPListTools
	wireMCPCall             MCPCall
	wireMCPApprovalRequest  MCPApprovalRequest
	wireMCPApprovalResponse MCPApprovalResponse
)

func (i *MCPListTools) MarshalJSONTo(enc *jsontext.Encoder) error {
	w := *i
	if w.Tools == nil {
		w.Tools = []MCPToolInfo{}
	}
	return typedTo(enc, string(ItemMCPListTools), (*wireMCPListTools)(&w))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *MCPListTools) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *MCPCall) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemMCPCall), (*wireMCPCall)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *MCPCall) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *MCPApprovalRequest) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemMCPApprovalRequest), (*wireMCPApprovalRequest)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *MCPApprovalRequest) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *MCPApprovalResponse) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemMCPApprovalResponse), (*wireMCPApprovalResponse)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *MCPApprovalResponse) MarshalJSON() ([]byte, error) { return Marshal(i) }

// decodeMCP decodes the MCP items; ok is false for any other type.
func decodeMCP(raw json.RawMessage, typ ItemType, param string) (Item, *Error, bool) {
	var it, wire any
	switch typ {
	case ItemMCPListTools:
		v := new(MCPListTools)
		it, wire = v, (*wireMCPListTools)(v)
	case ItemMCPCall:
		v := new(MCPCall)
		it, wire = v, (*wireMCPCall)(v)
	case ItemMCPApprovalRequest:
		v := new(MCPApprovalRequest)
		it, wire = v, (*wireMCPApprovalRequest)(v)
	case ItemMCPApprovalResponse:
		v := new(MCPApprovalResponse)
		it, wire = v, (*wireMCPApprovalResponse)(v)
	default:
		return nil, nil, false
	}
	if err := unmarshal(raw, wire); err != nil {
		return nil, Invalid(CodeInvalidType, param, "Invalid %s item: %s.", typ, jsonReason(err)), true
	}
	return it.(Item), validateMCP(it.(Item), param), true
}

// validateMCP checks the fields an MCP item must have.
func validateMCP(it Item, p string) *Error {
	need := func(ok bool, field string) *Error {
		if ok {
			return nil
		}
		return Invalid(CodeMissingRequired, p+"."+field, "Missing required parameter: '%s.%s'.", p, field)
	}
	switch it := it.(type) {
	case *MCPListTools:
		if perr := need(it.ServerLabel != "", "server_label"); perr != nil {
			return perr
		}
		for i, t := range it.Tools {
			if t.Name == "" {
				return Invalid(CodeMissingRequired, IndexParam(p+".tools", i)+".name", "Missing required parameter: '%s.name'.", IndexParam(p+".tools", i))
			}
		}
	case *MCPCall:
		if perr := need(it.ServerLabel != "", "server_label"); perr != nil {
			return perr
		}
		return need(it.Name != "", "name")
	case *MCPApprovalRequest:
		if perr := need(it.ServerLabel != "", "server_label"); perr != nil {
			return perr
		}
		return need(it.Name != "", "name")
	case *MCPApprovalResponse:
		return need(it.ApprovalRequestID != "", "approval_request_id")
	}
	return nil
}
