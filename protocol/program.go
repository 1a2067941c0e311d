package protocol

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// Programmatic tool calling, as OpenAI's Responses API has it: the model
// writes a program (a program item: JavaScript, and an opaque fingerprint
// its server replays it by), a hosted tool runs it, the tool calls the
// program makes name it as their caller, and a program_output holds what
// it returned. tether runs no programs (programmatic_tool_calling is
// refused as a tool); a history from a server that does (a conversation
// continued from OpenAI) decodes, renders and goes back as it came, the
// fingerprint byte for byte: that server needs it to replay the program.

// Programmatic tool calling item types.
const (
	ItemProgram       ItemType = "program"
	ItemProgramOutput ItemType = "program_output"
)

// Program is a program the model wrote for programmatic tool calling.
type Program struct {
	ID          string `json:"id"`
	CallID      string `json:"call_id"`
	Code        string `json:"code"`
	Fingerprint string `json:"fingerprint"`
}

// ProgramOutput is what a program returned, and how it ended: completed or
// incomplete.
type ProgramOutput struct {
	ID     string     `json:"id"`
	CallID string     `json:"call_id"`
	Result string     `json:"result"`
	Status ItemStatus `json:"status"`
}

func (*Program) ItemType() ItemType       { return ItemProgram }
func (*ProgramOutput) ItemType() ItemType { return ItemProgramOutput }
func (i *Program) ItemID() string         { return i.ID }
func (i *ProgramOutput) ItemID() string   { return i.ID }

type (
	wireProgram       Program
	wireProgramOutput ProgramOutput
)

func (i *Program) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemProgram), (*wireProgram)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *Program) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *ProgramOutput) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemProgramOutput), (*wireProgramOutput)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *ProgramOutput) MarshalJSON() ([]byte, error) { return Marshal(i) }

// decodeProgram decodes a program or a program_output, or reports that typ
// is neither. Every member the API requires must be there: a program's
// code and an output's result may be empty strings, but an item without
// them is not one the API made.
func decodeProgram(raw json.RawMessage, typ ItemType, param string) (Item, *Error, bool) {
	if typ != ItemProgram && typ != ItemProgramOutput {
		return nil, nil, false
	}
	var w struct {
		ID          *string `json:"id"`
		CallID      *string `json:"call_id"`
		Code        *string `json:"code"`
		Fingerprint *string `json:"fingerprint"`
		Result      *string `json:"result"`
		Status      *string `json:"status"`
	}
	if err := unmarshal(raw, &w); err != nil {
		return nil, Invalid(CodeInvalidType, param, "Invalid %s item: %s.", typ, jsonReason(err)), true
	}
	type member struct {
		name string
		v    *string // nil when absent or null
	}
	required := []member{{"id", w.ID}, {"call_id", w.CallID}, {"code", w.Code}, {"fingerprint", w.Fingerprint}}
	if typ == ItemProgramOutput {
		required[2], required[3] = member{"result", w.Result}, member{"status", w.Status}
	}
	for _, m := range required {
		if m.v == nil {
			return nil, Invalid(CodeMissingRequired, param+"."+m.name, "Missing required parameter: '%s.%s'.", param, m.name), true
		}
	}
	if typ == ItemProgram {
		return &Program{ID: *w.ID, CallID: *w.CallID, Code: *w.Code, Fingerprint: *w.Fingerprint}, nil, true
	}
	return &ProgramOutput{ID: *w.ID, CallID: *w.CallID, Result: *w.Result, Status: ItemStatus(*w.Status)}, nil, true
}

// validateProgram checks a program's or a program output's values: ids
// and the fingerprint are never empty, and an output ended one of two ways.
func validateProgram(it Item, p string) *Error {
	var id, callID string
	switch it := it.(type) {
	case *Program:
		id, callID = it.ID, it.CallID
		if it.Fingerprint == "" {
			return Invalid(CodeMissingRequired, p+".fingerprint", "Missing required parameter: '%s.fingerprint'.", p)
		}
	case *ProgramOutput:
		id, callID = it.ID, it.CallID
		if it.Status != StatusCompleted && it.Status != StatusIncomplete {
			return Invalid(CodeInvalidValue, p+".status", "Invalid '%s.status': '%s'. Supported values are: 'completed' and 'incomplete'.", p, it.Status)
		}
	}
	if id == "" {
		return Invalid(CodeMissingRequired, p+".id", "Missing required parameter: '%s.id'.", p)
	}
	return validateCallID(callID, p+".call_id")
}

// CallerType says what made a tool call.
type CallerType string

// Caller types.
const (
	CallerDirect  CallerType = "direct"  // the model, in a step of its own
	CallerProgram CallerType = "program" // a program the model wrote (CallerID is its call_id)
)

// Caller is what made a tool call, on the call and on its output. A call
// a program made is answered as any other; the caller is kept so that a
// history goes back to the server that ran the program as it came.
type Caller struct {
	Type     CallerType `json:"type"`
	CallerID string     `json:"caller_id,omitempty"`
}

// callerOf is the caller an item names, nil for none (or an item that
// has no caller).
func callerOf(it Item) *Caller {
	switch it := it.(type) {
	case *FunctionCall:
		return it.Caller
	case *FunctionCallOutput:
		return it.Caller
	case *CustomToolCall:
		return it.Caller
	case *CustomToolCallOutput:
		return it.Caller
	case *ShellCall:
		return it.Caller
	case *ShellCallOutput:
		return it.Caller
	case *ApplyPatchCall:
		return it.Caller
	case *ApplyPatchCallOutput:
		return it.Caller
	}
	return nil
}

// validateCaller checks an item's caller, at p.caller.
func validateCaller(c *Caller, p string) *Error {
	if c == nil {
		return nil
	}
	switch c.Type {
	case CallerDirect:
	case CallerProgram:
		if c.CallerID == "" {
			return Invalid(CodeMissingRequired, p+".caller.caller_id", "Missing required parameter: '%s.caller.caller_id'.", p)
		}
	case "":
		return Invalid(CodeMissingRequired, p+".caller.type", "Missing required parameter: '%s.caller.type'.", p)
	default:
		return Invalid(CodeInvalidValue, p+".caller.type", "Invalid '%s.caller.type': '%s'. Supported values are: 'direct' and 'program'.", p, c.Type)
	}
	return nil
}
