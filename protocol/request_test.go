package protocol_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
)

type createCase struct {
	name  string
	in    string
	check func(t *testing.T, r *protocol.CreateRequest)
}

var createCases = []createCase{
	{
		name: "string input is one user message",
		in:   `{"model":"gpt-5-nano","input":"What is the capital of France?","stream":true}`,
		check: func(t *testing.T, r *protocol.CreateRequest) {
			want := protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "What is the capital of France?"}}}}
			if !reflect.DeepEqual(r.Input, want) {
				t.Errorf("Input = %s, want %s", mustMarshal(t, r.Input), mustMarshal(t, want))
			}
			if !r.Streaming() || r.Model != "gpt-5-nano" {
				t.Errorf("Streaming() = %v, Model = %q", r.Streaming(), r.Model)
			}
		},
	},
	{
		name: "no input",
		in:   `{"model":"m","previous_response_id":"resp_1"}`,
		check: func(t *testing.T, r *protocol.CreateRequest) {
			if r.Input != nil || r.PreviousResponseID != "resp_1" {
				t.Errorf("Input = %#v, PreviousResponseID = %q", r.Input, r.PreviousResponseID)
			}
		},
	},
	{
		name: "null input",
		in:   `{"model":"m","input":null}`,
		check: func(t *testing.T, r *protocol.CreateRequest) {
			if r.Input != nil {
				t.Errorf("Input = %#v, want nil", r.Input)
			}
		},
	},
	{
		name: "item array keeps order and types",
		in: `{"model":"m","input":[
			{"role":"developer","content":"Be brief."},
			{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"},
			{"type":"function_call_output","call_id":"call_1","output":"ok"},
			{"type":"item_reference","id":"msg_1"}]}`,
		check: func(t *testing.T, r *protocol.CreateRequest) {
			var got []protocol.ItemType
			for _, it := range r.Input {
				got = append(got, it.ItemType())
			}
			want := []protocol.ItemType{protocol.ItemMessage, protocol.ItemFunctionCall, protocol.ItemFunctionCallOutput, protocol.ItemReference}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("item types = %v, want %v", got, want)
			}
		},
	},
	{
		name: "every field",
		in: `{"model":"m","instructions":"Be kind.","include":["reasoning.encrypted_content"],
			"tools":[{"type":"function","name":"get_weather","description":"Weather.","parameters":{"type":"object","properties":{},"additionalProperties":false},"strict":true},{"type":"web_search","search_context_size":"low"}],
			"tool_choice":{"type":"function","name":"get_weather"},"metadata":{"k":"v"},
			"text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false},"strict":true},"verbosity":"low"},
			"temperature":0.5,"top_p":0.9,"presence_penalty":0.1,"frequency_penalty":-0.1,"top_logprobs":3,
			"parallel_tool_calls":false,"stream":false,"background":false,"max_output_tokens":100,"max_tool_calls":2,
			"reasoning":{"effort":"low","summary":"auto"},"safety_identifier":"u1","prompt_cache_key":"p1",
			"prompt_cache_retention":"in_memory","truncation":"auto","store":false,"service_tier":"flex","user":"u","generate":false,"suspend":true}`,
		check: func(t *testing.T, r *protocol.CreateRequest) {
			switch {
			case r.Instructions == nil || *r.Instructions != "Be kind.":
				t.Errorf("Instructions = %v", r.Instructions)
			case !r.Includes("reasoning.encrypted_content") || r.Includes("x"):
				t.Errorf("Include = %v", r.Include)
			case len(r.Tools) != 2 || r.Tools[0].Name != "get_weather" || string(r.Tools[0].Parameters) != `{"type":"object","properties":{},"additionalProperties":false}` || r.Tools[1].Type != protocol.ToolWebSearch:
				t.Errorf("Tools = %s", mustMarshal(t, r.Tools))
			case r.ToolChoice == nil || r.ToolChoice.Function != "get_weather":
				t.Errorf("ToolChoice = %#v", r.ToolChoice)
			case r.Metadata["k"] != "v":
				t.Errorf("Metadata = %v", r.Metadata)
			case r.Text == nil || r.Text.Format.Type != "json_schema" || r.Text.Format.Name != "out" || r.Text.Verbosity != "low":
				t.Errorf("Text = %#v", r.Text)
			case *r.Temperature != 0.5 || *r.TopP != 0.9 || *r.PresencePenalty != 0.1 || *r.FrequencyPenalty != -0.1 || *r.TopLogprobs != 3:
				t.Errorf("sampling parameters = %v %v %v %v %v", *r.Temperature, *r.TopP, *r.PresencePenalty, *r.FrequencyPenalty, *r.TopLogprobs)
			case *r.ParallelToolCalls || r.Streaming() || *r.MaxOutputTokens != 100 || *r.MaxToolCalls != 2:
				t.Errorf("ParallelToolCalls/Stream/MaxOutputTokens/MaxToolCalls wrong")
			case *r.Reasoning.Effort != "low" || *r.Reasoning.Summary != "auto":
				t.Errorf("Reasoning = %#v", r.Reasoning)
			case r.Storing() || r.Generating() || !*r.Suspend || r.ServiceTier != "flex" || r.Truncation != "auto":
				t.Errorf("Store/Generate/Suspend/ServiceTier/Truncation wrong")
			case r.PromptCacheRetention == nil || *r.PromptCacheRetention != protocol.CacheInMemory:
				t.Errorf("PromptCacheRetention = %v", r.PromptCacheRetention)
			}
			if perr := r.Validate(); perr != nil {
				t.Errorf("Validate: %v", perr)
			}
		},
	},
	{
		name: "defaults",
		in:   `{"model":"m"}`,
		check: func(t *testing.T, r *protocol.CreateRequest) {
			if r.Streaming() || !r.Storing() || !r.Generating() {
				t.Errorf("Streaming/Storing/Generating = %v/%v/%v, want false/true/true", r.Streaming(), r.Storing(), r.Generating())
			}
		},
	},
	{
		name: "unknown fields from real clients are ignored",
		in:   `{"model":"m","input":"hi","client_metadata":{"x-codex":"1"},"stream_options":{"include_obfuscation":false},"some_future_field":[1,2]}`,
		check: func(t *testing.T, r *protocol.CreateRequest) {
			if len(r.Input) != 1 {
				t.Errorf("Input = %#v", r.Input)
			}
		},
	},
	{
		name: "leading whitespace before input",
		in:   "{\"model\":\"m\",\"input\":  \n\t\"hi\"}",
		check: func(t *testing.T, r *protocol.CreateRequest) {
			if len(r.Input) != 1 || r.Input[0].(*protocol.Message).Content.Text() != "hi" {
				t.Errorf("Input = %#v", r.Input)
			}
		},
	},
}

