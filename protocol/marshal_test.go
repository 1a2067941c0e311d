package protocol_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// responseRequired is every field the Open Responses schema requires of the
// response object.
var responseRequired = []string{
	"id", "object", "created_at", "completed_at", "status", "incomplete_details", "model",
	"previous_response_id", "instructions", "output", "error", "tools", "tool_choice",
	"truncation", "parallel_tool_calls", "text", "top_p", "presence_penalty",
	"frequency_penalty", "top_logprobs", "temperature", "reasoning", "usage",
	"max_output_tokens", "max_tool_calls", "store", "background", "service_tier",
	"metadata", "safety_identifier", "prompt_cache_key",
}

// sampleResponse is a completed response as the runtime builds it.
func sampleResponse() *protocol.Response {
	return &protocol.Response{
		ID:          "resp_1",
		Object:      "response",
		CreatedAt:   1767368377,
		CompletedAt: ptr(int64(1767368379)),
		Status:      protocol.ResponseCompleted,
		Model:       "gpt-5-nano",
		Output: protocol.Items{
			&protocol.Reasoning{ID: "rs_1", Summary: protocol.Contents{}},
			&protocol.Message{ID: "msg_1", Status: protocol.StatusCompleted, Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: "Paris."}}},
			&protocol.FunctionCall{ID: "fc_1", CallID: "call_1", Name: "get_weather", Arguments: `{"location":"Paris"}`, Status: protocol.StatusCompleted},
		},
		Tools:             []protocol.Tool{{Type: protocol.ToolFunction, Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}},
		Truncation:        "disabled",
		ParallelToolCalls: true,
		Text:              protocol.TextConfig{Format: protocol.TextFormat{Type: "text"}},
		TopP:              1,
		Temperature:       1,
		Reasoning:         protocol.ReasoningConfig{Effort: ptr("medium")},
		Usage: &protocol.Usage{
			InputTokens: 10, OutputTokens: 5, TotalTokens: 15,
			InputTokensDetails:  protocol.InputTokensDetails{CachedTokens: 2},
			OutputTokensDetails: protocol.OutputTokensDetails{ReasoningTokens: 1},
		},
		Store:       true,
		ServiceTier: "default",
		Metadata:    map[string]string{},
	}
}

func TestResponseHasEveryRequiredField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    *protocol.Response
	}{
		{"as the runtime builds it", sampleResponse()},
		{"zero value", &protocol.Response{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := object(t, mustMarshal(t, tc.r))
			for _, k := range responseRequired {
				if _, ok := m[k]; !ok {
					t.Errorf("response has no %q", k)
				}
			}
			for _, k := range []string{"required_action", "timings"} {
				if _, ok := m[k]; ok {
					t.Errorf("response has %q although it is unset", k)
				}
			}
		})
	}
}

func TestResponseNullableFields(t *testing.T) {
	t.Parallel()
	m := object(t, mustMarshal(t, &protocol.Response{Output: protocol.Items{}, Tools: []protocol.Tool{}, Metadata: map[string]string{}}))
	want := map[string]string{
		"completed_at": "null", "incomplete_details": "null", "previous_response_id": "null",
		"instructions": "null", "error": "null", "usage": "null", "max_output_tokens": "null",
		"max_tool_calls": "null", "safety_identifier": "null", "prompt_cache_key": "null",
		"reasoning": `{"effort":null,"summary":null}`, "tool_choice": `"auto"`,
		"output": "[]", "tools": "[]", "metadata": "{}",
	}
	for k, v := range want {
		if got := string(m[k]); got != v {
			t.Errorf("%s = %s, want %s", k, got, v)
		}
	}
}

func TestResponseRoundTrip(t *testing.T) {
	t.Parallel()
	r := sampleResponse()
	r.RequiredAction = &protocol.RequiredAction{Type: "submit_tool_outputs", SubmitToolOutputs: protocol.SubmitToolOutputs{ToolCalls: []protocol.PendingCall{{CallID: "call_1", Name: "get_weather", Arguments: "{}"}}}}
	r.Timings = &protocol.Timings{DecodeMicros: 1, TotalMicros: 9, RenderedTokens: 3}
	ev := &protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventDone, SequenceNumber: 12}, Response: r}
	b := mustMarshal(t, ev)
	back, perr := protocol.DecodeEvent(b)
	if perr != nil {
		t.Fatalf("DecodeEvent: %v", perr)
	}
	if got := mustMarshal(t, back); string(got) != string(b) {
		t.Fatalf("response changed in a round trip\n got %s\nwant %s", got, b)
	}
}

func TestToolMarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		tool protocol.Tool
		want string
	}{
		{
			name: "function tool echoes unset fields as null",
			tool: protocol.Tool{Type: protocol.ToolFunction, Name: "f"},
			want: `{"type":"function","name":"f","description":null,"parameters":null,"strict":null}`,
		},
		{
			name: "function tool with every field",
			tool: protocol.Tool{Type: protocol.ToolFunction, Name: "f", Description: ptr("Does f."), Parameters: json.RawMessage(`{"type":"object"}`), Strict: ptr(true)},
			want: `{"type":"function","name":"f","description":"Does f.","parameters":{"type":"object"},"strict":true}`,
		},
		{
			name: "function tool ignores its raw form",
			tool: protocol.Tool{Type: protocol.ToolFunction, Name: "f", Raw: json.RawMessage(`{"type":"function","name":"f","extra":1}`)},
			want: `{"type":"function","name":"f","description":null,"parameters":null,"strict":null}`,
		},
		{
			name: "hosted tool echoes what the client sent",
			tool: protocol.Tool{Type: protocol.ToolWebSearch, Raw: json.RawMessage(`{"type":"web_search","search_context_size":"low"}`)},
			want: `{"type":"web_search","search_context_size":"low"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := string(mustMarshal(t, tc.tool)); got != tc.want {
				t.Fatalf("marshal\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestToolUnmarshal(t *testing.T) {
	t.Parallel()
	in := `{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":false,"x-extra":1}`
	var tool protocol.Tool
	if err := json.Unmarshal([]byte(in), &tool); err != nil {
		t.Fatal(err)
	}
	want := protocol.Tool{Type: protocol.ToolFunction, Name: "f", Description: ptr("d"), Parameters: json.RawMessage(`{"type":"object"}`), Strict: ptr(false), Raw: json.RawMessage(in)}
	if !reflect.DeepEqual(tool, want) {
		t.Fatalf("Unmarshal = %#v, want %#v", tool, want)
	}
}

func TestToolChoiceRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want protocol.ToolChoice
		out  string
	}{
		{"auto", `"auto"`, protocol.ToolChoice{Mode: "auto"}, `"auto"`},
		{"none", `"none"`, protocol.ToolChoice{Mode: "none"}, `"none"`},
		{"required", `"required"`, protocol.ToolChoice{Mode: "required"}, `"required"`},
		{"empty string means auto", `""`, protocol.ToolChoice{}, `"auto"`},
		{"function", `{"type":"function","name":"get_weather"}`, protocol.ToolChoice{Mode: "required", Function: "get_weather"}, `{"type":"function","name":"get_weather"}`},
		{"custom", `{"type":"custom","name":"apply_patch"}`, protocol.ToolChoice{Mode: "required", Custom: "apply_patch"}, `{"type":"custom","name":"apply_patch"}`},
		{"built-in", `{"type":"web_search_preview"}`, protocol.ToolChoice{Mode: "required", Builtin: "web_search_preview"}, `{"type":"web_search_preview"}`},
		{
			"allowed_tools of every kind",
			`{"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","name":"c"},{"type":"shell"},{"type":"web_search"}]}`,
			protocol.ToolChoice{Mode: "auto", Allowed: []protocol.ToolRef{{Type: "custom", Name: "c"}, {Type: "shell"}, {Type: "web_search"}}},
			`{"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","name":"c"},{"type":"shell"},{"type":"web_search"}]}`,
		},
		{
			"allowed_tools",
			`{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"a"},{"type":"function","name":"b"}]}`,
			protocol.ToolChoice{Mode: "required", Allowed: []protocol.ToolRef{{Type: "function", Name: "a"}, {Type: "function", Name: "b"}}},
			`{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"a"},{"type":"function","name":"b"}]}`,
		},
		{
			"allowed_tools without mode is auto",
			`{"type":"allowed_tools","tools":[]}`,
			protocol.ToolChoice{Allowed: []protocol.ToolRef{}},
			`{"type":"allowed_tools","mode":"auto","tools":[]}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c protocol.ToolChoice
			if err := json.Unmarshal([]byte(tc.in), &c); err != nil {
				t.Fatalf("Unmarshal(%s): %v", tc.in, err)
			}
			if !reflect.DeepEqual(c, tc.want) {
				t.Fatalf("Unmarshal(%s) = %#v, want %#v", tc.in, c, tc.want)
			}
			out := mustMarshal(t, c)
			if string(out) != tc.out {
				t.Fatalf("Marshal = %s, want %s", out, tc.out)
			}
			var again protocol.ToolChoice
			if err := json.Unmarshal(out, &again); err != nil {
				t.Fatalf("Unmarshal(%s): %v", out, err)
			}
			if got := mustMarshal(t, again); string(got) != string(out) {
				t.Fatalf("second round trip = %s, want %s", got, out)
			}
		})
	}
}

func TestToolChoiceZeroValueIsAuto(t *testing.T) {
	t.Parallel()
	if got := string(mustMarshal(t, protocol.ToolChoice{})); got != `"auto"` {
		t.Fatalf("zero ToolChoice marshals as %s, want \"auto\"", got)
	}
}

func TestWebSocketError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    *protocol.Error
		stream string
		want   string
	}{
		{
			name: "param null when empty",
			err:  protocol.Errorf(http.StatusBadRequest, protocol.CodeUnknownEventType, "", "Unknown."),
			want: `{"type":"error","status":400,"error":{"type":"invalid_request_error","code":"unknown_event_type","message":"Unknown.","param":null}}`,
		},
		{
			name:   "param and stream_id",
			err:    protocol.Invalid(protocol.CodeInvalidValue, "input[0].content[1].type", "Bad."),
			stream: "lane-1",
			want:   `{"type":"error","status":400,"stream_id":"lane-1","error":{"type":"invalid_request_error","code":"invalid_value","message":"Bad.","param":"input[0].content[1].type"}}`,
		},
		{
			name: "previous_response_not_found stays invalid_request_error",
			err:  protocol.Errorf(http.StatusNotFound, protocol.CodePreviousResponseNotFound, "previous_response_id", "Previous response with id 'resp_x' not found."),
			want: `{"type":"error","status":404,"error":{"type":"invalid_request_error","code":"previous_response_not_found","message":"Previous response with id 'resp_x' not found.","param":"previous_response_id"}}`,
		},
		{
			name: "a 404 is an invalid_request_error too, as OpenAI sends it",
			err:  protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "", "No response."),
			want: `{"type":"error","status":404,"error":{"type":"invalid_request_error","code":"response_not_found","message":"No response.","param":null}}`,
		},
		{
			name: "5xx is server_error",
			err:  protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeServerError, "", "Busy."),
			want: `{"type":"error","status":503,"error":{"type":"server_error","code":"server_error","message":"Busy.","param":null}}`,
		},
		{
			name: "code null when empty",
			err:  &protocol.Error{Status: 400, Type: protocol.InvalidRequest, Message: "No code."},
			want: `{"type":"error","status":400,"error":{"type":"invalid_request_error","code":null,"message":"No code.","param":null}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := string(mustMarshal(t, tc.err.WebSocketError(tc.stream))); got != tc.want {
				t.Fatalf("WebSocketError\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestHTTPErrorBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *protocol.Error
		want string
	}{
		{
			"with param",
			protocol.Invalid(protocol.CodeMissingRequired, "model", "Missing required parameter: 'model'."),
			`{"error":{"type":"invalid_request_error","code":"missing_required_parameter","message":"Missing required parameter: 'model'.","param":"model"}}`,
		},
		{
			"without param",
			protocol.Errorf(http.StatusMethodNotAllowed, protocol.CodeMethodNotAllowed, "", "Use POST."),
			`{"error":{"type":"invalid_request_error","code":"method_not_allowed","message":"Use POST.","param":null}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := string(tc.err.HTTPErrorBody()); got != tc.want {
				t.Fatalf("HTTPErrorBody\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestStreamAndResponseError(t *testing.T) {
	t.Parallel()
	e := protocol.Invalid(protocol.CodeInvalidValue, "top_p", "Bad top_p.")
	got := string(mustMarshal(t, e.StreamError()))
	want := `{"type":"error","sequence_number":0,"error":{"type":"invalid_request_error","code":"invalid_value","message":"Bad top_p.","param":"top_p"}}`
	if got != want {
		t.Errorf("StreamError\n got %s\nwant %s", got, want)
	}
	if got, want := string(mustMarshal(t, e.ResponseError())), `{"code":"invalid_value","message":"Bad top_p."}`; got != want {
		t.Errorf("ResponseError = %s, want %s", got, want)
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *protocol.Error
		want string
	}{
		{protocol.Invalid(protocol.CodeInvalidValue, "top_p", "Bad."), "invalid_value (top_p): Bad."},
		{protocol.Invalid(protocol.CodeInvalidJSON, "", "Bad %s.", "frame"), "invalid_json: Bad frame."},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			if got := tc.err.Error(); got != tc.want {
				t.Fatalf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAsError(t *testing.T) {
	t.Parallel()
	if protocol.AsError(nil) != nil {
		t.Error("AsError(nil) != nil")
	}
	pe := protocol.Invalid(protocol.CodeInvalidValue, "x", "y")
	if protocol.AsError(pe) != pe {
		t.Error("AsError does not return a protocol error unchanged")
	}
	got := protocol.AsError(errors.New("disk on fire"))
	if got.Status != http.StatusInternalServerError || got.Type != protocol.ServerError || got.Code != protocol.CodeServerError || got.Param != "" {
		t.Errorf("AsError(plain) = %#v, want a 500 server_error", got)
	}
}

func TestUsageAdd(t *testing.T) {
	t.Parallel()
	u := protocol.Usage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12, InputTokensDetails: protocol.InputTokensDetails{CachedTokens: 4}}
	u.Add(protocol.Usage{InputTokens: 5, OutputTokens: 3, TotalTokens: 999, OutputTokensDetails: protocol.OutputTokensDetails{ReasoningTokens: 1}})
	want := protocol.Usage{InputTokens: 15, OutputTokens: 5, TotalTokens: 20, InputTokensDetails: protocol.InputTokensDetails{CachedTokens: 4}, OutputTokensDetails: protocol.OutputTokensDetails{ReasoningTokens: 1}}
	if u != want {
		t.Fatalf("Add = %+v, want %+v", u, want)
	}
}
