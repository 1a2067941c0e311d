package protocol_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tether-run/tether/protocol"
)

type itemCase struct {
	name string
	in   string
	want protocol.Item
}

var itemCases = []itemCase{
	{
		name: "easy message: no type, string content",
		in:   `{"role":"user","content":"What is the capital of France?"}`,
		want: &protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "What is the capital of France?"}}},
	},
	{
		name: "assistant string content becomes output_text",
		in:   `{"role":"assistant","content":"Paris."}`,
		want: &protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: "Paris.", Annotations: []protocol.Annotation{}}}},
	},
	{
		name: "developer message with typed parts",
		in:   `{"type":"message","role":"developer","content":[{"type":"input_text","text":"Be brief."},{"type":"input_text","text":" Really."}]}`,
		want: &protocol.Message{Role: protocol.RoleDeveloper, Content: protocol.Contents{&protocol.InputText{Text: "Be brief."}, &protocol.InputText{Text: " Really."}}},
	},
	{
		name: "output message with id, status and phase",
		in:   `{"type":"message","id":"msg_1","status":"completed","role":"assistant","phase":"final_answer","content":[{"type":"output_text","text":"Hi","annotations":[]}]}`,
		want: &protocol.Message{ID: "msg_1", Status: protocol.StatusCompleted, Role: protocol.RoleAssistant, Phase: "final_answer", Content: protocol.Contents{&protocol.OutputText{Text: "Hi", Annotations: []protocol.Annotation{}}}},
	},
	{
		name: "message with empty content array",
		in:   `{"type":"message","id":"msg_2","status":"in_progress","role":"assistant","content":[]}`,
		want: &protocol.Message{ID: "msg_2", Status: protocol.StatusInProgress, Role: protocol.RoleAssistant, Content: protocol.Contents{}},
	},
	{
		name: "function_call",
		in:   `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"location\":\"Boston\"}","status":"completed"}`,
		want: &protocol.FunctionCall{ID: "fc_1", CallID: "call_1", Name: "get_weather", Arguments: `{"location":"Boston"}`, Status: protocol.StatusCompleted},
	},
	{
		name: "function_call_output with string output",
		in:   `{"type":"function_call_output","call_id":"call_1","output":"sunny, 72F"}`,
		want: &protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "sunny, 72F"}},
	},
	{
		name: "function_call_output with empty string output",
		in:   `{"type":"function_call_output","id":"fco_1","call_id":"call_1","output":"","status":"completed"}`,
		want: &protocol.FunctionCallOutput{ID: "fco_1", CallID: "call_1", Status: protocol.StatusCompleted},
	},
	{
		name: "function_call_output with array output",
		in:   `{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":"see "},{"type":"input_image","image_url":"https://example.com/a.png"}]}`,
		want: &protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Parts: protocol.Contents{
			&protocol.InputText{Text: "see "},
			&protocol.InputImage{ImageURL: ptr("https://example.com/a.png")},
		}}},
	},
	{
		name: "function_call_output with empty array output stays an array",
		in:   `{"type":"function_call_output","call_id":"call_1","output":[]}`,
		want: &protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Parts: protocol.Contents{}}},
	},
	{
		name: "reasoning with summary, content and encrypted content",
		in:   `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Thinking."}],"content":[{"type":"reasoning_text","text":"raw"}],"encrypted_content":"gAAAA"}`,
		want: &protocol.Reasoning{ID: "rs_1", Summary: protocol.Contents{&protocol.SummaryText{Text: "Thinking."}}, Content: protocol.Contents{&protocol.ReasoningText{Text: "raw"}}, EncryptedContent: ptr("gAAAA")},
	},
	{
		name: "reasoning as OpenAI streams it",
		in:   `{"id":"rs_2","type":"reasoning","summary":[]}`,
		want: &protocol.Reasoning{ID: "rs_2", Summary: protocol.Contents{}},
	},
	{
		name: "compaction",
		in:   `{"type":"compaction","id":"cmp_1","encrypted_content":"sealed","created_by":"tether"}`,
		want: &protocol.Compaction{ID: "cmp_1", EncryptedContent: "sealed", CreatedBy: "tether"},
	},
	{
		name: "item_reference",
		in:   `{"type":"item_reference","id":"msg_9"}`,
		want: &protocol.ItemReferenceItem{ID: "msg_9"},
	},
	{
		name: "item_reference without type",
		in:   `{"id":"msg_9"}`,
		want: &protocol.ItemReferenceItem{ID: "msg_9"},
	},
}

