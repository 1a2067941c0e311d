package protocol

import "encoding/json"

// Call is what every call item the model samples has in common: what a tool
// is given to run, whatever the call's type.
type Call struct {
	Type      ItemType // the call item's type: function_call, custom_tool_call, shell_call, …
	ID        string   // the call item's id
	CallID    string
	Name      string
	Namespace string // the namespace tool Name is in, "" at the top level
	// Input is what the model wrote: a function's arguments (JSON), a
	// custom tool's input (text), a typed call's payload (JSON: a shell's
	// or computer's action, a patch's operation, a tool search's
	// arguments).
	Input  string
	Status ItemStatus // the call item's status, when it came from one
}

// Call is the pending call as a Call.
func (p PendingCall) Call() Call {
	typ := p.Type
	if typ == "" {
		typ = ItemFunctionCall
	}
	return Call{Type: typ, CallID: p.CallID, Name: p.Name, Namespace: p.Namespace, Input: p.Arguments + p.Input}
}

// CallOf is it as a Call, and whether it is a call item.
func CallOf(it Item) (Call, bool) {
	switch it := it.(type) {
	case *FunctionCall:
		if it != nil {
			return Call{Type: ItemFunctionCall, ID: it.ID, CallID: it.CallID, Name: it.Name, Namespace: it.Namespace, Input: it.Arguments, Status: it.Status}, true
		}
	case *CustomToolCall:
		if it != nil {
			return Call{Type: ItemCustomToolCall, ID: it.ID, CallID: it.CallID, Name: it.Name, Namespace: it.Namespace, Input: it.Input, Status: it.Status}, true
		}
	case *ShellCall:
		if it != nil {
			return Call{Type: ItemShellCall, ID: it.ID, CallID: it.CallID, Name: string(ToolShell), Input: string(it.Action), Status: it.Status}, true
		}
	case *LocalShellCall:
		if it != nil {
			return Call{Type: ItemLocalShellCall, ID: it.ID, CallID: it.CallID, Name: string(ToolLocalShell), Input: string(it.Action), Status: it.Status}, true
		}
	case *ApplyPatchCall:
		if it != nil {
			return Call{Type: ItemApplyPatchCall, ID: it.ID, CallID: it.CallID, Name: string(ToolApplyPatch), Input: string(it.Operation), Status: it.Status}, true
		}
	case *ComputerCall:
		if it != nil {
			in := it.Action
			if isNull(in) {
				in = it.Actions
			}
			return Call{Type: ItemComputerCall, ID: it.ID, CallID: it.CallID, Name: string(ToolComputer), Input: string(in), Status: it.Status}, true
		}
	case *ToolSearchCall:
		if it != nil {
			return Call{Type: ItemToolSearchCall, ID: it.ID, CallID: it.CallID, Name: string(ToolToolSearch), Input: string(it.Arguments), Status: it.Status}, true
		}
	case *MCPApprovalRequest:
		// The client answers an approval request as it answers a call,
		// naming the request's id: the request is the call, its id the
		// call_id.
		if it != nil {
			return Call{Type: ItemMCPApprovalRequest, ID: it.ID, CallID: it.ID, Name: it.Name, Namespace: it.ServerLabel, Input: it.Arguments}, true
		}
	}
	return Call{}, false
}

// AnswerOf is the call_id an output item answers and the type of call it
// answers (a function_call_output answers a function_call, a
// custom_tool_call_output a custom_tool_call), and whether it is an output
// item at all: the one rule that pairs outputs with calls.
func AnswerOf(it Item) (callID string, answers ItemType, ok bool) {
	switch it := it.(type) {
	case *FunctionCallOutput:
		if it != nil {
			return it.CallID, ItemFunctionCall, true
		}
	case *CustomToolCallOutput:
		if it != nil {
			return it.CallID, ItemCustomToolCall, true
		}
	case *ShellCallOutput:
		if it != nil {
			return it.CallID, ItemShellCall, true
		}
	case *LocalShellCallOutput:
		if it != nil {
			return it.ID, ItemLocalShellCall, true // its id names the call
		}
	case *ApplyPatchCallOutput:
		if it != nil {
			return it.CallID, ItemApplyPatchCall, true
		}
	case *ComputerCallOutput:
		if it != nil {
			return it.CallID, ItemComputerCall, true
		}
	case *ToolSearchOutput:
		if it != nil {
			return it.CallID, ItemToolSearchCall, true
		}
	case *MCPApprovalResponse:
		if it != nil {
			return it.ApprovalRequestID, ItemMCPApprovalRequest, true
		}
	}
	return "", "", false
}

