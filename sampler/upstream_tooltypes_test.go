package sampler

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// TestResponsesUpstreamToolTypes: a Responses upstream is offered
// namespaces and custom tools as they were sent, gets namespaced and custom
// calls back in its history, and its namespaced and custom calls come out
// as such.
func TestResponsesUpstreamToolTypes(t *testing.T) {
	t.Parallel()
	ns := protocol.Tool{Type: protocol.ToolNamespace, Name: "agents", Raw: json.RawMessage(`{"type":"namespace","name":"agents","description":"d","tools":[{"type":"function","name":"wait"}]}`)}
	custom := protocol.Tool{Type: protocol.ToolCustom, Name: "patch", Raw: json.RawMessage(`{"type":"custom","name":"patch"}`)}
	b, err := responsesBody("m", &Request{Tools: []protocol.Tool{ns, custom}, Items: protocol.Items{
		&protocol.FunctionCall{CallID: "call_1", Name: "wait", Namespace: "agents", Arguments: "{}"},
		&protocol.CustomToolCall{CallID: "call_2", Name: "patch", Input: "*** Begin Patch"},
		&protocol.CustomToolCallOutput{CallID: "call_2", Output: protocol.ToolOutput{Text: "ok"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{string(ns.Raw), string(custom.Raw), `"namespace":"agents"`, `{"type":"custom_tool_call","call_id":"call_2","name":"patch","input":"*** Begin Patch"}`, `"type":"custom_tool_call_output"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("body lacks %s:\n%s", want, b)
		}
	}
	stream := respStream(
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","call_id":"call_3","name":"wait","namespace":"agents","arguments":""}}`,
		`{"type":"response.function_call_arguments.delta","output_index":0,"delta":"{}"}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","call_id":"call_3","name":"wait","namespace":"agents","arguments":"{}","status":"completed"}}`,
		`{"type":"response.output_item.added","output_index":1,"item":{"type":"custom_tool_call","call_id":"call_4","name":"patch","input":""}}`,
		`{"type":"response.custom_tool_call_input.delta","output_index":1,"delta":"*** Begin"}`,
		`{"type":"response.output_item.done","output_index":1,"item":{"type":"custom_tool_call","call_id":"call_4","name":"patch","input":"*** Begin Patch","status":"completed"}}`,
		`{"type":"response.completed","response":{"status":"completed"}}`)
	var ds []Delta
	if _, err := decodeResponsesStream(strings.NewReader(stream), func(d Delta) { ds = append(ds, d) }); err != nil {
		t.Fatal(err)
	}
	if err := wellFormed(ds); err != nil {
		t.Fatal(err)
	}
	if got := summary(ds); got != "[wait {}][patch *** Begin Patch]" {
		t.Errorf("parts %s", got)
	}
	var starts []Delta
	for _, d := range ds {
		if d.Kind == CallStart {
			starts = append(starts, d)
		}
	}
	if len(starts) != 2 || starts[0].Namespace != "agents" || starts[0].CallType != "" || starts[1].CallType != protocol.ItemCustomToolCall {
		t.Errorf("call starts %+v", starts)
	}
}

// TestChatUpstreamToolTypes: a chat upstream is offered a namespace's
// members as "NS__NAME" functions and a custom tool as a function of one
// input string, sees such calls in its history under those names, and its
// calls of them come out as the namespaced function and the custom tool
// call, with the input decoded.
func TestChatUpstreamToolTypes(t *testing.T) {
	t.Parallel()
	tools := []protocol.Tool{
		{Type: protocol.ToolFunction, Name: "f"},
		{Type: protocol.ToolNamespace, Name: "agents", Tools: []protocol.Tool{{Type: protocol.ToolFunction, Name: "wait"}}},
		{Type: protocol.ToolCustom, Name: "patch"},
	}
	req := &Request{Tools: tools, Items: protocol.Items{
		&protocol.FunctionCall{CallID: "call_1", Name: "wait", Namespace: "agents", Arguments: "{}"},
		&protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "ok"}},
		&protocol.CustomToolCall{CallID: "call_2", Name: "patch", Input: "*** Begin Patch"},
		&protocol.CustomToolCallOutput{CallID: "call_2", Output: protocol.ToolOutput{Text: "done"}},
	}}
	b, err := chatBody("m", req)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name":"f"`, `"name":"agents__wait"`, `"name":"patch"`, `"required":["input"]`,
		`"name":"agents__wait","arguments":"{}"`, `"name":"patch","arguments":"{\"input\":\"*** Begin Patch\"}"`, `"tool_call_id":"call_2"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("body lacks %s:\n%s", want, b)
		}
	}
	_, names := chatFunctions(tools, protocol.ToolChoice{})
	var ds []Delta
	stream := sse(callPiece(0, "call_3", "agents__wait", `{"ids":`), callPiece(0, "", "", `[]}`),
		callPiece(1, "call_4", "patch", `{"input":"*** Begin`), callPiece(1, "", "", ` Patch"}`), finishChunk("tool_calls"), "[DONE]")
	if _, err := decodeChatStream(strings.NewReader(stream), names.mapBack(func(d Delta) { ds = append(ds, d) })); err != nil {
		t.Fatal(err)
	}
	if err := wellFormed(ds); err != nil {
		t.Fatal(err)
	}
	if got := summary(ds); got != `[wait {"ids":[]}][patch *** Begin Patch]` {
		t.Errorf("parts %s", got)
	}
	for _, d := range ds {
		if d.Kind == CallStart && (d.Name == "wait" && d.Namespace != "agents" || d.Name == "patch" && d.CallType != protocol.ItemCustomToolCall) {
			t.Errorf("call start %+v", d)
		}
	}
}
