package protocol

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// Custom tools take free text (or text their grammar accepts) instead of
// JSON arguments: the model's call is a custom_tool_call whose input
// streams as custom_tool_call_input events, and the client answers with a
// custom_tool_call_output.

// Custom tool item types.
const (
	ItemCustomToolCall       ItemType = "custom_tool_call"
	ItemCustomToolCallOutput ItemType = "custom_tool_call_output"
)

// Custom tool events.
const (
	EventCustomToolInputDelta EventType = "response.custom_tool_call_input.delta"
	EventCustomToolInputDone  EventType = "response.custom_tool_call_input.done"
)

// CustomToolCall is the model's call of a custom tool.
type CustomToolCall struct {
	ID        string     `json:"id,omitempty"`
	CallID    string     `json:"call_id"`
	Name      string     `json:"name"`
	Namespace string     `json:"namespace,omitempty"` // a namespace's custom tool
	Input     string     `json:"input"`
	Status    ItemStatus `json:"status,omitempty"`
	Agent     *AgentRef  `json:"agent,omitempty"`  // the multi-agent beta's sub-agent that made it
	Caller    *Caller    `json:"caller,omitempty"` // direct, or the program that made it (program.go)
}

// CustomToolCallOutput is the client's result of a custom tool call.
type CustomToolCallOutput struct {
	ID     string     `json:"id,omitempty"`
	CallID string     `json:"call_id"`
	Output ToolOutput `json:"output"`
	Caller *Caller    `json:"caller,omitempty"` // as on the call
}

func (*CustomToolCall) ItemType() ItemType       { return ItemCustomToolCall }
func (*CustomToolCallOutput) ItemType() ItemType { return ItemCustomToolCallOutput }
func (i *CustomToolCall) ItemID() string         { return i.ID }
func (i *CustomToolCallOutput) ItemID() string   { return i.ID }

type (
	wireCustomToolCall       CustomToolCall
	wireCustomToolCallOutput CustomToolCallOutput
)

func (i *CustomToolCall) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemCustomToolCall), (*wireCustomToolCall)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *CustomToolCall) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *CustomToolCallOutput) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemCustomToolCallOutput), (*wireCustomToolCallOutput)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *CustomToolCallOutput) MarshalJSON() ([]byte, error) { return Marshal(i) }

// CustomToolInputDeltaEvent is custom_tool_call_input.delta.
type CustomToolInputDeltaEvent struct {
	EventHeader
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
}

// CustomToolInputDoneEvent is custom_tool_call_input.done.
type CustomToolInputDoneEvent struct {
	EventHeader
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Input       string `json:"input"`
}

func decodeCustomToolCall(raw json.RawMessage, param string) (Item, *Error) {
	c := new(CustomToolCall)
	if err := unmarshal(raw, (*wireCustomToolCall)(c)); err != nil {
		return nil, Invalid(CodeInvalidType, param, "Invalid custom_tool_call item: %s.", jsonReason(err))
	}
	return c, nil
}

func decodeCustomToolCallOutput(raw json.RawMessage, head itemHead, param string) (Item, *Error) {
	var w struct {
		ID     string  `json:"id"`
		CallID string  `json:"call_id"`
		Caller *Caller `json:"caller"`
	}
	if err := unmarshal(raw, &w); err != nil {
		return nil, Invalid(CodeInvalidType, param, "Invalid custom_tool_call_output item: %s.", jsonReason(err))
	}
	out, perr := decodeToolOutput(head.Output, param+".output")
	if perr != nil {
		return nil, perr
	}
	return &CustomToolCallOutput{ID: w.ID, CallID: w.CallID, Output: out, Caller: w.Caller}, nil
}

// decodeToolOutput decodes a tool output: a string, or an array of input
// content parts. It is required.
func decodeToolOutput(raw json.RawMessage, param string) (ToolOutput, *Error) {
	if isNull(raw) {
		return ToolOutput{}, Invalid(CodeMissingRequired, param, "Missing required parameter: '%s'.", param)
	}
	o := trimSpace(raw)
	if o[0] == '"' {
		var out ToolOutput
		if err := unmarshal(o, &out.Text); err != nil {
			return ToolOutput{}, Invalid(CodeInvalidType, param, "Invalid output: %s.", jsonReason(err))
		}
		return out, nil
	}
	parts, perr := decodeContents(o, param, func(s string) Content { return &InputText{Text: s} })
	if perr != nil {
		return ToolOutput{}, perr
	}
	return ToolOutput{Parts: parts}, nil
}

// validateToolOutputParts checks that a tool output's parts are input
// content.
func validateToolOutputParts(parts Contents, p string, item ItemType) *Error {
	for j, c := range parts {
		switch c.ContentType() {
		case ContentInputText, ContentInputImage, ContentInputFile, ContentInputVideo:
		default:
			return Invalid(CodeInvalidValue, IndexParam(p+".output", j)+".type", "Invalid content type '%s' in a %s: expected input_text, input_image, input_file or input_video.", c.ContentType(), item)
		}
	}
	return nil
}
