package protocol_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tether-run/tether/protocol"
)

// fingerprint is opaque bytes a program carries back to the server that
// runs it, with what JSON escapes: it must come back unchanged.
const fingerprint = "fp_v1:AbC+/=\n\t\"é 世界\u2028<&>"

// programItems are a programmatic tool calling history, a configuration
// update and mid-conversation tools in the shapes the API gives them
// (openai-go v3.102.0), each with the item tether decodes it to.
var programItems = []itemCase{
	{
		name: "program",
		in:   `{"type":"program","id":"prog_1","call_id":"call_p","code":"const w = await tools.get_weather({city: \"Lyon\"});\nif (w.temp < 10 && w.rain) { return \"coat\"; }\nreturn w.summary;","fingerprint":` + mustJSON(fingerprint) + `}`,
		want: &protocol.Program{ID: "prog_1", CallID: "call_p", Fingerprint: fingerprint,
			Code: "const w = await tools.get_weather({city: \"Lyon\"});\nif (w.temp < 10 && w.rain) { return \"coat\"; }\nreturn w.summary;"},
	},
	{
		name: "function_call a program made",
		in:   `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Lyon\"}","status":"completed","caller":{"type":"program","caller_id":"call_p"}}`,
		want: &protocol.FunctionCall{ID: "fc_1", CallID: "call_1", Name: "get_weather", Arguments: `{"city":"Lyon"}`, Status: protocol.StatusCompleted,
			Caller: &protocol.Caller{Type: protocol.CallerProgram, CallerID: "call_p"}},
	},
	{
		name: "its function_call_output",
		in:   `{"type":"function_call_output","id":"fco_1","call_id":"call_1","output":"{\"temp\":8,\"rain\":true}","caller":{"type":"program","caller_id":"call_p"}}`,
		want: &protocol.FunctionCallOutput{ID: "fco_1", CallID: "call_1", Output: protocol.ToolOutput{Text: `{"temp":8,"rain":true}`},
			Caller: &protocol.Caller{Type: protocol.CallerProgram, CallerID: "call_p"}},
	},
	{
		name: "custom_tool_call a program made",
		in:   `{"type":"custom_tool_call","id":"ctc_1","call_id":"call_2","name":"notes","input":"coat today","caller":{"type":"program","caller_id":"call_p"}}`,
		want: &protocol.CustomToolCall{ID: "ctc_1", CallID: "call_2", Name: "notes", Input: "coat today", Caller: &protocol.Caller{Type: protocol.CallerProgram, CallerID: "call_p"}},
	},
	{
		name: "its custom_tool_call_output",
		in:   `{"type":"custom_tool_call_output","id":"ctco_1","call_id":"call_2","output":"saved","caller":{"type":"program","caller_id":"call_p"}}`,
		want: &protocol.CustomToolCallOutput{ID: "ctco_1", CallID: "call_2", Output: protocol.ToolOutput{Text: "saved"}, Caller: &protocol.Caller{Type: protocol.CallerProgram, CallerID: "call_p"}},
	},
	{
		name: "program_output",
		in:   `{"type":"program_output","id":"progo_1","call_id":"call_p","result":"coat","status":"completed"}`,
		want: &protocol.ProgramOutput{ID: "progo_1", CallID: "call_p", Result: "coat", Status: protocol.StatusCompleted},
	},
	{
		name: "program_output of an empty result, incomplete",
		in:   `{"type":"program_output","id":"progo_2","call_id":"call_p","result":"","status":"incomplete"}`,
		want: &protocol.ProgramOutput{ID: "progo_2", CallID: "call_p", Status: protocol.StatusIncomplete},
	},
	{
		name: "a direct call says so",
		in:   `{"type":"shell_call","call_id":"call_3","action":{"commands":["ls"]},"caller":{"type":"direct"}}`,
		want: &protocol.ShellCall{CallID: "call_3", Action: json.RawMessage(`{"commands":["ls"]}`), Caller: &protocol.Caller{Type: protocol.CallerDirect}},
	},
	{
		name: "apply_patch_call_output with its caller",
		in:   `{"type":"apply_patch_call_output","call_id":"call_4","status":"completed","caller":{"type":"direct"}}`,
		want: &protocol.ApplyPatchCallOutput{CallID: "call_4", Status: protocol.StatusCompleted, Caller: &protocol.Caller{Type: protocol.CallerDirect}},
	},
	{
		name: "configuration_update of both settings",
		in:   `{"type":"configuration_update","id":"cfg_1","reasoning":{"effort":"low"},"text":{"format":{"type":"json_schema","name":"answer","schema":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"number"}}},"strict":false}}}`,
		want: &protocol.ConfigurationUpdate{ID: "cfg_1", Reasoning: json.RawMessage(`{"effort":"low"}`),
			Text: json.RawMessage(`{"format":{"type":"json_schema","name":"answer","schema":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"number"}}},"strict":false}}`)},
	},
	{
		name: "configuration_update of the text alone",
		in:   `{"type":"configuration_update","text":{"format":{"type":"text"}}}`,
		want: &protocol.ConfigurationUpdate{Text: json.RawMessage(`{"format":{"type":"text"}}`)},
	},
	{
		name: "additional_tools from the developer",
		in:   `{"type":"additional_tools","id":"at_1","role":"developer","tools":[{"type":"function","name":"late","description":null,"parameters":null,"strict":null}]}`,
		want: &protocol.AdditionalTools{ID: "at_1", Role: protocol.RoleDeveloper, Tools: mustTools(`[{"type":"function","name":"late","description":null,"parameters":null,"strict":null}]`)},
	},
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// mustTools is tools as a request's tools decode.
func mustTools(raw string) []protocol.Tool {
	var tools []protocol.Tool
	if err := json.Unmarshal([]byte(raw), &tools); err != nil {
		panic(err)
	}
	return tools
}

// TestProgramItems: each item decodes to its fields exactly (the program's
// code and fingerprint byte for byte), validates, and encodes back to the
// JSON it came as, members in the same order.
func TestProgramItems(t *testing.T) {
	t.Parallel()
	for _, tc := range programItems {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := sameItem(t, tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded\n %#v\nwant\n %#v", got, tc.want)
			}
			if got.ItemType() != tc.want.ItemType() || got.ItemID() != tc.want.ItemID() {
				t.Fatalf("ItemType/ItemID = %s/%q", got.ItemType(), got.ItemID())
			}
			if want, back := keys(t, []byte(tc.in)), keys(t, mustMarshal(t, got)); !reflect.DeepEqual(want, back) {
				t.Fatalf("members %v, sent as %v", back, want)
			}
			roundTrip(t, got, func(b []byte) (protocol.Item, *protocol.Error) { return protocol.DecodeItem(b, "input[0]") })
		})
	}
}