// itemErrCases are decoded with param "input[2]".
var itemErrCases = []errCase{
	{"not an object", `5`, protocol.CodeInvalidType, "input[2]"},
	{"array", `[]`, protocol.CodeInvalidType, "input[2]"},
	{"truncated", `{"role":"user",`, protocol.CodeInvalidType, "input[2]"},
	{"empty object", `{}`, protocol.CodeMissingRequired, "input[2].type"},
	{"null", `null`, protocol.CodeMissingRequired, "input[2].type"},
	{"no type and no role", `{"content":"hi"}`, protocol.CodeMissingRequired, "input[2].type"},
	{"empty type", `{"type":"","role":"user","content":"hi"}`, protocol.CodeMissingRequired, "input[2].type"},
	{"unknown type", `{"type":"file_search_call","id":"ws_1"}`, protocol.CodeInvalidValue, "input[2].type"},
	{"type not a string", `{"type":5}`, protocol.CodeInvalidType, "input[2]"},
	{"role not a string", `{"role":5,"content":"hi"}`, protocol.CodeInvalidType, "input[2]"},
	{"message without content", `{"role":"user"}`, protocol.CodeMissingRequired, "input[2].content"},
	{"message with null content", `{"type":"message","role":"user","content":null}`, protocol.CodeMissingRequired, "input[2].content"},
	{"message content a number", `{"role":"user","content":5}`, protocol.CodeInvalidType, "input[2].content"},
	{"message content an object", `{"role":"user","content":{"type":"input_text","text":"hi"}}`, protocol.CodeInvalidType, "input[2].content"},
	{"content part not an object", `{"role":"user","content":["hi"]}`, protocol.CodeInvalidType, "input[2].content[0]"},
	{"content part without type", `{"role":"user","content":[{"text":"hi"}]}`, protocol.CodeMissingRequired, "input[2].content[0].type"},
	{"second content part unknown", `{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_audio"}]}`, protocol.CodeInvalidValue, "input[2].content[1].type"},
	{"content part field wrong type", `{"role":"user","content":[{"type":"input_text","text":5}]}`, protocol.CodeInvalidType, "input[2].content[0]"},
	{"status not a string", `{"type":"message","role":"user","status":1,"content":"x"}`, protocol.CodeInvalidType, "input[2]"},
	{"function_call arguments an object", `{"type":"function_call","call_id":"c","name":"f","arguments":{}}`, protocol.CodeInvalidType, "input[2]"},
	{"function_call_output without output", `{"type":"function_call_output","call_id":"c"}`, protocol.CodeMissingRequired, "input[2].output"},
	{"function_call_output with null output", `{"type":"function_call_output","call_id":"c","output":null}`, protocol.CodeMissingRequired, "input[2].output"},
	{"function_call_output output a number", `{"type":"function_call_output","call_id":"c","output":5}`, protocol.CodeInvalidType, "input[2].output"},
	{"function_call_output output an object", `{"type":"function_call_output","call_id":"c","output":{"text":"x"}}`, protocol.CodeInvalidType, "input[2].output"},
	{"function_call_output bad part", `{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"a"},{"type":"nope"}]}`, protocol.CodeInvalidValue, "input[2].output[1].type"},
	{"function_call_output call_id a number", `{"type":"function_call_output","call_id":7,"output":"x"}`, protocol.CodeInvalidType, "input[2]"},
	{"reasoning summary part unknown", `{"type":"reasoning","summary":[{"type":"summary_text","text":"a"},{"type":"bogus"}]}`, protocol.CodeInvalidValue, "input[2].summary[1].type"},
	{"reasoning summary null", `{"type":"reasoning","summary":null}`, protocol.CodeInvalidType, "input[2].summary"},
	{"reasoning content part without type", `{"type":"reasoning","summary":[],"content":[{}]}`, protocol.CodeMissingRequired, "input[2].content[0].type"},
	{"reasoning id a number", `{"type":"reasoning","id":1,"summary":[]}`, protocol.CodeInvalidType, "input[2]"},
	{"compaction encrypted_content a number", `{"type":"compaction","encrypted_content":1}`, protocol.CodeInvalidType, "input[2]"},
	{"item_reference id a number", `{"type":"item_reference","id":1}`, protocol.CodeInvalidType, "input[2]"},
}

