package sampler

import (
	"encoding/json"

	"github.com/tether-run/tether/protocol"
)

// Chat Completions has functions only. A namespace's member is offered to a
// chat upstream as the function "NAMESPACE__NAME", a custom tool as a
// function of one string argument, input; chatNames maps the calls back:
// a namespaced function_call, a custom_tool_call with the input decoded.
// (Built-in client tools such as shell are not offered over chat.)

// chatSep joins a namespace and a member's name into one chat function
// name (tool names have letters, digits, '_' and '-').
const chatSep = "__"

// chatTarget is what a chat function name stands for.
type chatTarget struct {
	namespace, name string
	custom          bool
}

// chatNames are the chat functions standing for namespaces' members and
// custom tools, by chat name.
type chatNames map[string]chatTarget

// chatFunctions are the functions a chat upstream is offered for the
// namespaces' members and the custom tools among tools that choice allows,
// and their names.
func chatFunctions(tools []protocol.Tool, choice protocol.ToolChoice) ([]protocol.Tool, chatNames) {
	names := chatNames{}
	var out []protocol.Tool
	customParams := json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"the tool's input, as free text"}},"required":["input"]}`)
	add := func(namespace string, t protocol.Tool) {
		if !choice.Allows(t) {
			return
		}
		chat := chatName(namespace, t.Name)
		switch t.Type {
		case protocol.ToolFunction:
			if namespace == "" {
				return // offered as itself
			}
			names[chat] = chatTarget{namespace: namespace, name: t.Name}
			t.Raw = nil
		case protocol.ToolCustom:
			names[chat] = chatTarget{namespace: namespace, name: t.Name, custom: true}
			desc := "Takes free text as its input."
			if t.Description != nil {
				desc = *t.Description + " " + desc
			}
			t = protocol.Tool{Type: protocol.ToolFunction, Description: &desc, Parameters: customParams}
		default:
			return
		}
		t.Name = chat
		out = append(out, t)
	}
	for _, t := range tools {
		if t.Type == protocol.ToolNamespace {
			for _, m := range t.Tools {
				add(t.Name, m)
			}
			continue
		}
		add("", t)
	}
	return out, names
}

// chatName is the chat function name of a call in the history.
func chatName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + chatSep + name
}

// mapBack wraps emit: calls of the chat functions in names come out as the
// namespaced functions and custom tools they stand for. A custom tool's
// arguments ({"input": …}) are held until the call ends and emitted as its
// input in one delta.
func (names chatNames) mapBack(emit func(Delta)) func(Delta) {
	if len(names) == 0 {
		return emit
	}
	var held []byte
	var target chatTarget
	var open bool
	return func(d Delta) {
		if d.Kind == CallStart {
			target, open = names[d.Name]
			held = held[:0]
		}
		if !open || d.CallID == "" && d.Kind != CallStart {
			emit(d)
			return
		}
		d.Name, d.Namespace = target.name, target.namespace
		if !target.custom {
			emit(d)
			if d.Kind == PartEnd {
				open = false
			}
			return
		}
		d.CallType = protocol.ItemCustomToolCall
		switch d.Kind {
		case CallStart:
			emit(d)
		case ArgsDelta:
			held = append(held, d.Text...)
		case PartEnd:
			var args struct {
				Input string `json:"input"`
			}
			if json.Unmarshal(held, &args) != nil {
				args.Input = string(held) // not the JSON asked for: the text as it came
			}
			if args.Input != "" {
				emit(Delta{Kind: ArgsDelta, Text: args.Input, CallID: d.CallID, Name: d.Name, Namespace: d.Namespace, CallType: d.CallType})
			}
			emit(d)
			open = false
		}
	}
}
