package protocol

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// ItemType names an item of input or output.
type ItemType string

// Item types.
const (
	ItemMessage            ItemType = "message"
	ItemFunctionCall       ItemType = "function_call"
	ItemFunctionCallOutput ItemType = "function_call_output"
	ItemReasoning          ItemType = "reasoning"
	ItemCompaction         ItemType = "compaction"
	ItemReference          ItemType = "item_reference"
)

// Role is a message author.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	RoleDeveloper Role = "developer"
)

// ItemStatus is the status of an output item.
type ItemStatus string

// Item statuses.
const (
	StatusInProgress ItemStatus = "in_progress"
	StatusCompleted  ItemStatus = "completed"
	StatusIncomplete ItemStatus = "incomplete"
)

// Item is one element of a conversation: a sealed union of this file's
// item types and those of the typed tools (typedcalls.go, customtool.go,
// websearch.go), MCP (mcp.go), the multi-agent beta (multiagent.go),
// programmatic tool calling (program.go) and configuration updates
// (configupdate.go).
type Item interface {
	ItemType() ItemType
	// ItemID is the item's id, "" when a client sent it without one.
	ItemID() string
}

// Message is a message from a user, the developer, the system or the assistant.
type Message struct {
	ID      string     `json:"id,omitempty"`
	Status  ItemStatus `json:"status,omitempty"`
	Role    Role       `json:"role"`
	Content Contents   `json:"content"`
	// Phase labels an assistant message as commentary or final_answer.
	Phase string `json:"phase,omitempty"`
	// Agent is the multi-agent beta's sub-agent that wrote it.
	Agent *AgentRef `json:"agent,omitempty"`
}

// FunctionCall is the model's call of a function tool.
type FunctionCall struct {
	ID     string `json:"id,omitempty"`
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Namespace is the namespace tool whose member Name is, "" for a
	// top-level function.
	Namespace string     `json:"namespace,omitempty"`
	Arguments string     `json:"arguments"`
	Status    ItemStatus `json:"status,omitempty"`
	Agent     *AgentRef  `json:"agent,omitempty"`  // the multi-agent beta's sub-agent that made it
	Caller    *Caller    `json:"caller,omitempty"` // direct, or the program that made it (program.go)
}

// FunctionCallOutput is the result of a function call, sent by the client.
type FunctionCallOutput struct {
	ID        string     `json:"id,omitempty"`
	CallID    string     `json:"call_id"`
	Namespace string     `json:"namespace,omitempty"` // as on the call, when the client sends it
	Output    ToolOutput `json:"output"`
	Status    ItemStatus `json:"status,omitempty"`
	Caller    *Caller    `json:"caller,omitempty"` // as on the call
}

// ToolOutput is a function call's output: a string, or content parts.
type ToolOutput struct {
	Text  string
	Parts Contents // non-nil when the output was an array
}

// Reasoning is a reasoning item.
type Reasoning struct {
	ID               string    `json:"id,omitempty"`
	Summary          Contents  `json:"summary"`
	Content          Contents  `json:"content,omitempty"`
	EncryptedContent *string   `json:"encrypted_content,omitempty"`
	Agent            *AgentRef `json:"agent,omitempty"` // a multi-agent response's sub-agent that reasoned
}

// Compaction is an opaque window produced by /v1/responses/compact. The
// server seals the compacted items in EncryptedContent and expands them when
// the item comes back as input.
type Compaction struct {
	ID               string `json:"id,omitempty"`
	EncryptedContent string `json:"encrypted_content"`
	CreatedBy        string `json:"created_by,omitempty"`
}

// ItemReferenceItem refers to an earlier item of the conversation by id.
type ItemReferenceItem struct {
	ID string `json:"id"`
}

func (*Message) ItemType() ItemType            { return ItemMessage }
func (*FunctionCall) ItemType() ItemType       { return ItemFunctionCall }
func (*FunctionCallOutput) ItemType() ItemType { return ItemFunctionCallOutput }
func (*Reasoning) ItemType() ItemType          { return ItemReasoning }
func (*Compaction) ItemType() ItemType         { return ItemCompaction }
func (*ItemReferenceItem) ItemType() ItemType  { return ItemReference }

