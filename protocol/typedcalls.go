package protocol

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// The typed calls: built-in client tools whose calls carry a structured
// payload instead of JSON-string arguments (a shell's action, a patch's
// operation, a computer action, a tool search's arguments), and the output
// items that answer them. The payloads are kept as the JSON they came as:
// tether routes these calls and pairs them with their outputs, and the
// client executes them.

// Typed call item types.
const (
	ItemShellCall            ItemType = "shell_call"
	ItemShellCallOutput      ItemType = "shell_call_output"
	ItemLocalShellCall       ItemType = "local_shell_call"
	ItemLocalShellCallOutput ItemType = "local_shell_call_output"
	ItemApplyPatchCall       ItemType = "apply_patch_call"
	ItemApplyPatchCallOutput ItemType = "apply_patch_call_output"
	ItemComputerCall         ItemType = "computer_call"
	ItemComputerCallOutput   ItemType = "computer_call_output"
	ItemToolSearchCall       ItemType = "tool_search_call"
	ItemToolSearchOutput     ItemType = "tool_search_output"
	ItemAdditionalTools      ItemType = "additional_tools"
)

// ShellCall is the model's call of a shell tool: action holds the commands
// ({"commands":[…],"timeout_ms","max_output_length"}).
type ShellCall struct {
	ID          string          `json:"id,omitempty"`
	CallID      string          `json:"call_id"`
	Action      json.RawMessage `json:"action"`
	Environment json.RawMessage `json:"environment,omitempty"`
	Status      ItemStatus      `json:"status,omitempty"`
	Agent       *AgentRef       `json:"agent,omitempty"`  // the multi-agent beta's sub-agent that made it
	Caller      *Caller         `json:"caller,omitempty"` // direct, or the program that made it (program.go)
}

// ShellCallOutput is what the commands of a shell call printed and how they
// ended ([{"stdout","stderr","outcome"}…]).
type ShellCallOutput struct {
	ID              string          `json:"id,omitempty"`
	CallID          string          `json:"call_id"`
	Output          json.RawMessage `json:"output"`
	MaxOutputLength *int            `json:"max_output_length,omitempty"`
	Status          ItemStatus      `json:"status,omitempty"`
	Caller          *Caller         `json:"caller,omitempty"` // as on the call
}

// LocalShellCall is the model's call of the legacy local_shell tool: action
// is {"type":"exec","command":[…],…}.
type LocalShellCall struct {
	ID     string          `json:"id,omitempty"`
	CallID string          `json:"call_id"`
	Action json.RawMessage `json:"action"`
	Status ItemStatus      `json:"status,omitempty"`
	Agent  *AgentRef       `json:"agent,omitempty"` // the multi-agent beta's sub-agent that made it
}

// LocalShellCallOutput answers a local_shell_call: its id names the call
// (its call_id, or its id), and output is a JSON string.
type LocalShellCallOutput struct {
	ID     string     `json:"id"`
	Output string     `json:"output"`
	Status ItemStatus `json:"status,omitempty"`
}

// ApplyPatchCall is the model's call of the apply_patch tool: operation is
// {"type":"create_file"|"update_file"|"delete_file","path","diff"}.
type ApplyPatchCall struct {
	ID        string          `json:"id,omitempty"`
	CallID    string          `json:"call_id"`
	Operation json.RawMessage `json:"operation"`
	Status    ItemStatus      `json:"status,omitempty"`
	Agent     *AgentRef       `json:"agent,omitempty"`  // the multi-agent beta's sub-agent that made it
	Caller    *Caller         `json:"caller,omitempty"` // direct, or the program that made it (program.go)
}

// ApplyPatchCallOutput says whether a patch applied ("completed" or
// "failed"), with an optional log.
type ApplyPatchCallOutput struct {
	ID     string     `json:"id,omitempty"`
	CallID string     `json:"call_id"`
	Status ItemStatus `json:"status"`
	Output *string    `json:"output,omitempty"`
	Caller *Caller    `json:"caller,omitempty"` // as on the call
}

// ComputerCall is the model's call of a computer-use tool: one action, or
// a batch of actions.
type ComputerCall struct {
	ID                  string          `json:"id,omitempty"`
	CallID              string          `json:"call_id"`
	Action              json.RawMessage `json:"action,omitempty"`
	Actions             json.RawMessage `json:"actions,omitempty"`
	PendingSafetyChecks json.RawMessage `json:"pending_safety_checks,omitempty"`
	Status              ItemStatus      `json:"status,omitempty"`
	Agent               *AgentRef       `json:"agent,omitempty"` // the multi-agent beta's sub-agent that made it
}

// ComputerCallOutput is the screenshot after a computer call's actions.
type ComputerCallOutput struct {
	ID                       string          `json:"id,omitempty"`
	CallID                   string          `json:"call_id"`
	Output                   json.RawMessage `json:"output"`
	AcknowledgedSafetyChecks json.RawMessage `json:"acknowledged_safety_checks,omitempty"`
	Status                   ItemStatus      `json:"status,omitempty"`
}

