package protocol

// Call is what every call item the model samples has in common: what a tool
// is given to run, whatever the call's type.
type Call struct {
	Type      ItemType // ItemFunctionCall or ItemCustomToolCall
	ID        string   // the call item's id
	CallID    string
	Name      string
	Namespace string // the namespace tool Name is in, "" at the top level
	// Input is what the model wrote: a function's arguments (JSON), a
	// custom tool's input (text).
	Input string
}

// CallOf is it as a Call, and whether it is a call item.
func CallOf(it Item) (Call, bool) {
	switch it := it.(type) {
	case *FunctionCall:
		if it != nil {
			return Call{Type: ItemFunctionCall, ID: it.ID, CallID: it.CallID, Name: it.Name, Namespace: it.Namespace, Input: it.Arguments}, true
		}
	case *CustomToolCall:
		if it != nil {
			return Call{Type: ItemCustomToolCall, ID: it.ID, CallID: it.CallID, Name: it.Name, Namespace: it.Namespace, Input: it.Input}, true
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
	}
	return "", "", false
}

// OutputFor is the output type that answers a call of type call.
func OutputFor(call ItemType) ItemType {
	if call == ItemCustomToolCall {
		return ItemCustomToolCallOutput
	}
	return ItemFunctionCallOutput
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
