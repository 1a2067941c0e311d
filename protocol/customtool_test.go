package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// TestCustomToolItems: custom tool calls and their outputs decode, validate
// and encode back to the same JSON, and their streaming events decode.
func TestCustomToolItems(t *testing.T) {
	for _, raw := range []string{
		`{"type":"custom_tool_call","id":"ctc_1","call_id":"call_1","name":"apply_patch","input":"*** Begin Patch\n*** End Patch","status":"completed"}`,
		`{"type":"custom_tool_call","call_id":"call_2","name":"exec","namespace":"code","input":""}`,
		`{"type":"custom_tool_call_output","call_id":"call_1","output":"Done!"}`,
		`{"type":"custom_tool_call_output","call_id":"call_1","output":[{"type":"input_text","text":"Done"}]}`,
	} {
		sameItem(t, raw)
	}
	for _, tt := range []struct{ raw, code, param string }{
		{`{"type":"custom_tool_call_output","call_id":"call_1"}`, protocol.CodeMissingRequired, "input[0].output"},
		{`{"type":"custom_tool_call_output","output":"x"}`, protocol.CodeMissingRequired, "input[0].call_id"},
		{`{"type":"custom_tool_call_output","call_id":"c","output":[{"type":"output_text","text":"x"}]}`, protocol.CodeInvalidValue, "input[0].output[0].type"},
		{`{"type":"custom_tool_call","call_id":"c","input":"x"}`, protocol.CodeMissingRequired, "input[0].name"},
		{`{"type":"custom_tool_call","call_id":"c","name":"n","input":7}`, protocol.CodeInvalidType, "input[0]"},
	} {
		it, perr := protocol.DecodeItem(json.RawMessage(tt.raw), "input[0]")
		if perr == nil {
			perr = protocol.ValidateItems(protocol.Items{it}, "input")
		}
		if perr == nil || perr.Code != tt.code || perr.Param != tt.param {
			t.Errorf("%s: got %v, want %s at %s", tt.raw, perr, tt.code, tt.param)
		}
	}
	for _, raw := range []string{
		`{"type":"response.custom_tool_call_input.delta","sequence_number":4,"item_id":"ctc_1","output_index":0,"delta":"*** Begin"}`,
		`{"type":"response.custom_tool_call_input.done","sequence_number":9,"item_id":"ctc_1","output_index":0,"input":"*** Begin Patch"}`,
	} {
		ev, perr := protocol.DecodeEvent([]byte(raw))
		if perr != nil {
			t.Fatalf("%s: %v", raw, perr)
		}
		wantSameJSON(t, raw, ev)
	}
}

// wantSameJSON fails t unless v encodes to the JSON raw holds (key order
// and spacing aside).
// sameItem decodes raw as an input item, validates it and checks that it
// encodes back to the same JSON; it returns the item.
func sameItem(t *testing.T, raw string) protocol.Item {
	t.Helper()
	it, perr := protocol.DecodeItem(json.RawMessage(raw), "input[0]")
	if perr != nil {
		t.Fatalf("%s: %v", raw, perr)
	}
	if perr := protocol.ValidateItems(protocol.Items{it}, "input"); perr != nil {
		t.Fatalf("%s: %v", raw, perr)
	}
	wantSameJSON(t, raw, it)
	return it
}

func wantSameJSON(t *testing.T, raw string, v any) {
	t.Helper()
	back, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	json.Unmarshal([]byte(raw), &a)
	json.Unmarshal(back, &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("round trip:\n got %s\nwant %s", jb, ja)
	}
}