// ToolSearchCall is the model's search for deferred tools.
type ToolSearchCall struct {
	ID        string          `json:"id,omitempty"`
	CallID    string          `json:"call_id"`
	Execution string          `json:"execution,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Status    ItemStatus      `json:"status,omitempty"`
	Agent     *AgentRef       `json:"agent,omitempty"` // the multi-agent beta's sub-agent that made it
}

// ToolSearchOutput is the tools a client-executed tool search found; they
// join the tools the model may call.
type ToolSearchOutput struct {
	ID        string     `json:"id,omitempty"`
	CallID    string     `json:"call_id"`
	Execution string     `json:"execution,omitempty"`
	Status    ItemStatus `json:"status,omitempty"`
	Tools     []Tool     `json:"tools"`
}

// AdditionalTools adds tools in the middle of a conversation.
type AdditionalTools struct {
	ID    string `json:"id,omitempty"`
	Role  Role   `json:"role,omitempty"` // developer, the one role an input may give
	Tools []Tool `json:"tools"`
}

func (*ShellCall) ItemType() ItemType            { return ItemShellCall }
func (*ShellCallOutput) ItemType() ItemType      { return ItemShellCallOutput }
func (*LocalShellCall) ItemType() ItemType       { return ItemLocalShellCall }
func (*LocalShellCallOutput) ItemType() ItemType { return ItemLocalShellCallOutput }
func (*ApplyPatchCall) ItemType() ItemType       { return ItemApplyPatchCall }
func (*ApplyPatchCallOutput) ItemType() ItemType { return ItemApplyPatchCallOutput }
func (*ComputerCall) ItemType() ItemType         { return ItemComputerCall }
func (*ComputerCallOutput) ItemType() ItemType   { return ItemComputerCallOutput }
func (*ToolSearchCall) ItemType() ItemType       { return ItemToolSearchCall }
func (*ToolSearchOutput) ItemType() ItemType     { return ItemToolSearchOutput }
func (*AdditionalTools) ItemType() ItemType      { return ItemAdditionalTools }

func (i *ShellCall) ItemID() string            { return i.ID }
func (i *ShellCallOutput) ItemID() string      { return i.ID }
func (i *LocalShellCall) ItemID() string       { return i.ID }
func (i *LocalShellCallOutput) ItemID() string { return i.ID }
func (i *ApplyPatchCall) ItemID() string       { return i.ID }
func (i *ApplyPatchCallOutput) ItemID() string { return i.ID }
func (i *ComputerCall) ItemID() string         { return i.ID }
func (i *ComputerCallOutput) ItemID() string   { return i.ID }
func (i *ToolSearchCall) ItemID() string       { return i.ID }
func (i *ToolSearchOutput) ItemID() string     { return i.ID }
func (i *AdditionalTools) ItemID() string      { return i.ID }

type (
	wireShellCall            ShellCall
	wireShellCallOutput      ShellCallOutput
	wireLocalShellCall       LocalShellCall
	wireLocalShellCallOutput LocalShellCallOutput
	wireApplyPatchCall       ApplyPatchCall
	wireApplyPatchCallOutput ApplyPatchCallOutput
	wireComputerCall         ComputerCall
	wireComputerCallOutput   ComputerCallOutput
	wireToolSearchCall       ToolSearchCall
	wireToolSearchOutput     ToolSearchOutput
	wireAdditionalTools      AdditionalTools
)

func (i *ShellCall) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemShellCall), (*wireShellCall)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *ShellCall) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *ShellCallOutput) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemShellCallOutput), (*wireShellCallOutput)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *ShellCallOutput) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *LocalShellCall) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemLocalShellCall), (*wireLocalShellCall)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *LocalShellCall) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *LocalShellCallOutput) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemLocalShellCallOutput), (*wireLocalShellCallOutput)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *LocalShellCallOutput) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *ApplyPatchCall) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemApplyPatchCall), (*wireApplyPatchCall)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *ApplyPatchCall) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *ApplyPatchCallOutput) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemApplyPatchCallOutput), (*wireApplyPatchCallOutput)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *ApplyPatchCallOutput) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *ComputerCall) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemComputerCall), (*wireComputerCall)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *ComputerCall) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *ComputerCallOutput) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemComputerCallOutput), (*wireComputerCallOutput)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *ComputerCallOutput) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *ToolSearchCall) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemToolSearchCall), (*wireToolSearchCall)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *ToolSearchCall) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *ToolSearchOutput) MarshalJSONTo(enc *jsontext.Encoder) error {
	w := *i
	if w.Tools == nil {
		w.Tools = []Tool{}
	}
	return typedTo(enc, string(ItemToolSearchOutput), (*wireToolSearchOutput)(&w))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *ToolSearchOutput) MarshalJSON() ([]byte, error) { return Marshal(i) }

func (i *AdditionalTools) MarshalJSONTo(enc *jsontext.Encoder) error {
	w := *i
	if w.Tools == nil {
		w.Tools = []Tool{}
	}
	return typedTo(enc, string(ItemAdditionalTools), (*wireAdditionalTools)(&w))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *AdditionalTools) MarshalJSON() ([]byte, error) { return Marshal(i) }

// decodeTyped decodes the typed call and output items, or reports that typ
// is not one of them.
func decodeTyped(raw json.RawMessage, typ ItemType, param string) (Item, *Error, bool) {
	var it, wire any
	switch typ {
	case ItemShellCall:
		v := new(ShellCall)
		it, wire = v, (*wireShellCall)(v)
	case ItemShellCallOutput:
		v := new(ShellCallOutput)
		it, wire = v, (*wireShellCallOutput)(v)
	case ItemLocalShellCall:
		v := new(LocalShellCall)
		it, wire = v, (*wireLocalShellCall)(v)
	case ItemLocalShellCallOutput:
		v := new(LocalShellCallOutput)
		it, wire = v, (*wireLocalShellCallOutput)(v)
	case ItemApplyPatchCall:
		v := new(ApplyPatchCall)
		it, wire = v, (*wireApplyPatchCall)(v)
	case ItemApplyPatchCallOutput:
		v := new(ApplyPatchCallOutput)
		it, wire = v, (*wireApplyPatchCallOutput)(v)
	case ItemComputerCall:
		v := new(ComputerCall)
		it, wire = v, (*wireComputerCall)(v)
	case ItemComputerCallOutput:
		v := new(ComputerCallOutput)
		it, wire = v, (*wireComputerCallOutput)(v)
	case ItemToolSearchCall:
		v := new(ToolSearchCall)
		it, wire = v, (*wireToolSearchCall)(v)
	case ItemToolSearchOutput:
		v := new(ToolSearchOutput)
		it, wire = v, (*wireToolSearchOutput)(v)
	case ItemAdditionalTools:
		v := new(AdditionalTools)
		it, wire = v, (*wireAdditionalTools)(v)
	default:
		return nil, nil, false
	}
	if err := unmarshal(raw, wire); err != nil {
		return nil, Invalid(CodeInvalidType, param, "Invalid %s item: %s.", typ, jsonReason(err)), true
	}
	return it.(Item), nil, true
}

// validateTyped checks the fields a typed call or output must have.
func validateTyped(it Item, p string) *Error {
	need := func(ok bool, field string) *Error {
		if ok {
			return nil
		}
		return Invalid(CodeMissingRequired, p+"."+field, "Missing required parameter: '%s.%s'.", p, field)
	}
	var callID string
	var perr *Error
	switch it := it.(type) {
	case *ShellCall:
		callID, perr = it.CallID, need(!isNull(it.Action), "action")
	case *ShellCallOutput:
		callID, perr = it.CallID, need(!isNull(it.Output), "output")
	case *LocalShellCall:
		callID, perr = it.CallID, need(!isNull(it.Action), "action")
	case *LocalShellCallOutput:
		return validateCallID(it.ID, p+".id")
	case *ApplyPatchCall:
		callID, perr = it.CallID, need(!isNull(it.Operation), "operation")
	case *ApplyPatchCallOutput:
		callID = it.CallID
		if it.Status != StatusCompleted && it.Status != "failed" {
			perr = Invalid(CodeInvalidValue, p+".status", "Invalid '%s.status': '%s'. Supported values are: 'completed' and 'failed'.", p, it.Status)
		}
	case *ComputerCall:
		callID, perr = it.CallID, need(!isNull(it.Action) || !isNull(it.Actions), "action")
	case *ComputerCallOutput:
		callID, perr = it.CallID, need(!isNull(it.Output), "output")
	case *ToolSearchCall:
		callID = it.CallID
	case *ToolSearchOutput:
		callID = it.CallID
		if perr = validateTools(it.Tools); perr != nil {
			perr.Param = p + "." + perr.Param
		}
	case *AdditionalTools:
		if it.Role != "" && it.Role != RoleDeveloper {
			return Invalid(CodeInvalidValue, p+".role", "Invalid '%s.role': '%s'. Supported values are: 'developer'.", p, it.Role)
		}
		if perr := validateTools(it.Tools); perr != nil {
			perr.Param = p + "." + perr.Param
			return perr
		}
		return nil
	default:
		return nil
	}
	if perr != nil {
		return perr
	}
	return validateCallID(callID, p+".call_id")
}

// Shell call events: a shell_call's commands, each added, streamed and done
// (command_index counts them in the call's action).
const (
	EventShellCommandAdded EventType = "response.shell_call_command.added"
	EventShellCommandDelta EventType = "response.shell_call_command.delta"
	EventShellCommandDone  EventType = "response.shell_call_command.done"
)

// ShellCommandEvent is shell_call_command.added and .done (Command) and
// .delta (Delta).
type ShellCommandEvent struct {
	EventHeader
	OutputIndex  int     `json:"output_index"`
	CommandIndex int     `json:"command_index"`
	Command      *string `json:"command,omitempty"`
	Delta        *string `json:"delta,omitempty"`
}
