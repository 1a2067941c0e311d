package protocol

import (
	"encoding/json"
)

// Function calls and their outputs are most of an agent's context, and
// their outputs most of its bytes: they are read (scanFunctionItem) and
// written (appendFunctionItem) here without the codec's reflection, in
// one pass over each string, with the codec's bytes and meaning
// (FuzzScanAppend, FuzzFunctionItemEncoding). A shape these do not take
// whole goes the codec's way.

// scanFunctionItem reads a function_call (type, id, call_id, name,
// namespace, arguments, status) or a function_call_output whose output is
// a string (type, id, call_id, namespace, output, status), each member
// once: the items an agent's context is mostly made of, as a client
// appends them and as a journal's snapshot holds them.
func scanFunctionItem(raw json.RawMessage) (Item, bool) {
	s := deltaScanner{b: raw}
	it, ok := s.functionItem()
	s.space()
	if !ok || s.i != len(s.b) {
		return nil, false
	}
	return it, true
}

// functionItem reads the object scanFunctionItem reads, where it is a
// value among others (an append's input). A member named twice is not
// taken.
func (s *deltaScanner) functionItem() (Item, bool) {
	var typ, id, callID, name, namespace, arguments, output, status string
	var seen uint8
	ok := s.members(func(key []byte) bool {
		var ok bool
		var bit uint8
		switch string(key) { // compared without a copy
		case "type": // one of two names: read in place, not copied (an escape in it takes the codec's path)
			typ, ok = s.itemType()
			bit = 1 << 0
		case "id":
			id, ok = s.text()
			bit = 1 << 1
		case "call_id":
			callID, ok = s.text()
			bit = 1 << 2
		case "namespace":
			namespace, ok = s.text()
			bit = 1 << 3
		case "status":
			status, ok = s.text()
			bit = 1 << 4
		case "name":
			name, ok = s.text()
			bit = 1 << 5
		case "arguments":
			arguments, ok = s.text()
			bit = 1 << 6
		case "output":
			output, ok = s.text()
			bit = 1 << 7
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return ok
	})
	hasName, hasArguments, hasOutput := seen&(1<<5) != 0, seen&(1<<6) != 0, seen&(1<<7) != 0
	switch {
	case !ok:
		return nil, false
	case typ == string(ItemFunctionCall) && !hasOutput:
		return &FunctionCall{ID: id, CallID: callID, Name: name, Namespace: namespace, Arguments: arguments, Status: ItemStatus(status)}, true
	case typ == string(ItemFunctionCallOutput) && hasOutput && !hasName && !hasArguments:
		return &FunctionCallOutput{ID: id, CallID: callID, Namespace: namespace, Output: ToolOutput{Text: output}, Status: ItemStatus(status)}, true
	}
	return nil, false
}

// itemType reads a string that is a function item's type, without a
// copy; ok is false for any other, or one with an escape.
func (s *deltaScanner) itemType() (string, bool) {
	raw, escaped, ok := s.raw()
	switch {
	case !ok || escaped:
		return "", false
	case string(raw) == string(ItemFunctionCall):
		return string(ItemFunctionCall), true
	case string(raw) == string(ItemFunctionCallOutput):
		return string(ItemFunctionCallOutput), true
	}
	return "", false
}

// appendFunctionItem appends a function call, or a function call output
// whose output is a string, as the codec writes it; ok is false (and what
// it appended is to be dropped) for any other value, or a string only the
// codec escapes (appendPlain).
func appendFunctionItem(b []byte, v any) (_ []byte, ok bool) {
	switch it := v.(type) {
	case *FunctionCall:
		if it == nil || it.Agent != nil || it.Caller != nil { // a sub-agent's, a program's: the codec's way
			return b, false
		}
		b = append(b, `{"type":"function_call"`...)
		b, ok = appendMember(b, `,"id":`, it.ID, true, true)
		b, ok = appendMember(b, `,"call_id":`, it.CallID, false, ok)
		b, ok = appendMember(b, `,"name":`, it.Name, false, ok)
		b, ok = appendMember(b, `,"namespace":`, it.Namespace, true, ok)
		b, ok = appendMember(b, `,"arguments":`, it.Arguments, false, ok)
		b, ok = appendMember(b, `,"status":`, string(it.Status), true, ok)
	case *FunctionCallOutput:
		if it == nil || it.Output.Parts != nil || it.Caller != nil {
			return b, false
		}
		b = append(b, `{"type":"function_call_output"`...)
		b, ok = appendMember(b, `,"id":`, it.ID, true, true)
		b, ok = appendMember(b, `,"call_id":`, it.CallID, false, ok)
		b, ok = appendMember(b, `,"namespace":`, it.Namespace, true, ok)
		b, ok = appendMember(b, `,"output":`, it.Output.Text, false, ok)
		b, ok = appendMember(b, `,"status":`, string(it.Status), true, ok)
	default:
		return b, false
	}
	return append(b, '}'), ok
}

// appendMember appends a string member (its name, colon included, as
// name), unless it is empty and omitempty.
func appendMember(b []byte, name, s string, omitempty, ok bool) ([]byte, bool) {
	if omitempty && s == "" {
		return b, ok
	}
	return appendPlain(append(b, name...), s, ok)
}

// functionItemSize is room enough for most of v's encodings if it is a
// function item, 0 otherwise.
func functionItemSize(v any) int {
	switch it := v.(type) {
	case *FunctionCall:
		if it != nil {
			return 128 + len(it.ID) + len(it.CallID) + len(it.Name) + len(it.Namespace) + len(it.Arguments)*9/8
		}
	case *FunctionCallOutput:
		if it != nil {
			return 128 + len(it.ID) + len(it.CallID) + len(it.Namespace) + len(it.Output.Text)*9/8
		}
	}
	return 0
}
