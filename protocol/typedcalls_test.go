package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/responses"

	"github.com/tether-run/tether/protocol"
)

// typedItems are the typed calls and outputs in the shapes the API gives
// them (openai-go v3.99.0's types).
var typedItems = []string{
	`{"type":"shell_call","id":"sh_1","call_id":"call_1","action":{"commands":["ls -la"],"timeout_ms":10000,"max_output_length":4096},"status":"completed"}`,
	`{"type":"shell_call_output","call_id":"call_1","output":[{"stdout":"a.go\n","stderr":"","outcome":{"type":"exit","exit_code":0}}],"max_output_length":4096}`,
	`{"type":"local_shell_call","id":"lsh_1","call_id":"call_2","action":{"type":"exec","command":["ls"],"env":{}},"status":"completed"}`,
	`{"type":"local_shell_call_output","id":"call_2","output":"{\"output\":\"a.go\\n\"}"}`,
	`{"type":"apply_patch_call","id":"apc_1","call_id":"call_3","operation":{"type":"create_file","path":"hello.txt","diff":"+hello\n"},"status":"completed"}`,
	`{"type":"apply_patch_call_output","call_id":"call_3","status":"completed","output":"created hello.txt"}`,
	`{"type":"computer_call","id":"cu_1","call_id":"call_4","action":{"type":"click","x":10,"y":20,"button":"left"},"pending_safety_checks":[],"status":"completed"}`,
	`{"type":"computer_call_output","call_id":"call_4","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,AAAA"}}`,
	`{"type":"tool_search_call","id":"ts_1","call_id":"call_5","execution":"client","arguments":{"query":"crm"},"status":"completed"}`,
	`{"type":"tool_search_output","call_id":"call_5","execution":"client","status":"completed","tools":[{"type":"function","name":"list_orders","description":null,"parameters":{"type":"object"},"strict":null}]}`,
	`{"type":"additional_tools","tools":[{"type":"function","name":"late","description":null,"parameters":null,"strict":null}]}`,
}

// TestTypedItems: each typed call and output decodes, validates, pairs
// with its call (protocol.CallOf, AnswerOf) and encodes back to its JSON.
func TestTypedItems(t *testing.T) {
	calls := map[string]protocol.ItemType{}
	for _, raw := range typedItems {
		it := sameItem(t, raw)
		if c, ok := protocol.CallOf(it); ok {
			calls[c.CallID] = c.Type
			if c.Input == "" || protocol.OutputFor(c.Type) == "" {
				t.Errorf("%s: call %+v has no input or no output type", raw, c)
			}
		}
		if callID, answers, ok := protocol.AnswerOf(it); ok && calls[callID] != answers {
			t.Errorf("%s answers %s %s; the call there is a %s", raw, answers, callID, calls[callID])
		}
	}
	if len(calls) != 5 {
		t.Errorf("%d calls, want 5", len(calls))
	}
}

// TestTypedItemsFromSDK: openai-go's typed output params decode as the
// outputs they are.
func TestTypedItemsFromSDK(t *testing.T) {
	for want, p := range map[protocol.ItemType]responses.ResponseInputItemUnionParam{
		protocol.ItemApplyPatchCallOutput: responses.ResponseInputItemParamOfApplyPatchCallOutput("call_3", "completed"),
		protocol.ItemShellCallOutput: responses.ResponseInputItemParamOfShellCallOutput("call_1", []responses.ResponseFunctionShellCallOutputContentParam{{
			Stdout: "ok", Outcome: responses.ResponseFunctionShellCallOutputContentOutcomeUnionParam{OfExit: &responses.ResponseFunctionShellCallOutputContentOutcomeExitParam{ExitCode: 0}}}}),
	} {
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		it, perr := protocol.DecodeItem(raw, "input[0]")
		if perr == nil {
			perr = protocol.ValidateItems(protocol.Items{it}, "input")
		}
		if perr != nil || it.ItemType() != want {
			t.Errorf("%s: %v %v, want a %s", raw, it, perr, want)
		}
	}
}

// TestTypedItemsInvalid: each typed item without what it needs is a clear
// error at its field.
func TestTypedItemsInvalid(t *testing.T) {
	for _, tt := range []struct{ raw, code, param string }{
		{`{"type":"shell_call","call_id":"c"}`, protocol.CodeMissingRequired, "input[0].action"},
		{`{"type":"shell_call_output","output":[]}`, protocol.CodeMissingRequired, "input[0].call_id"},
		{`{"type":"local_shell_call_output","output":"{}"}`, protocol.CodeMissingRequired, "input[0].id"},
		{`{"type":"apply_patch_call","call_id":"c"}`, protocol.CodeMissingRequired, "input[0].operation"},
		{`{"type":"apply_patch_call_output","call_id":"c","status":"maybe"}`, protocol.CodeInvalidValue, "input[0].status"},
		{`{"type":"computer_call","call_id":"c"}`, protocol.CodeMissingRequired, "input[0].action"},
		{`{"type":"computer_call_output","call_id":"c"}`, protocol.CodeMissingRequired, "input[0].output"},
		{`{"type":"tool_search_output","call_id":"c","tools":[{"type":"file_search"}]}`, protocol.CodeToolNotAvailable, "input[0].tools[0].type"},
		{`{"type":"additional_tools","tools":[{"type":"function"}]}`, protocol.CodeMissingRequired, "input[0].tools[0].name"},
		{`{"type":"shell_call","call_id":"c","action":"ls"}`, "", ""}, // kept as sent: the client reads it
	} {
		it, perr := protocol.DecodeItem(json.RawMessage(tt.raw), "input[0]")
		if perr == nil {
			perr = protocol.ValidateItems(protocol.Items{it}, "input")
		}
		switch {
		case tt.code == "" && perr != nil:
			t.Errorf("%s: %v", tt.raw, perr)
		case tt.code != "" && (perr == nil || perr.Code != tt.code || perr.Param != tt.param):
			t.Errorf("%s: got %v, want %s at %s", tt.raw, perr, tt.code, tt.param)
		}
	}
}

// TestShellCommandEvents: the shell call's command events decode and
// encode back unchanged.
func TestShellCommandEvents(t *testing.T) {
	for _, raw := range []string{
		`{"type":"response.shell_call_command.added","sequence_number":3,"output_index":1,"command_index":0,"command":""}`,
		`{"type":"response.shell_call_command.delta","sequence_number":4,"output_index":1,"command_index":0,"delta":"ls -la"}`,
		`{"type":"response.shell_call_command.done","sequence_number":5,"output_index":1,"command_index":0,"command":"ls -la"}`,
	} {
		ev, perr := protocol.DecodeEvent([]byte(raw))
		if perr != nil {
			t.Fatalf("%s: %v", raw, perr)
		}
		wantSameJSON(t, raw, ev)
	}
}