func TestDecodeItem(t *testing.T) {
	t.Parallel()
	for _, tc := range itemCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, perr := protocol.DecodeItem(json.RawMessage(tc.in), "input[0]")
			if perr != nil {
				t.Fatalf("DecodeItem(%s): %v", tc.in, perr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("DecodeItem(%s)\n got %s\nwant %s", tc.in, mustMarshal(t, got), mustMarshal(t, tc.want))
			}
			if got.ItemType() != tc.want.ItemType() || got.ItemID() != tc.want.ItemID() {
				t.Fatalf("ItemType/ItemID = %s/%q, want %s/%q", got.ItemType(), got.ItemID(), tc.want.ItemType(), tc.want.ItemID())
			}
			roundTrip(t, got, func(b []byte) (protocol.Item, *protocol.Error) { return protocol.DecodeItem(b, "input[0]") })
		})
	}
}

func TestDecodeItemErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range itemErrCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, perr := protocol.DecodeItem(json.RawMessage(tc.in), "input[2]")
			if got != nil {
				t.Errorf("DecodeItem(%s) returned an item with its error: %#v", tc.in, got)
			}
			wantError(t, perr, tc.code, tc.param)
		})
	}
}

func TestItemMarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		item protocol.Item
		want string
	}{
		{
			name: "message with nil content writes []",
			item: &protocol.Message{ID: "msg_1", Status: protocol.StatusInProgress, Role: protocol.RoleAssistant},
			want: `{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]}`,
		},
		{
			name: "output_text always has annotations",
			item: &protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: "x"}}},
			want: `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[]}]}`,
		},
		{
			name: "function_call_output string",
			item: &protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "ok"}},
			want: `{"type":"function_call_output","call_id":"call_1","output":"ok"}`,
		},
		{
			name: "function_call_output parts",
			item: &protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Parts: protocol.Contents{&protocol.InputText{Text: "ok"}}}},
			want: `{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_text","text":"ok"}]}`,
		},
		{
			name: "function_call_output empty parts stays an array",
			item: &protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Parts: protocol.Contents{}}},
			want: `{"type":"function_call_output","call_id":"call_1","output":[]}`,
		},
		{
			name: "reasoning with nil summary writes []",
			item: &protocol.Reasoning{ID: "rs_1"},
			want: `{"type":"reasoning","id":"rs_1","summary":[]}`,
		},
		{
			name: "function_call keeps empty arguments",
			item: &protocol.FunctionCall{ID: "fc_1", CallID: "call_1", Name: "f", Status: protocol.StatusInProgress},
			want: `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"","status":"in_progress"}`,
		},
		{
			name: "item_reference",
			item: &protocol.ItemReferenceItem{ID: "msg_1"},
			want: `{"type":"item_reference","id":"msg_1"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := string(mustMarshal(t, tc.item)); got != tc.want {
				t.Fatalf("marshal\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestDecodeItems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		n     int
		code  string
		param string
	}{
		{"empty", `[]`, 0, "", ""},
		{"two", `[{"role":"user","content":"a"},{"type":"item_reference","id":"x"}]`, 2, "", ""},
		{"not an array", `{"role":"user","content":"a"}`, 0, protocol.CodeInvalidType, "output"},
		{"bad second item names its index", `[{"role":"user","content":"a"},{"role":"user","content":[{"type":"x"}]}]`, 0, protocol.CodeInvalidValue, "output[1].content[0].type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			items, perr := protocol.DecodeItems(json.RawMessage(tc.in), "output")
			if tc.code != "" {
				wantError(t, perr, tc.code, tc.param)
				return
			}
			if perr != nil {
				t.Fatalf("DecodeItems: %v", perr)
			}
			if len(items) != tc.n {
				t.Fatalf("got %d items, want %d", len(items), tc.n)
			}
		})
	}
}

// TestItemsUnmarshal: Items read as a member of a value (Unmarshal, one
// pass over the array) are DecodeItems' items, and refused where it
// refuses them.
func TestItemsUnmarshal(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`[]`,
		`null`,
		` [ {"role":"user","content":"a"} , {"type":"item_reference","id":"x"} ] `,
		`[{"type":"function_call","call_id":"c","name":"read_file","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"a\n\"b\""}]`,
		`[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}]`,
		`[{"role":"user","content":"a"},{"role":"user","content":[{"type":"x"}]}]`,
		`{"role":"user","content":"a"}`,
		`[1]`,
		`"items"`,
	} {
		var v struct {
			Items protocol.Items `json:"items"`
		}
		err := protocol.Unmarshal([]byte(`{"items":`+in+`}`), &v)
		if in == "null" {
			if err != nil || v.Items != nil {
				t.Errorf("%s: read %v (%v), want nil", in, v.Items, err)
			}
			continue
		}
		want, perr := protocol.DecodeItems(json.RawMessage(in), "input")
		switch {
		case perr != nil && err == nil:
			t.Errorf("%s: read %v, DecodeItems refuses it: %v", in, v.Items, perr)
		case perr == nil && err != nil:
			t.Errorf("%s: refused (%v), DecodeItems reads it", in, err)
		case perr == nil && !reflect.DeepEqual(v.Items, want):
			t.Errorf("%s: read %#v, DecodeItems %#v", in, v.Items, want)
		}
	}
}

func TestToolOutputString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		out  protocol.ToolOutput
		want string
	}{
		{"text", protocol.ToolOutput{Text: "72F"}, "72F"},
		{"parts", protocol.ToolOutput{Parts: protocol.Contents{&protocol.InputText{Text: "72"}, &protocol.InputImage{}, &protocol.InputText{Text: "F"}}}, "72F"},
		{"parts win over text", protocol.ToolOutput{Text: "ignored", Parts: protocol.Contents{}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.out.String(); got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSetItemID: SetItemID names every item type.
func TestSetItemID(t *testing.T) {
	for _, it := range []protocol.Item{&protocol.Message{}, &protocol.FunctionCall{}, &protocol.FunctionCallOutput{}, &protocol.Reasoning{}, &protocol.Compaction{},
		&protocol.ItemReferenceItem{}, &protocol.CustomToolCall{}, &protocol.CustomToolCallOutput{}, &protocol.MCPListTools{}, &protocol.MCPCall{}, &protocol.MCPApprovalRequest{},
		&protocol.MCPApprovalResponse{}, &protocol.ShellCall{}, &protocol.ShellCallOutput{}, &protocol.LocalShellCall{}, &protocol.LocalShellCallOutput{},
		&protocol.ApplyPatchCall{}, &protocol.ApplyPatchCallOutput{}, &protocol.ComputerCall{}, &protocol.ComputerCallOutput{}, &protocol.ToolSearchCall{},
		&protocol.ToolSearchOutput{}, &protocol.AdditionalTools{}, &protocol.WebSearchCall{}, &protocol.MultiAgentCall{}, &protocol.MultiAgentCallOutput{},
		&protocol.AgentMessage{}, &protocol.Program{}, &protocol.ProgramOutput{}, &protocol.ConfigurationUpdate{}} {
		protocol.SetItemID(it, "x_1")
		if it.ItemID() != "x_1" {
			t.Errorf("%T: SetItemID did not name it", it)
		}
	}
}