func (i *Message) ItemID() string            { return i.ID }
func (i *FunctionCall) ItemID() string       { return i.ID }
func (i *FunctionCallOutput) ItemID() string { return i.ID }
func (i *Reasoning) ItemID() string          { return i.ID }
func (i *Compaction) ItemID() string         { return i.ID }
func (i *ItemReferenceItem) ItemID() string  { return i.ID }

type (
	wireMessage            Message
	wireFunctionCall       FunctionCall
	wireFunctionCallOutput FunctionCallOutput
	wireReasoning          Reasoning
	wireCompaction         Compaction
	wireItemReference      ItemReferenceItem
)

func (i *Message) MarshalJSONTo(enc *jsontext.Encoder) error {
	w := *i
	if w.Content == nil {
		w.Content = Contents{}
	}
	return typedTo(enc, string(ItemMessage), (*wireMessage)(&w))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *Message) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *FunctionCall) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemFunctionCall), (*wireFunctionCall)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *FunctionCall) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *FunctionCallOutput) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemFunctionCallOutput), (*wireFunctionCallOutput)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *FunctionCallOutput) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *Reasoning) MarshalJSONTo(enc *jsontext.Encoder) error {
	w := *i
	if w.Summary == nil {
		w.Summary = Contents{}
	}
	return typedTo(enc, string(ItemReasoning), (*wireReasoning)(&w))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *Reasoning) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *Compaction) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemCompaction), (*wireCompaction)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *Compaction) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *ItemReferenceItem) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemReference), (*wireItemReference)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *ItemReferenceItem) MarshalJSON() ([]byte, error) { return Marshal(i) }

// MarshalJSON writes a string, or an array when the output has parts.
func (o ToolOutput) MarshalJSONTo(enc *jsontext.Encoder) error {
	if o.Parts != nil {
		return marshalTo(enc, []Content(o.Parts))
	}
	return marshalTo(enc, o.Text)
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (o ToolOutput) MarshalJSON() ([]byte, error) { return Marshal(o) }

// String is the output as text: the string, or the text of its parts.
func (o ToolOutput) String() string {
	if o.Parts != nil {
		return o.Parts.Text()
	}
	return o.Text
}

// UnmarshalJSON lets Contents be decoded directly (server events, stored items).
func (cs *Contents) UnmarshalJSON(b []byte) error {
	out, err := decodeContents(b, "content", func(s string) Content { return &InputText{Text: s} })
	if err != nil {
		return err
	}
	*cs = out
	return nil
}

// UnmarshalJSON accepts a string or an array of content parts.
func (o *ToolOutput) UnmarshalJSON(b []byte) error {
	b = trimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		o.Parts = nil
		return unmarshal(b, &o.Text)
	}
	var parts Contents
	if err := parts.UnmarshalJSON(b); err != nil {
		return err
	}
	o.Text, o.Parts = "", parts
	return nil
}

// itemHead is the part of an item read to choose its Go type.
type itemHead struct {
	Type    *string         `json:"type"`
	Role    Role            `json:"role"`
	ID      string          `json:"id"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"`
}

// DecodeItem decodes one input or output item; param names it in errors
// (for example "input[3]"). A message may omit "type" (the easy input
// shape), and so may an item_reference (an object with an id and no role,
// as the API's ItemReferenceParam).
// A message's content may be a string; it becomes one input_text part (or
// output_text for an assistant).
func DecodeItem(raw json.RawMessage, param string) (Item, *Error) {
	if it, ok := scanFunctionItem(raw); ok {
		return it, nil
	}
	return decodeItem(raw, param)
}

