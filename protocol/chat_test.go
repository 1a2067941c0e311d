package protocol_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
)

var chatCases = []struct {
	name string
	in   string
	want protocol.ChatContext
}{
	{
		name: "a tool round",
		in: `{"model":"m","max_completion_tokens":40,"max_tokens":9,
			"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather.","parameters":{"type":"object"}}}],
			"tool_choice":{"type":"function","function":{"name":"get_weather"}},
			"messages":[
				{"role":"system","content":"Be brief."},
				{"role":"developer","content":[{"type":"text","text":"Use tools."}]},
				{"role":"user","content":[{"type":"text","text":"Weather? "},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]},
				{"role":"assistant","content":null,"tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Oslo\"}"}},
					{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":""}}]},
				{"role":"tool","tool_call_id":"call_1","content":"Snow."},
				{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"Rain."}]},
				{"role":"assistant","content":"Snow and rain.","refusal":"No more."},
				{"role":"system","content":"Late note."}]}`,
		want: protocol.ChatContext{
			Instructions: "Be brief.\n\nUse tools.",
			Items: protocol.Items{
				&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "Weather? "}, &protocol.InputImage{ImageURL: ptr("https://x/y.png"), Detail: "low"}}},
				&protocol.FunctionCall{CallID: "call_1", Name: "get_weather", Arguments: `{"location":"Oslo"}`},
				&protocol.FunctionCall{CallID: "call_2", Name: "get_weather"},
				&protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "Snow."}},
				&protocol.FunctionCallOutput{CallID: "call_2", Output: protocol.ToolOutput{Text: "Rain."}},
				&protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: "Snow and rain.", Annotations: []protocol.Annotation{}}, &protocol.Refusal{Refusal: "No more."}}},
				&protocol.Message{Role: protocol.RoleSystem, Content: protocol.Contents{&protocol.InputText{Text: "Late note."}}},
			},
			Tools:           []protocol.Tool{{Type: protocol.ToolFunction, Name: "get_weather", Description: ptr("Weather."), Parameters: json.RawMessage(`{"type":"object"}`)}},
			ToolChoice:      protocol.ToolChoice{Mode: "required", Function: "get_weather"},
			MaxOutputTokens: 40,
		},
	},
	{
		name: "allowed tools and max_tokens",
		in: `{"model":"m","max_tokens":7,"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}],
			"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"b"}}]}},
			"messages":[{"role":"user","content":"hi"}]}`,
		want: protocol.ChatContext{
			Items:           protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "hi"}}}},
			Tools:           []protocol.Tool{{Type: protocol.ToolFunction, Name: "a"}, {Type: protocol.ToolFunction, Name: "b"}},
			ToolChoice:      protocol.ToolChoice{Mode: "required", Allowed: []protocol.ToolRef{{Type: "function", Name: "b"}}},
			MaxOutputTokens: 7,
		},
	},
}

func TestChatContext(t *testing.T) {
	t.Parallel()
	for _, tc := range chatCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, perr := protocol.DecodeChatRequest([]byte(tc.in))
			if perr != nil {
				t.Fatal(perr)
			}
			got, perr := r.Context()
			if perr != nil {
				t.Fatal(perr)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("context\n%s\nwant\n%s", mustMarshal(t, got), mustMarshal(t, tc.want))
			}
		})
	}
}

func TestChatContextErrors(t *testing.T) {
	t.Parallel()
	user := `{"role":"user","content":"hi"}`
	for _, tc := range []errCase{
		{"bad json", `{"model":"m","messages":[`, protocol.CodeInvalidJSON, ""},
		{"messages not an array", `{"model":"m","messages":{}}`, protocol.CodeInvalidType, "messages"},
		{"no model", `{"messages":[` + user + `]}`, protocol.CodeMissingRequired, "model"},
		{"empty messages", `{"model":"m","messages":[]}`, protocol.CodeInvalidValue, "messages"},
		{"no role", `{"model":"m","messages":[{"content":"x"}]}`, protocol.CodeMissingRequired, "messages[0].role"},
		{"assistant with nothing", `{"model":"m","messages":[` + user + `,{"role":"assistant"}]}`, protocol.CodeMissingRequired, "messages[1].content"},
		{"call without id", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			protocol.CodeMissingRequired, "messages[0].tool_calls[0].id"},
		{"bad call name", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"a b","arguments":"{}"}}]}]}`,
			protocol.CodeInvalidValue, "messages[0].tool_calls[0].function.name"},
		{"tool message first", `{"model":"m","messages":[{"role":"tool","tool_call_id":"c","content":"x"}]}`, protocol.CodeToolCallNotFound, "messages[0].tool_call_id"},
		{"audio part", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, protocol.CodeInvalidValue, "messages[0].content[0].type"},
		{"file by id", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file_1"}}]}]}`, protocol.CodeUnsupportedParameter, "messages[0].content[0].file"},
		{"image without url", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, protocol.CodeMissingRequired, "messages[0].content[0].image_url.url"},
		{"duplicate tools", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]}`,
			protocol.CodeInvalidValue, "tools[1].function.name"},
		{"parameters not an object", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`,
			protocol.CodeInvalidType, "tools[0].function.parameters"},
		{"tool choice type", `{"model":"m","messages":[` + user + `],"tool_choice":{"type":"custom"}}`, protocol.CodeInvalidValue, "tool_choice.type"},
		{"tool choice mode", `{"model":"m","messages":[` + user + `],"tool_choice":"sometimes"}`, protocol.CodeInvalidValue, "tool_choice"},
		{"max_completion_tokens", `{"model":"m","messages":[` + user + `],"max_completion_tokens":-1}`, protocol.CodeInvalidValue, "max_completion_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, perr := protocol.DecodeChatRequest([]byte(tc.in))
			if perr == nil {
				_, perr = r.Context()
			}
			if perr == nil {
				t.Fatal("accepted")
			}
			checkError(t, perr)
			if perr.Code != tc.code || perr.Param != tc.param {
				t.Errorf("got %s (%s): %s; want %s (%s)", perr.Code, perr.Param, perr.Message, tc.code, tc.param)
			}
		})
	}
}