// outputs maps each call type to the output type that answers it.
var outputs = map[ItemType]ItemType{
	ItemFunctionCall:   ItemFunctionCallOutput,
	ItemCustomToolCall: ItemCustomToolCallOutput,
	ItemShellCall:      ItemShellCallOutput,
	ItemLocalShellCall: ItemLocalShellCallOutput,
	ItemApplyPatchCall: ItemApplyPatchCallOutput,
	ItemComputerCall:   ItemComputerCallOutput,
	ItemToolSearchCall: ItemToolSearchOutput,

	ItemMCPApprovalRequest: ItemMCPApprovalResponse,
}

// OutputFor is the output type that answers a call of type call.
func OutputFor(call ItemType) ItemType { return outputs[call] }

// Names are the ids an output may name c by: its call_id, and for a local
// shell call (whose output's id names the call) its item id as well.
func (c Call) Names() []string {
	if c.Type == ItemLocalShellCall && c.ID != "" && c.ID != c.CallID {
		return []string{c.CallID, c.ID}
	}
	return []string{c.CallID}
}

// OutputMismatch refuses an output item, at param, that answers a call of
// another type.
func OutputMismatch(out Item, callID string, call ItemType, param string) *Error {
	return Invalid(CodeToolOutputMismatch, param+".type",
		"Invalid '%s.type': '%s' answers a %s, but the call '%s' is a %s: answer it with a %s.",
		param, out.ItemType(), outputAnswers(out), callID, call, OutputFor(call))
}

func outputAnswers(out Item) ItemType {
	_, answers, _ := AnswerOf(out)
	return answers
}

// ItemOf is the call item of c with status: the inverse of CallOf. A typed
// call's Input is its payload; one that is not JSON is kept as a JSON
// string, so that the item stays valid.
func ItemOf(c Call, status ItemStatus) Item {
	payload := json.RawMessage(c.Input)
	if c.Input != "" && !json.Valid(payload) {
		payload, _ = json.Marshal(c.Input)
	}
	if c.Input == "" {
		payload = json.RawMessage("{}")
	}
	switch c.Type {
	case ItemCustomToolCall:
		return &CustomToolCall{ID: c.ID, CallID: c.CallID, Name: c.Name, Namespace: c.Namespace, Input: c.Input, Status: status}
	case ItemShellCall:
		return &ShellCall{ID: c.ID, CallID: c.CallID, Action: payload, Status: status}
	case ItemLocalShellCall:
		return &LocalShellCall{ID: c.ID, CallID: c.CallID, Action: payload, Status: status}
	case ItemApplyPatchCall:
		return &ApplyPatchCall{ID: c.ID, CallID: c.CallID, Operation: payload, Status: status}
	case ItemComputerCall:
		return &ComputerCall{ID: c.ID, CallID: c.CallID, Action: payload, PendingSafetyChecks: json.RawMessage("[]"), Status: status}
	case ItemToolSearchCall:
		return &ToolSearchCall{ID: c.ID, CallID: c.CallID, Execution: "client", Arguments: payload, Status: status}
	case ItemMCPApprovalRequest:
		return &MCPApprovalRequest{ID: c.ID, ServerLabel: c.Namespace, Name: c.Name, Arguments: c.Input}
	case ItemMultiAgentCall:
		return &MultiAgentCall{ID: c.ID, CallID: c.CallID, Action: c.Name, Arguments: c.Input}
	default:
		return &FunctionCall{ID: c.ID, CallID: c.CallID, Name: c.Name, Namespace: c.Namespace, Arguments: c.Input, Status: status}
	}
}

// CallTypeOf is the item type of the calls of a client tool of type t:
// function_call for a function (or a namespace's), custom_tool_call,
// shell_call and so on; "" for a tool the client does not run.
func CallTypeOf(t ToolType) ItemType {
	switch t {
	case ToolFunction, ToolNamespace:
		return ItemFunctionCall
	case ToolCustom:
		return ItemCustomToolCall
	case ToolShell:
		return ItemShellCall
	case ToolLocalShell:
		return ItemLocalShellCall
	case ToolApplyPatch:
		return ItemApplyPatchCall
	case ToolComputer, ToolComputerUsePreview:
		return ItemComputerCall
	case ToolToolSearch:
		return ItemToolSearchCall
	}
	return ""
}