// decodeItem is DecodeItem's general path.
func decodeItem(raw json.RawMessage, param string) (Item, *Error) {
	var head itemHead
	if err := unmarshal(raw, &head); err != nil {
		return nil, Invalid(CodeInvalidType, param, "Invalid item: expected an object with a 'type' field (%s).", jsonReason(err))
	}
	typ := ItemMessage
	switch {
	case head.Type != nil:
		typ = ItemType(*head.Type)
	case head.Role == "" && head.ID != "":
		typ = ItemReference
	case head.Role == "":
		return nil, Invalid(CodeMissingRequired, param+".type", "Missing required parameter: '%s.type'.", param)
	}
	if it, perr, ok := decodeTyped(raw, typ, param); ok {
		return it, perr
	}
	if it, perr, ok := decodeMultiAgent(raw, typ, param); ok {
		if perr != nil {
			return nil, perr
		}
		return it, nil
	}
	if it, perr, ok := decodeMCP(raw, typ, param); ok {
		if perr != nil {
			return nil, perr
		}
		return it, nil
	}
	if it, perr, ok := decodeProgram(raw, typ, param); ok {
		if perr != nil {
			return nil, perr
		}
		return it, nil
	}
	switch typ {
	case ItemMessage:
		return decodeMessage(raw, head, param)
	case ItemFunctionCall:
		fc := new(FunctionCall)
		if err := unmarshal(raw, fc); err != nil {
			return nil, Invalid(CodeInvalidType, param, "Invalid function_call item: %s.", jsonReason(err))
		}
		return fc, nil
	case ItemCustomToolCall:
		return decodeCustomToolCall(raw, param)
	case ItemCustomToolCallOutput:
		return decodeCustomToolCallOutput(raw, head, param)
	case ItemFunctionCallOutput:
		out := new(FunctionCallOutput)
		var w struct {
			ID        string     `json:"id"`
			CallID    string     `json:"call_id"`
			Namespace string     `json:"namespace"`
			Status    ItemStatus `json:"status"`
			Caller    *Caller    `json:"caller"`
		}
		if err := unmarshal(raw, &w); err != nil {
			return nil, Invalid(CodeInvalidType, param, "Invalid function_call_output item: %s.", jsonReason(err))
		}
		out.ID, out.CallID, out.Namespace, out.Status, out.Caller = w.ID, w.CallID, w.Namespace, w.Status, w.Caller
		var perr *Error
		if out.Output, perr = decodeToolOutput(head.Output, param+".output"); perr != nil {
			return nil, perr
		}
		return out, nil
	case ItemReasoning:
		return decodeReasoning(raw, param)
	case ItemCompaction:
		c := new(Compaction)
		if err := unmarshal(raw, c); err != nil {
			return nil, Invalid(CodeInvalidType, param, "Invalid compaction item: %s.", jsonReason(err))
		}
		return c, nil
	case ItemConfigurationUpdate:
		u := new(ConfigurationUpdate)
		if err := unmarshal(raw, (*wireConfigurationUpdate)(u)); err != nil {
			return nil, Invalid(CodeInvalidType, param, "Invalid configuration_update item: %s.", jsonReason(err))
		}
		return u, nil
	case ItemWebSearchCall:
		ws := new(WebSearchCall)
		if err := unmarshal(raw, ws); err != nil {
			return nil, Invalid(CodeInvalidType, param, "Invalid web_search_call item: %s.", jsonReason(err))
		}
		return ws, nil
	case ItemReference:
		r := new(ItemReferenceItem)
		if err := unmarshal(raw, r); err != nil {
			return nil, Invalid(CodeInvalidType, param, "Invalid item_reference: %s.", jsonReason(err))
		}
		return r, nil
	case "":
		return nil, Invalid(CodeMissingRequired, param+".type", "Missing required parameter: '%s.type'.", param)
	default:
		return nil, Invalid(CodeInvalidValue, param+".type", "Invalid value: '%s'. Supported item types are: 'message', 'function_call', 'function_call_output', 'custom_tool_call', 'custom_tool_call_output', 'shell_call', 'shell_call_output', 'local_shell_call', 'local_shell_call_output', 'apply_patch_call', 'apply_patch_call_output', 'computer_call', 'computer_call_output', 'tool_search_call', 'tool_search_output', 'additional_tools', 'configuration_update', 'reasoning', 'program', 'program_output', 'compaction', 'web_search_call', 'mcp_list_tools', 'mcp_call', 'mcp_approval_request', 'mcp_approval_response', 'multi_agent_call', 'multi_agent_call_output', 'agent_message' and 'item_reference'.", typ)
	}
}