// TestChatToolChoiceRoundTrip: every form decodes to the ToolChoice it
// means and encodes back to the same JSON.
func TestChatToolChoiceRoundTrip(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]protocol.ToolChoice{
		`"none"`:     {Mode: "none"},
		`"auto"`:     {Mode: "auto"},
		`"required"`: {Mode: "required"},
		`{"type":"function","function":{"name":"f"}}`:                                                                    {Mode: "required", Function: "f"},
		`{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"a"}}]}}`: {Mode: "auto", Allowed: []protocol.ToolRef{{Type: "function", Name: "a"}}},
	} {
		var c protocol.ChatToolChoice
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !reflect.DeepEqual(protocol.ToolChoice(c), want) {
			t.Errorf("%s decoded to %+v, want %+v", in, c, want)
		}
		if out, _ := json.Marshal(c); string(out) != in {
			t.Errorf("%s encoded back as %s", in, out)
		}
	}
}

// TestChatCompletionShape: the wire form of a tool-call completion and of
// chunks, field by field as OpenAI sends them.
func TestChatCompletionShape(t *testing.T) {
	t.Parallel()
	stop := "tool_calls"
	c := protocol.ChatCompletion{ID: "chatcmpl-1", Object: protocol.ObjectChatCompletion, Created: 5, Model: "m",
		Choices: []protocol.ChatChoice{{Message: &protocol.ChatReply{Role: protocol.RoleAssistant,
			ToolCalls: []protocol.ChatToolCall{{ID: "call_1", Type: "function", Function: protocol.ChatFunctionCall{Name: "f", Arguments: "{}"}}}},
			FinishReason: &stop}},
		Usage: &protocol.ChatUsage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}}
	want := `{"id":"chatcmpl-1","object":"chat.completion","created":5,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`
	if got := string(mustMarshal(t, c)); got != want {
		t.Errorf("completion\n%s\nwant\n%s", got, want)
	}
	i := 0
	chunk := protocol.ChatCompletion{ID: "chatcmpl-1", Object: protocol.ObjectChatCompletionChunk, Created: 5, Model: "m",
		Choices: []protocol.ChatChoice{{Delta: &protocol.ChatDelta{ToolCalls: []protocol.ChatToolCall{{Index: &i, Function: protocol.ChatFunctionCall{Arguments: `{"`}}}}}}}
	want = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\""}}]},"logprobs":null,"finish_reason":null}]}`
	if got := string(mustMarshal(t, chunk)); got != want {
		t.Errorf("chunk\n%s\nwant\n%s", got, want)
	}
}

func FuzzDecodeChatRequest(f *testing.F) {
	for _, c := range chatCases {
		f.Add([]byte(c.in))
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"x"}}]}],"tool_choice":"none"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, perr := protocol.DecodeChatRequest(data)
		if perr != nil {
			checkError(t, perr)
			return
		}
		c, perr := r.Context()
		if perr != nil {
			checkError(t, perr)
			if perr.Param != "" && !strings.HasPrefix(perr.Param, "messages") && !strings.HasPrefix(perr.Param, "tool") &&
				!strings.HasPrefix(perr.Param, "max_") && perr.Param != "model" && perr.Param != "n" {
				t.Fatalf("error param %q is not a chat request parameter", perr.Param)
			}
			return
		}
		// What Context accepts, the Responses validator accepts too.
		if verr := protocol.ValidateItems(c.Items, "input"); verr != nil {
			t.Fatalf("converted items fail validation: %v", verr)
		}
		cr := protocol.CreateRequest{Model: r.Model, Tools: c.Tools, ToolChoice: &c.ToolChoice}
		if verr := cr.Validate(); verr != nil {
			t.Fatalf("converted request fails validation: %v", verr)
		}
	})
}