// TestProgramItemsInvalid: each item without what the API requires, or
// with a value it does not take, is refused at its field.
func TestProgramItemsInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []errCase{
		{"program without id", `{"type":"program","call_id":"c","code":"","fingerprint":"f"}`, protocol.CodeMissingRequired, "input[0].id"},
		{"program without call_id", `{"type":"program","id":"p","code":"","fingerprint":"f"}`, protocol.CodeMissingRequired, "input[0].call_id"},
		{"program with a null call_id", `{"type":"program","id":"p","call_id":null,"code":"","fingerprint":"f"}`, protocol.CodeMissingRequired, "input[0].call_id"},
		{"program without code", `{"type":"program","id":"p","call_id":"c","fingerprint":"f"}`, protocol.CodeMissingRequired, "input[0].code"},
		{"program without fingerprint", `{"type":"program","id":"p","call_id":"c","code":""}`, protocol.CodeMissingRequired, "input[0].fingerprint"},
		{"program with an empty fingerprint", `{"type":"program","id":"p","call_id":"c","code":"","fingerprint":""}`, protocol.CodeMissingRequired, "input[0].fingerprint"},
		{"program with an empty call_id", `{"type":"program","id":"p","call_id":"","code":"","fingerprint":"f"}`, protocol.CodeMissingRequired, "input[0].call_id"},
		{"program with a long call_id", `{"type":"program","id":"p","call_id":"` + strings.Repeat("c", 65) + `","code":"","fingerprint":"f"}`, protocol.CodeInvalidValue, "input[0].call_id"},
		{"program code a number", `{"type":"program","id":"p","call_id":"c","code":1,"fingerprint":"f"}`, protocol.CodeInvalidType, "input[0]"},
		{"program_output without result", `{"type":"program_output","id":"o","call_id":"c","status":"completed"}`, protocol.CodeMissingRequired, "input[0].result"},
		{"program_output without status", `{"type":"program_output","id":"o","call_id":"c","result":""}`, protocol.CodeMissingRequired, "input[0].status"},
		{"program_output failed", `{"type":"program_output","id":"o","call_id":"c","result":"","status":"failed"}`, protocol.CodeInvalidValue, "input[0].status"},
		{"program_output with an empty id", `{"type":"program_output","id":"","call_id":"c","result":"","status":"completed"}`, protocol.CodeMissingRequired, "input[0].id"},
		{"caller of an unknown type", `{"type":"function_call","call_id":"c","name":"f","arguments":"{}","caller":{"type":"robot"}}`, protocol.CodeInvalidValue, "input[0].caller.type"},
		{"caller without type", `{"type":"custom_tool_call_output","call_id":"c","output":"x","caller":{}}`, protocol.CodeMissingRequired, "input[0].caller.type"},
		{"program caller without its id", `{"type":"function_call_output","call_id":"c","output":"x","caller":{"type":"program"}}`, protocol.CodeMissingRequired, "input[0].caller.caller_id"},
		{"caller not an object", `{"type":"function_call_output","call_id":"c","output":"x","caller":"program"}`, protocol.CodeInvalidType, "input[0]"},
		{"configuration_update of nothing", `{"type":"configuration_update"}`, protocol.CodeMissingRequired, "input[0].reasoning"},
		{"configuration_update of nulls", `{"type":"configuration_update","reasoning":null,"text":null}`, protocol.CodeMissingRequired, "input[0].reasoning"},
		{"unknown effort", `{"type":"configuration_update","reasoning":{"effort":"extreme"}}`, protocol.CodeInvalidValue, "input[0].reasoning.effort"},
		{"reasoning a string", `{"type":"configuration_update","reasoning":"low"}`, protocol.CodeInvalidType, "input[0].reasoning"},
		{"text without format", `{"type":"configuration_update","text":{}}`, protocol.CodeMissingRequired, "input[0].text.format"},
		{"text json_object", `{"type":"configuration_update","text":{"format":{"type":"json_object"}}}`, protocol.CodeInvalidValue, "input[0].text.format.type"},
		{"json_schema without name", `{"type":"configuration_update","text":{"format":{"type":"json_schema","schema":{}}}}`, protocol.CodeMissingRequired, "input[0].text.format.name"},
		{"additional_tools from the user", `{"type":"additional_tools","role":"user","tools":[]}`, protocol.CodeInvalidValue, "input[0].role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			it, perr := protocol.DecodeItem(json.RawMessage(tc.in), "input[0]")
			if perr == nil {
				perr = protocol.ValidateItems(protocol.Items{it}, "input")
			}
			wantError(t, perr, tc.code, tc.param)
		})
	}
}

