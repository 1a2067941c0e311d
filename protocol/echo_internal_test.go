package protocol

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/tether-run/tether/internal/schematest"
)

// TestEchoSameBytes: a response with a kept echo, and every shallow copy of
// it a running rollout makes (a pause's step view, a resume, the end),
// encodes to the bytes the general encoder writes; so does one whose echo
// changed after it was kept, which the echo must not be used for.
func TestEchoSameBytes(t *testing.T) {
	for name, resp := range echoResponses(t) {
		t.Run(name, func(t *testing.T) {
			if err := resp.KeepEcho(); err != nil {
				t.Fatal(err)
			}
			one, offset, failed := 1, 3, int64(1700000001)
			views := map[string]func(r *Response){
				"as kept": func(*Response) {},
				"paused": func(r *Response) {
					r.Status, r.OutputOffset = ResponseRequiresAction, &offset
					r.RequiredAction = &RequiredAction{Type: "submit_tool_outputs", SubmitToolOutputs: SubmitToolOutputs{
						ToolCalls: []PendingCall{{Type: ItemFunctionCall, CallID: "call_1", Name: "read", Arguments: `{"p":"<a>"}`}}}}
				},
				"resumed": func(r *Response) {
					r.Status, r.Usage = ResponseInProgress, &Usage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12}
					r.Timings = &Timings{RenderMicros: 5, Frames: 3}
				},
				"failed": func(r *Response) {
					r.Status, r.CompletedAt = ResponseFailed, &failed
					r.Error = &ResponseError{Code: "server_error", Message: "went <away> & back"}
					r.IncompleteDetails = &IncompleteDetails{Reason: "max_output_tokens"}
					r.Output = Items{}
				},
				"forked": func(r *Response) {
					from := "resp_parent"
					r.ForkedFrom, r.MaxToolCalls = &from, &one // a new pointer: the echo is not used
				},
				"new id": func(r *Response) { r.ID = "resp_other" },
				"new tools": func(r *Response) {
					r.Tools = append([]Tool{{Type: ToolFunction, Name: "extra", Parameters: []byte(`{}`)}}, r.Tools...)
				},
				"new metadata": func(r *Response) { r.Metadata = map[string]string{"k": "v"} },
			}
			for view, change := range views {
				v := *resp
				change(&v)
				for what, val := range map[string]any{"response": &v, "event": &ResponseEvent{
					EventHeader: EventHeader{Type: EventInProgress, SequenceNumber: 7, StreamID: "lane.1"}, Response: &v}} {
					want, err := jsonv2.Marshal(val, v1Options)
					if err != nil {
						t.Fatal(err)
					}
					got, err := AppendMarshal([]byte("prefix"), val)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got[len("prefix"):], want) {
						t.Errorf("%s, %s:\n got %s\nwant %s", view, what, got[len("prefix"):], want)
					}
					if m, err := Marshal(val); err != nil || !bytes.Equal(m, want) {
						t.Errorf("%s, %s: Marshal gives %s (%v)", view, what, m, err)
					}
				}
			}
		})
	}
}

// TestEchoUsed: the kept echo is what a response is encoded from while its
// echo is unchanged (a change the comparison misses shows), and not once
// it has changed.
func TestEchoUsed(t *testing.T) {
	r := &Response{ID: "resp_1", Object: "response", Model: "m", Tools: []Tool{}, Metadata: map[string]string{}}
	if err := r.KeepEcho(); err != nil {
		t.Fatal(err)
	}
	r.echo.runs[1] = []byte(`"model":"kept"`)
	if b, _ := AppendMarshal(nil, r); !bytes.Contains(b, []byte(`"model":"kept"`)) {
		t.Errorf("kept echo not used: %s", b)
	}
	r.Model = "other"
	if b, _ := AppendMarshal(nil, r); !bytes.Contains(b, []byte(`"model":"other"`)) {
		t.Errorf("a changed echo used: %s", b)
	}
}

// TestEchoCoversResponse: every field of Response is in exactly one of the
// echo's runs and state groups, in Response's order, with its tag and type.
func TestEchoCoversResponse(t *testing.T) {
	var fields []reflect.StructField
	for _, g := range []any{echoRun1{}, stateRun1{}, echoRun2{}, stateRun2{}, echoRun3{}, stateRun3{}, echoRun4{}, stateRun4{}} {
		gt := reflect.TypeOf(g)
		for i := range gt.NumField() {
			fields = append(fields, gt.Field(i))
		}
	}
	rt := reflect.TypeFor[Response]()
	var want []reflect.StructField
	for i := range rt.NumField() {
		if f := rt.Field(i); f.IsExported() {
			want = append(want, f)
		}
	}
	if len(fields) != len(want) {
		t.Fatalf("the groups have %d fields, Response %d", len(fields), len(want))
	}
	for i, f := range want {
		g := fields[i]
		if g.Name != f.Name || g.Tag != f.Tag || g.Type != f.Type {
			t.Errorf("field %d: group has %s %s `%s`, Response %s %s `%s`", i, g.Name, g.Type, g.Tag, f.Name, f.Type, f.Tag)
		}
	}
}

// echoResponses are responses to keep the echo of: each recorded in the
// test data, and one with every field set, strings that need escapes
// included.
func echoResponses(t *testing.T) map[string]*Response {
	t.Helper()
	out := map[string]*Response{}
	step, err := os.ReadFile("../clienttools/testdata/suspend-step.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"suspend-step.jsonl":                         step,
		"openai-recorded-function-call-stream.jsonl": schematest.Recording(t, "openai-recorded-function-call-stream.jsonl"),
	} {
		for line := range bytes.Lines(data) {
			ev, perr := DecodeEvent(bytes.TrimSpace(line))
			if perr != nil {
				continue // not a server event line
			}
			if re, ok := ev.(*ResponseEvent); ok {
				out[name+" "+string(re.Type)] = re.Response
			}
		}
	}
	str := func(s string) *string { return &s }
	n, strict := 100, true
	tools := []Tool{{Type: ToolFunction, Name: "read_file", Description: str("Reads <a> file & more\u2028"),
		Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Type: ToolWebSearch, Raw: []byte(`{"type":"web_search","search_context_size":"low"}`)}}
	out["every field"] = &Response{
		ID: "resp_1", Object: "response", CreatedAt: 1700000000, Status: ResponseInProgress,
		Model: "tether-scripted", PreviousResponseID: str("resp_0"), Conversation: &ConversationRef{ID: "conv_1"},
		Instructions: str("Be <brief> & \"exact\"\n\x01"), Output: Items{}, Tools: tools,
		ToolChoice: ToolChoice{Mode: "required", Allowed: []ToolRef{{Type: ToolFunction, Name: "read_file"}}},
		Truncation: "auto", ParallelToolCalls: true,
		Text: TextConfig{Format: TextFormat{Type: "json_schema", Name: "out", Description: str("d"),
			Schema: map[string]any{"type": "object"}, Strict: &strict}, Verbosity: "low"},
		TopP: 0.5, PresencePenalty: -1, FrequencyPenalty: 1.5, TopLogprobs: 3, Temperature: 0.7,
		Reasoning:       ReasoningConfig{Effort: str("high"), Summary: str("auto")},
		MaxOutputTokens: &n, MaxToolCalls: &n, Store: true, Background: true, ServiceTier: "flex",
		Metadata: map[string]string{"b": "2", "a": "<1>"}, SafetyIdentifier: str("user-1"),
		PromptCacheKey: str("key"), PromptCacheRetention: str("24h"), User: str("u\xff"),
	}
	out["zero"] = &Response{}
	return out
}