var createErrCases = []errCase{
	{"not JSON", `model=m`, protocol.CodeInvalidJSON, ""},
	{"empty body", ``, protocol.CodeInvalidJSON, ""},
	{"array body", `[{"model":"m"}]`, protocol.CodeInvalidJSON, ""},
	{"truncated", `{"model":"m","input":[`, protocol.CodeInvalidJSON, ""},
	{"model a number", `{"model":5}`, protocol.CodeInvalidType, "model"},
	{"temperature a string", `{"model":"m","temperature":"hot"}`, protocol.CodeInvalidType, "temperature"},
	{"nested field wrong type", `{"model":"m","text":{"format":{"type":1}}}`, protocol.CodeInvalidType, "text.format.type"},
	{"metadata value a number", `{"model":"m","metadata":{"k":1}}`, protocol.CodeInvalidType, "metadata.k"},
	{"input a number", `{"model":"m","input":5}`, protocol.CodeInvalidType, "input"},
	{"input an object", `{"model":"m","input":{"role":"user","content":"hi"}}`, protocol.CodeInvalidType, "input"},
	{"second item's content part type", `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"image"}]}]}`, protocol.CodeInvalidValue, "input[1].content[0].type"},
	{"second item's missing content part type", `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":[{"text":"b"}]}]}`, protocol.CodeMissingRequired, "input[1].content[0].type"},
	{"item without type", `{"model":"m","input":[{"call_id":"c","output":"x"}]}`, protocol.CodeMissingRequired, "input[0].type"},
	{"tool_choice unknown type", `{"model":"m","tool_choice":{"type":"teleport"}}`, protocol.CodeInvalidValue, "tool_choice.type"},
	{"allowed_tools entry unknown type", `{"model":"m","tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"f"},{"type":"teleport"}]}}`, protocol.CodeInvalidValue, "tool_choice.tools[1].type"},
	{"allowed_tools function without name", `{"model":"m","tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function"}]}}`, protocol.CodeMissingRequired, "tool_choice.tools[0].name"},
	{"tool_choice function without name", `{"model":"m","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function"}}`, protocol.CodeMissingRequired, "tool_choice.name"},
	{"tool_choice a number", `{"model":"m","tool_choice":1}`, protocol.CodeInvalidType, "tool_choice"},
}

func TestDecodeCreateRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range createCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, perr := protocol.DecodeCreateRequest([]byte(tc.in))
			if perr != nil {
				t.Fatalf("DecodeCreateRequest: %v", perr)
			}
			tc.check(t, r)
			roundTrip(t, r, protocol.DecodeCreateRequest)
		})
	}
}

func TestDecodeCreateRequestErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range createErrCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, perr := protocol.DecodeCreateRequest([]byte(tc.in))
			if r != nil {
				t.Errorf("DecodeCreateRequest returned a request with its error: %#v", r)
			}
			wantError(t, perr, tc.code, tc.param)
		})
	}
}

func TestCreateRequestMarshal(t *testing.T) {
	t.Parallel()
	r := &protocol.CreateRequest{Model: "m"}
	if got, want := string(mustMarshal(t, r)), `{"model":"m","input":[]}`; got != want {
		t.Fatalf("marshal = %s, want %s", got, want)
	}
	r.Input = protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "hi"}}}}
	r.Stream = ptr(true)
	want := `{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`
	if got := string(mustMarshal(t, r)); got != want {
		t.Fatalf("marshal = %s, want %s", got, want)
	}
}

// validateCases are create bodies; code "" means valid.
var validateCases = []errCase{
	{"minimal", `{"model":"m"}`, "", ""},
	{"missing model", `{"input":"hi"}`, protocol.CodeMissingRequired, "model"},
	{"temperature 0", `{"model":"m","temperature":0}`, "", ""},
	{"temperature 2", `{"model":"m","temperature":2}`, "", ""},
	{"temperature below 0", `{"model":"m","temperature":-0.1}`, protocol.CodeInvalidValue, "temperature"},
	{"temperature above 2", `{"model":"m","temperature":2.01}`, protocol.CodeInvalidValue, "temperature"},
	{"top_p 1", `{"model":"m","top_p":1}`, "", ""},
	{"top_p above 1", `{"model":"m","top_p":1.5}`, protocol.CodeInvalidValue, "top_p"},
	{"top_p below 0", `{"model":"m","top_p":-1}`, protocol.CodeInvalidValue, "top_p"},
	{"presence_penalty -2", `{"model":"m","presence_penalty":-2}`, "", ""},
	{"presence_penalty out of range", `{"model":"m","presence_penalty":2.5}`, protocol.CodeInvalidValue, "presence_penalty"},
	{"frequency_penalty out of range", `{"model":"m","frequency_penalty":-3}`, protocol.CodeInvalidValue, "frequency_penalty"},
	{"both penalties out of range name presence_penalty", `{"model":"m","frequency_penalty":-3,"presence_penalty":3}`, protocol.CodeInvalidValue, "presence_penalty"},
	{"top_logprobs 20", `{"model":"m","top_logprobs":20}`, "", ""},
	{"top_logprobs 21", `{"model":"m","top_logprobs":21}`, protocol.CodeInvalidValue, "top_logprobs"},
	{"max_output_tokens 0", `{"model":"m","max_output_tokens":0}`, protocol.CodeInvalidValue, "max_output_tokens"},
	{"max_tool_calls -1", `{"model":"m","max_tool_calls":-1}`, protocol.CodeInvalidValue, "max_tool_calls"},
	{"max_tool_calls 0", `{"model":"m","max_tool_calls":0}`, "", ""},
	{"truncation", `{"model":"m","truncation":"middle"}`, protocol.CodeInvalidValue, "truncation"},
	{"service_tier", `{"model":"m","service_tier":"turbo"}`, protocol.CodeInvalidValue, "service_tier"},
	{"service_tier fast", `{"model":"m","service_tier":"fast"}`, "", ""},
	{"prompt_cache_retention in_memory", `{"model":"m","prompt_cache_retention":"in_memory"}`, "", ""},
	{"prompt_cache_retention 24h", `{"model":"m","prompt_cache_retention":"24h"}`, "", ""},
	{"prompt_cache_retention 1h", `{"model":"m","prompt_cache_retention":"1h"}`, protocol.CodeInvalidValue, "prompt_cache_retention"},
	{"metadata 16 pairs", `{"model":"m","metadata":` + metadataPairs(16) + `}`, "", ""},
	{"metadata 17 pairs", `{"model":"m","metadata":` + metadataPairs(17) + `}`, protocol.CodeInvalidValue, "metadata"},
	{"metadata key 64 chars", `{"model":"m","metadata":{"` + strings.Repeat("k", 64) + `":"v"}}`, "", ""},
	{"metadata key 65 chars", `{"model":"m","metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`, protocol.CodeInvalidValue, "metadata"},
	{"metadata value 512 multibyte chars", `{"model":"m","metadata":{"k":"` + strings.Repeat("é", 512) + `"}}`, "", ""},
	{"metadata value 513 chars", `{"model":"m","metadata":{"k":"` + strings.Repeat("v", 513) + `"}}`, protocol.CodeInvalidValue, "metadata"},
	{"function tool", `{"model":"m","tools":[{"type":"function","name":"get_weather-2","parameters":{"type":"object"}}]}`, "", ""},
	{"multi_agent", `{"model":"m","multi_agent":{"enabled":true,"max_concurrent_subagents":2}}`, "", ""},
	{"multi_agent reasoning summary", `{"model":"m","multi_agent":{"enabled":true},"reasoning":{"summary":"auto"}}`, protocol.CodeUnsupportedParameter, "reasoning.summary"},
	{"multi_agent max_tool_calls", `{"model":"m","multi_agent":{"enabled":true},"max_tool_calls":5}`, protocol.CodeUnsupportedParameter, "max_tool_calls"},
	{"multi_agent off, max_tool_calls", `{"model":"m","multi_agent":{"enabled":false},"max_tool_calls":5,"reasoning":{"summary":"auto"}}`, "", ""},
	{"web_search tools", `{"model":"m","tools":[{"type":"web_search"},{"type":"web_search_preview"}]}`, "", ""},
	{"tool without type", `{"model":"m","tools":[{"name":"f"}]}`, protocol.CodeMissingRequired, "tools[0].type"},
	{"unknown tool type", `{"model":"m","tools":[{"type":"function","name":"f"},{"type":"teleport"}]}`, protocol.CodeInvalidValue, "tools[1].type"},
	{"hosted tool not run here", `{"model":"m","tools":[{"type":"function","name":"f"},{"type":"code_interpreter","container":{"type":"auto"}}]}`, protocol.CodeToolNotAvailable, "tools[1].type"},
	{"file_search not run here", `{"model":"m","tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`, protocol.CodeToolNotAvailable, "tools[0].type"},
	{"mcp connector", `{"model":"m","tools":[{"type":"mcp","server_label":"x","connector_id":"connector_gmail"}]}`, protocol.CodeToolNotAvailable, "tools[0].connector_id"},
	{"mcp without label", `{"model":"m","tools":[{"type":"mcp","server_url":"http://127.0.0.1:1"}]}`, protocol.CodeMissingRequired, "tools[0].server_label"},
	{"mcp bad label", `{"model":"m","tools":[{"type":"mcp","server_label":"a b","server_url":"http://127.0.0.1:1"}]}`, protocol.CodeInvalidValue, "tools[0].server_label"},
	{"mcp label taken", `{"model":"m","tools":[{"type":"function","name":"x"},{"type":"mcp","server_label":"x","server_url":"http://127.0.0.1:1"}]}`, protocol.CodeInvalidValue, "tools[1].server_label"},
	{"mcp bad approval", `{"model":"m","tools":[{"type":"mcp","server_label":"x","server_url":"http://127.0.0.1:1","require_approval":"sometimes"}]}`, protocol.CodeInvalidValue, "tools[0].require_approval"},
	{"codex tools", `{"model":"m","tools":[{"type":"function","name":"exec_command"},{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[{"type":"function","name":"spawn_agent","parameters":{"type":"object"}},{"type":"function","name":"wait_agent"},{"type":"custom","name":"exec"}]},{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":"start: /.+/"}},{"type":"tool_search","execution":"client","description":"Find tools.","parameters":{"type":"object"}},{"type":"web_search","external_web_access":false}]}`, "", ""},
	{"client tool types", `{"model":"m","tools":[{"type":"local_shell"},{"type":"shell","environment":{"type":"local"}},{"type":"apply_patch"},{"type":"computer"},{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"linux"},{"type":"custom","name":"raw","format":{"type":"text"}},{"type":"web_search_2025_08_26"}]}`, "", ""},
	{"shell in a container", `{"model":"m","tools":[{"type":"shell","environment":{"type":"container_auto"}}]}`, protocol.CodeToolNotAvailable, "tools[0].type"},
	{"shell environment unknown", `{"model":"m","tools":[{"type":"shell","environment":{"type":"moon"}}]}`, protocol.CodeInvalidValue, "tools[0].environment.type"},
	{"hosted tool search", `{"model":"m","tools":[{"type":"tool_search"}]}`, protocol.CodeToolNotAvailable, "tools[0].type"},
	{"tool search execution unknown", `{"model":"m","tools":[{"type":"tool_search","execution":"both"}]}`, protocol.CodeInvalidValue, "tools[0].execution"},
	{"namespace in a namespace", `{"model":"m","tools":[{"type":"function","name":"f"},{"type":"namespace","name":"a","tools":[{"type":"function","name":"g"},{"type":"function","name":"h"},{"type":"namespace","name":"b","tools":[{"type":"function","name":"i"}]}]}]}`, protocol.CodeInvalidValue, "tools[1].tools[2].type"},
	{"web_search in a namespace", `{"model":"m","tools":[{"type":"namespace","name":"a","tools":[{"type":"web_search"}]}]}`, protocol.CodeInvalidValue, "tools[0].tools[0].type"},
	{"empty namespace", `{"model":"m","tools":[{"type":"namespace","name":"a","tools":[]}]}`, protocol.CodeMissingRequired, "tools[0].tools"},
	{"namespace member without name", `{"model":"m","tools":[{"type":"namespace","name":"a","tools":[{"type":"function","name":"g"},{"type":"function"}]}]}`, protocol.CodeMissingRequired, "tools[0].tools[1].name"},
	{"duplicate in a namespace", `{"model":"m","tools":[{"type":"namespace","name":"a","tools":[{"type":"function","name":"g"},{"type":"custom","name":"g"}]}]}`, protocol.CodeInvalidValue, "tools[0].tools[1].name"},
	{"same name in two namespaces", `{"model":"m","tools":[{"type":"function","name":"g"},{"type":"namespace","name":"a","tools":[{"type":"function","name":"g"}]},{"type":"namespace","name":"b","tools":[{"type":"function","name":"g"}]}]}`, "", ""},
	{"namespace named like a function", `{"model":"m","tools":[{"type":"function","name":"a"},{"type":"namespace","name":"a","tools":[{"type":"function","name":"g"}]}]}`, protocol.CodeInvalidValue, "tools[1].name"},
	{"custom named like a function", `{"model":"m","tools":[{"type":"function","name":"a"},{"type":"custom","name":"a"}]}`, protocol.CodeInvalidValue, "tools[1].name"},
	{"grammar syntax unknown", `{"model":"m","tools":[{"type":"custom","name":"c","format":{"type":"grammar","syntax":"peg","definition":"x"}}]}`, protocol.CodeInvalidValue, "tools[0].format.syntax"},
	{"grammar without definition", `{"model":"m","tools":[{"type":"custom","name":"c","format":{"type":"grammar","syntax":"regex"}}]}`, protocol.CodeMissingRequired, "tools[0].format.definition"},
	{"custom format unknown", `{"model":"m","tools":[{"type":"custom","name":"c","format":{"type":"json"}}]}`, protocol.CodeInvalidValue, "tools[0].format.type"},
	{"tool without name", `{"model":"m","tools":[{"type":"function"}]}`, protocol.CodeMissingRequired, "tools[0].name"},
	{"tool name with a space", `{"model":"m","tools":[{"type":"function","name":"get weather"}]}`, protocol.CodeInvalidValue, "tools[0].name"},
	{"tool name with a dot", `{"model":"m","tools":[{"type":"function","name":"a.b"}]}`, protocol.CodeInvalidValue, "tools[0].name"},
	{"tool name 64 chars", `{"model":"m","tools":[{"type":"function","name":"` + strings.Repeat("f", 64) + `"}]}`, "", ""},
	{"tool name 65 chars", `{"model":"m","tools":[{"type":"function","name":"` + strings.Repeat("f", 65) + `"}]}`, protocol.CodeInvalidValue, "tools[0].name"},
	{"duplicate tool", `{"model":"m","tools":[{"type":"function","name":"f"},{"type":"function","name":"g"},{"type":"function","name":"f"}]}`, protocol.CodeInvalidValue, "tools[2].name"},
	{"parameters not an object", `{"model":"m","tools":[{"type":"function","name":"f","parameters":"{}"}]}`, protocol.CodeInvalidType, "tools[0].parameters"},
	{"null parameters", `{"model":"m","tools":[{"type":"function","name":"f","parameters":null}]}`, "", ""},
	{"128 tools", `{"model":"m","tools":` + functionTools(128) + `}`, "", ""},
	{"129 tools", `{"model":"m","tools":` + functionTools(129) + `}`, protocol.CodeInvalidValue, "tools"},
	{"tool_choice modes", `{"model":"m","tool_choice":"required","tools":[{"type":"function","name":"f"}]}`, "", ""},
	{"tool_choice unknown mode", `{"model":"m","tool_choice":"always"}`, protocol.CodeInvalidValue, "tool_choice"},
	{"tool_choice function present", `{"model":"m","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"}}`, "", ""},
	{"tool_choice function missing", `{"model":"m","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, protocol.CodeInvalidValue, "tool_choice"},
	{"tool_choice function without tools", `{"model":"m","tool_choice":{"type":"function","name":"g"}}`, protocol.CodeInvalidValue, "tool_choice"},
	{"allowed_tools present", `{"model":"m","tools":[{"type":"function","name":"f"},{"type":"function","name":"g"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"g"}]}}`, "", ""},
	{"allowed_tools missing", `{"model":"m","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"f"},{"type":"function","name":"h"}]}}`, protocol.CodeInvalidValue, "tool_choice"},
	{"tool_choice custom present", `{"model":"m","tools":[{"type":"custom","name":"c"}],"tool_choice":{"type":"custom","name":"c"}}`, "", ""},
	{"tool_choice custom is not a function", `{"model":"m","tools":[{"type":"function","name":"c"}],"tool_choice":{"type":"custom","name":"c"}}`, protocol.CodeInvalidValue, "tool_choice"},
	{"tool_choice namespace member", `{"model":"m","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f"}]}],"tool_choice":{"type":"function","name":"f"}}`, "", ""},
	{"tool_choice built-in present", `{"model":"m","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search_preview"}}`, "", ""},
	{"tool_choice shell present", `{"model":"m","tools":[{"type":"shell","environment":{"type":"local"}}],"tool_choice":{"type":"shell"}}`, "", ""},
	{"tool_choice built-in missing", `{"model":"m","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"apply_patch"}}`, protocol.CodeInvalidValue, "tool_choice"},
	{"tool_choice mcp never offered", `{"model":"m","tool_choice":{"type":"mcp","server_label":"x"}}`, protocol.CodeInvalidValue, "tool_choice"},
	{"allowed_tools of every kind", `{"model":"m","tools":[{"type":"function","name":"f"},{"type":"custom","name":"c"},{"type":"apply_patch"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","name":"c"},{"type":"apply_patch"}]}}`, "", ""},
	{"allowed_tools bad mode", `{"model":"m","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools","mode":"sometimes","tools":[]}}`, protocol.CodeInvalidValue, "tool_choice"},
	{"text format text", `{"model":"m","text":{"format":{"type":"text"}}}`, "", ""},
	{"text format json_object", `{"model":"m","text":{"format":{"type":"json_object"}}}`, "", ""},
	{"text format json_schema", `{"model":"m","text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object"}}}}`, "", ""},
	{"text format json_schema without name", `{"model":"m","text":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`, protocol.CodeMissingRequired, "text.format.name"},
	{"text format unknown", `{"model":"m","text":{"format":{"type":"yaml"}}}`, protocol.CodeInvalidValue, "text.format.type"},
}

func metadataPairs(n int) string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("key%d", i)] = "v"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func functionTools(n int) string {
	tools := make([]string, n)
	for i := range tools {
		tools[i] = fmt.Sprintf(`{"type":"function","name":"f%d"}`, i)
	}
	return "[" + strings.Join(tools, ",") + "]"
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, perr := protocol.DecodeCreateRequest([]byte(tc.in))
			if perr != nil {
				t.Fatalf("DecodeCreateRequest: %v", perr)
			}
			perr = r.Validate()
			if tc.code == "" {
				if perr != nil {
					t.Fatalf("Validate: %v", perr)
				}
				return
			}
			wantError(t, perr, tc.code, tc.param)
		})
	}
}