// sdkProgramParams are the items of programItems as openai-go's input
// params build them.
func sdkProgramParams() map[protocol.ItemType]responses.ResponseInputItemUnionParam {
	fc := responses.ResponseInputItemParamOfFunctionCall(`{"city":"Lyon"}`, "call_1", "get_weather")
	fc.OfFunctionCall.Caller.OfProgram = &responses.ResponseFunctionToolCallCallerProgramParam{CallerID: "call_p"}
	fco := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temp":8}`)
	fco.OfFunctionCallOutput.CallID = param.NewOpt("call_1")
	fco.OfFunctionCallOutput.Caller.OfProgram = &responses.ResponseInputItemFunctionCallOutputCallerProgramParam{CallerID: "call_p"}
	return map[protocol.ItemType]responses.ResponseInputItemUnionParam{
		protocol.ItemProgram: {OfProgram: &responses.ResponseInputItemProgramParam{ID: "prog_1", CallID: "call_p",
			Code: "return (await tools.get_weather({city: 'Lyon'})).summary;", Fingerprint: fingerprint}},
		protocol.ItemFunctionCall:       fc,
		protocol.ItemFunctionCallOutput: fco,
		protocol.ItemProgramOutput:      {OfProgramOutput: &responses.ResponseInputItemProgramOutputParam{ID: "progo_1", CallID: "call_p", Result: "sunny", Status: "completed"}},
		protocol.ItemConfigurationUpdate: {OfConfigurationUpdate: &responses.ResponseConfigurationUpdateItemParam{ID: param.NewOpt("cfg_1"),
			Reasoning: responses.ResponseConfigurationUpdateItemParamReasoning{Effort: shared.ReasoningEffortLow},
			Text: responses.ResponseConfigurationUpdateItemParamText{Format: responses.ResponseConfigurationUpdateItemParamTextFormatUnion{
				OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "answer", Schema: map[string]any{"type": "object"}}}}}},
		protocol.ItemAdditionalTools: responses.ResponseInputItemParamOfAdditionalTools([]responses.ToolUnionParam{
			responses.ToolParamOfFunction("late", map[string]any{"type": "object"}, false)}),
	}
}