func decodeMessage(raw json.RawMessage, head itemHead, param string) (Item, *Error) {
	var w struct {
		ID     string     `json:"id"`
		Status ItemStatus `json:"status"`
		Role   Role       `json:"role"`
		Phase  string     `json:"phase"`
		Agent  *AgentRef  `json:"agent"`
	}
	if err := unmarshal(raw, &w); err != nil {
		return nil, Invalid(CodeInvalidType, param, "Invalid message item: %s.", jsonReason(err))
	}
	if isNull(head.Content) {
		return nil, Invalid(CodeMissingRequired, param+".content", "Missing required parameter: '%s.content'.", param)
	}
	text := func(s string) Content { return &InputText{Text: s} }
	if w.Role == RoleAssistant {
		text = func(s string) Content { return &OutputText{Text: s, Annotations: []Annotation{}} }
	}
	content, perr := decodeContents(head.Content, param+".content", text)
	if perr != nil {
		return nil, perr
	}
	return &Message{ID: w.ID, Status: w.Status, Role: w.Role, Content: content, Phase: w.Phase, Agent: w.Agent}, nil
}

// decodeReasoning decodes the parts of a reasoning item itself, so that an
// error names the exact part ("input[0].summary[1].type").
func decodeReasoning(raw json.RawMessage, param string) (Item, *Error) {
	var w struct {
		ID               string          `json:"id"`
		Summary          json.RawMessage `json:"summary"`
		Content          json.RawMessage `json:"content"`
		EncryptedContent *string         `json:"encrypted_content"`
	}
	if err := unmarshal(raw, &w); err != nil {
		return nil, Invalid(CodeInvalidType, param, "Invalid reasoning item: %s.", jsonReason(err))
	}
	r := &Reasoning{ID: w.ID, EncryptedContent: w.EncryptedContent}
	text := func(s string) Content { return &InputText{Text: s} }
	var perr *Error
	if w.Summary != nil {
		if r.Summary, perr = decodeContents(w.Summary, param+".summary", text); perr != nil {
			return nil, perr
		}
	}
	if w.Content != nil {
		if r.Content, perr = decodeContents(w.Content, param+".content", text); perr != nil {
			return nil, perr
		}
	}
	return r, nil
}

// UserMessage is a user message of one text part, the usual input of a
// request.
func UserMessage(text string) *Message {
	return &Message{Role: RoleUser, Content: Contents{&InputText{Text: text}}}
}

// SetItemID sets an item's id. A server names the items a client sent
// without one when it keeps them (a conversation's items are listed and
// deleted by id).
func SetItemID(it Item, id string) {
	switch it := it.(type) {
	case *Message:
		it.ID = id
	case *FunctionCall:
		it.ID = id
	case *FunctionCallOutput:
		it.ID = id
	case *Reasoning:
		it.ID = id
	case *Compaction:
		it.ID = id
	case *ItemReferenceItem:
		it.ID = id
	case *CustomToolCall:
		it.ID = id
	case *CustomToolCallOutput:
		it.ID = id
	case *MCPListTools:
		it.ID = id
	case *MCPCall:
		it.ID = id
	case *MCPApprovalRequest:
		it.ID = id
	case *MCPApprovalResponse:
		it.ID = id
	case *ShellCall:
		it.ID = id
	case *ShellCallOutput:
		it.ID = id
	case *LocalShellCall:
		it.ID = id
	case *LocalShellCallOutput:
		it.ID = id
	case *ApplyPatchCall:
		it.ID = id
	case *ApplyPatchCallOutput:
		it.ID = id
	case *ComputerCall:
		it.ID = id
	case *ComputerCallOutput:
		it.ID = id
	case *ToolSearchCall:
		it.ID = id
	case *ToolSearchOutput:
		it.ID = id
	case *AdditionalTools:
		it.ID = id
	case *WebSearchCall:
		it.ID = id
	case *MultiAgentCall:
		it.ID = id
	case *MultiAgentCallOutput:
		it.ID = id
	case *AgentMessage:
		it.ID = id
	case *Program:
		it.ID = id
	case *ProgramOutput:
		it.ID = id
	case *ConfigurationUpdate:
		it.ID = id
	}
}