// validateItemsCases are input arrays; code "" means valid.
var validateItemsCases = []errCase{
	{"user text, image, file, video", `[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/png;base64,AA","detail":"low"},{"type":"input_file","file_data":"x"},{"type":"input_video","video_url":"https://x/v.mp4"}]}]`, "", ""},
	{"assistant output_text and refusal", `[{"role":"assistant","content":[{"type":"output_text","text":"a"},{"type":"refusal","refusal":"b"}],"phase":"commentary"}]`, "", ""},
	{"message without role", `[{"type":"message","content":"x"}]`, protocol.CodeMissingRequired, "input[0].role"},
	{"unknown role", `[{"role":"tool","content":"x"}]`, protocol.CodeInvalidValue, "input[0].role"},
	{"system message with image", `[{"role":"user","content":"a"},{"role":"system","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"https://x"}]}]`, protocol.CodeInvalidValue, "input[1].content[1].type"},
	{"user message with output_text", `[{"role":"user","content":[{"type":"output_text","text":"a"}]}]`, protocol.CodeInvalidValue, "input[0].content[0].type"},
	{"assistant message with input_text", `[{"type":"message","role":"assistant","content":[{"type":"input_text","text":"a"}]}]`, protocol.CodeInvalidValue, "input[0].content[0].type"},
	{"unknown phase", `[{"role":"assistant","content":"a","phase":"draft"}]`, protocol.CodeInvalidValue, "input[0].phase"},
	{"unknown message status", `[{"role":"user","content":"a","status":"done"}]`, protocol.CodeInvalidValue, "input[0].status"},
	{"image without url", `[{"role":"user","content":[{"type":"input_image"}]}]`, protocol.CodeMissingRequired, "input[0].content[0].image_url"},
	{"image detail", `[{"role":"user","content":[{"type":"input_image","image_url":"https://x","detail":"max"}]}]`, protocol.CodeInvalidValue, "input[0].content[0].detail"},
	{"function_call", `[{"type":"function_call","call_id":"call_1","name":"f","arguments":"{\"a\":1}","status":"completed"}]`, "", ""},
	{"function_call without call_id", `[{"type":"function_call","name":"f","arguments":"{}"}]`, protocol.CodeMissingRequired, "input[0].call_id"},
	{"function_call call_id 65 chars", `[{"type":"function_call","call_id":"` + strings.Repeat("c", 65) + `","name":"f"}]`, protocol.CodeInvalidValue, "input[0].call_id"},
	{"function_call without name", `[{"type":"function_call","call_id":"c"}]`, protocol.CodeMissingRequired, "input[0].name"},
	{"function_call bad name", `[{"type":"function_call","call_id":"c","name":"a b"}]`, protocol.CodeInvalidValue, "input[0].name"},
	{"function_call arguments not JSON", `[{"type":"function_call","call_id":"c","name":"f","arguments":"{oops"}]`, protocol.CodeInvalidValue, "input[0].arguments"},
	{"function_call bad status", `[{"type":"function_call","call_id":"c","name":"f","status":"running"}]`, protocol.CodeInvalidValue, "input[0].status"},
	{"function_call_output without call_id", `[{"type":"function_call_output","output":"ok"}]`, protocol.CodeMissingRequired, "input[0].call_id"},
	{"function_call_output with output_text part", `[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"a"},{"type":"output_text","text":"b"}]}]`, protocol.CodeInvalidValue, "input[0].output[1].type"},
	{"function_call_output bad status", `[{"type":"function_call_output","call_id":"c","output":"ok","status":"x"}]`, protocol.CodeInvalidValue, "input[0].status"},
	{"reasoning", `[{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}],"encrypted_content":"e"}]`, "", ""},
	{"reasoning summary not summary_text", `[{"type":"reasoning","summary":"plain"}]`, protocol.CodeInvalidValue, "input[0].summary[0].type"},
	{"compaction without encrypted_content", `[{"type":"compaction"}]`, protocol.CodeMissingRequired, "input[0].encrypted_content"},
	{"item_reference without id", `[{"type":"item_reference"}]`, protocol.CodeMissingRequired, "input[0].id"},
}

func TestValidateItems(t *testing.T) {
	t.Parallel()
	for _, tc := range validateItemsCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			items, perr := protocol.DecodeItems(json.RawMessage(tc.in), "input")
			if perr != nil {
				t.Fatalf("DecodeItems: %v", perr)
			}
			perr = protocol.ValidateItems(items, "input")
			if tc.code == "" {
				if perr != nil {
					t.Fatalf("ValidateItems: %v", perr)
				}
				return
			}
			wantError(t, perr, tc.code, tc.param)
		})
	}
}

func TestValidateStreamID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"lane-1_b.c", true},
		{strings.Repeat("s", protocol.MaxStreamIDLen), true},
		{"", false},
		{strings.Repeat("s", protocol.MaxStreamIDLen+1), false},
		{"a b", false},
		{"a/b", false},
		{"é", false},
		{"a\n", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%.20q", tc.id), func(t *testing.T) {
			t.Parallel()
			perr := protocol.ValidateStreamID(tc.id)
			if tc.ok {
				if perr != nil {
					t.Fatalf("ValidateStreamID: %v", perr)
				}
				return
			}
			wantError(t, perr, protocol.CodeInvalidStreamID, "stream_id")
		})
	}
}