// TestProgramItemsSDK: openai-go's input params of these items decode and
// validate as the items they are, and what tether writes of them openai-go
// reads back as the known variants, field for field: as the items of a
// list (input_items, a conversation's) and, for those the SDK has as
// output items, as output items.
func TestProgramItemsSDK(t *testing.T) {
	t.Parallel()
	for typ, p := range sdkProgramParams() {
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		it, perr := protocol.DecodeItem(raw, "input[0]")
		if perr == nil {
			perr = protocol.ValidateItems(protocol.Items{it}, "input")
		}
		if perr != nil || it.ItemType() != typ {
			t.Fatalf("%s: %v %v, want a %s", raw, it, perr, typ)
		}
		back := mustMarshal(t, it)
		var item responses.ResponseItemUnion
		if err := json.Unmarshal(back, &item); err != nil {
			t.Fatalf("%s: %v", back, err)
		}
		var out responses.ResponseOutputItemUnion
		if err := json.Unmarshal(back, &out); err != nil {
			t.Fatalf("%s: %v", back, err)
		}
		switch v := item.AsAny().(type) {
		case responses.ResponseItemProgram:
			o, _ := out.AsAny().(responses.ResponseOutputItemProgram)
			if v.Fingerprint != fingerprint || o.Fingerprint != fingerprint || v.CallID != "call_p" || v.Code != p.OfProgram.Code {
				t.Errorf("program read back as %+v, %+v", v, o)
			}
		case responses.ResponseItemProgramOutput:
			o, _ := out.AsAny().(responses.ResponseOutputItemProgramOutput)
			if v.Result != "sunny" || v.Status != "completed" || o.Result != "sunny" || o.ID != "progo_1" {
				t.Errorf("program_output read back as %+v, %+v", v, o)
			}
		case responses.ResponseFunctionToolCallItem:
			if v.Caller.Type != "program" || v.Caller.CallerID != "call_p" || out.AsFunctionCall().Caller.CallerID != "call_p" {
				t.Errorf("function_call read back as %s", back)
			}
		case responses.ResponseFunctionToolCallOutputItem:
			if v.Caller.Type != "program" || v.Caller.CallerID != "call_p" {
				t.Errorf("function_call_output read back as %s", back)
			}
		case responses.ResponseConfigurationUpdateItem:
			if v.ID != "cfg_1" || v.Reasoning.Effort != shared.ReasoningEffortLow || v.Text.Format.AsJSONSchema().Name != "answer" {
				t.Errorf("configuration_update read back as %+v", v)
			}
		case responses.ResponseItemAdditionalTools:
			o, _ := out.AsAny().(responses.ResponseOutputItemAdditionalTools)
			if v.Role != "developer" || len(v.Tools) != 1 || v.Tools[0].Name != "late" || o.Role != "developer" {
				t.Errorf("additional_tools read back as %+v", v)
			}
		default:
			t.Errorf("%s: openai-go reads %T", back, v)
		}
	}
}
