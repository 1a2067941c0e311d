package protocol_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
)

const testResponseJSON = `{"id":"resp_1","object":"response","created_at":1767368377,"completed_at":null,"status":"in_progress","incomplete_details":null,"model":"m","previous_response_id":null,"instructions":null,"output":[],"error":null,"tools":[{"type":"function","name":"f","description":null,"parameters":{"type":"object"},"strict":true}],"tool_choice":"auto","truncation":"disabled","parallel_tool_calls":true,"text":{"format":{"type":"text"}},"top_p":1,"presence_penalty":0,"frequency_penalty":0,"top_logprobs":0,"temperature":1,"reasoning":{"effort":null,"summary":null},"usage":null,"max_output_tokens":null,"max_tool_calls":null,"store":true,"background":false,"service_tier":"default","metadata":{},"safety_identifier":null,"prompt_cache_key":null,"user":null}`

type eventCase struct {
	name string
	in   string
	want protocol.Event // checked with DeepEqual when non-nil
}

var eventCases = []eventCase{
	{name: "response.created", in: `{"type":"response.created","sequence_number":0,"response":` + testResponseJSON + `}`},
	{name: "response.done (suspended) on a lane", in: `{"type":"response.done","sequence_number":9,"stream_id":"s1","response":{"id":"resp_1","object":"response","status":"requires_action","output":[],"tools":[],"metadata":{},"tool_choice":"auto","required_action":{"type":"submit_tool_outputs","submit_tool_outputs":{"tool_calls":[{"call_id":"c","name":"f","arguments":"{}"}]}}}}`},
	{
		name: "response.output_item.added",
		in:   `{"type":"response.output_item.added","sequence_number":2,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`,
		want: &protocol.OutputItemEvent{
			EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded, SequenceNumber: 2},
			OutputIndex: 1,
			Item:        &protocol.Message{ID: "msg_1", Status: protocol.StatusInProgress, Role: protocol.RoleAssistant, Content: protocol.Contents{}},
		},
	},
	{name: "response.output_item.done function_call", in: `{"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{}","call_id":"call_1","name":"f"}}`},
	{
		name: "response.content_part.added",
		in:   `{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`,
		want: &protocol.ContentPartEvent{
			EventHeader: protocol.EventHeader{Type: protocol.EventContentPartAdded, SequenceNumber: 3},
			ItemID:      "msg_1", OutputIndex: 1,
			Part: &protocol.OutputText{Annotations: []protocol.Annotation{}, Logprobs: []protocol.LogProb{}},
		},
	},
	{name: "response.content_part.done", in: `{"type":"response.content_part.done","sequence_number":6,"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","annotations":[],"text":"Paris"}}`},
	{
		name: "response.output_text.delta",
		in:   `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Par","logprobs":[],"obfuscation":"abc"}`,
		want: &protocol.TextDeltaEvent{
			EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDelta, SequenceNumber: 4},
			ItemID:      "msg_1", OutputIndex: 1, Delta: "Par", Logprobs: &[]protocol.LogProb{},
		},
	},
	{name: "response.refusal.delta", in: `{"type":"response.refusal.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"No"}`},
	{name: "response.reasoning.delta", in: `{"type":"response.reasoning.delta","sequence_number":4,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"hmm"}`},
	{
		name: "response.output_text.done",
		in:   `{"type":"response.output_text.done","sequence_number":5,"item_id":"msg_1","output_index":1,"content_index":0,"text":"Paris","logprobs":[]}`,
		want: &protocol.TextDoneEvent{
			EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDone, SequenceNumber: 5},
			ItemID:      "msg_1", OutputIndex: 1, Text: ptr("Paris"), Logprobs: &[]protocol.LogProb{},
		},
	},
	{name: "response.refusal.done", in: `{"type":"response.refusal.done","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"refusal":"No."}`},
	{name: "response.reasoning.done", in: `{"type":"response.reasoning.done","sequence_number":5,"item_id":"rs_1","output_index":0,"content_index":0,"text":"hmm"}`},
	{name: "response.output_text.annotation.added", in: `{"type":"response.output_text.annotation.added","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"annotation_index":0,"annotation":{"type":"url_citation","url":"https://x","start_index":0,"end_index":3,"title":"X"}}`},
	{
		name: "response.reasoning_summary_part.added",
		in:   `{"type":"response.reasoning_summary_part.added","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":1,"part":{"type":"summary_text","text":""}}`,
		want: &protocol.SummaryPartEvent{
			EventHeader: protocol.EventHeader{Type: protocol.EventSummaryPartAdded, SequenceNumber: 3},
			ItemID:      "rs_1", SummaryIndex: 1, Part: &protocol.SummaryText{},
		},
	},
	{name: "response.reasoning_summary_part.done", in: `{"type":"response.reasoning_summary_part.done","sequence_number":5,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"s"}}`},
	{name: "response.reasoning_summary_text.delta", in: `{"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"s"}`},
	{name: "response.reasoning_summary_text.done", in: `{"type":"response.reasoning_summary_text.done","sequence_number":5,"item_id":"rs_1","output_index":0,"summary_index":0,"text":"s"}`},
	{
		name: "response.function_call_arguments.delta",
		in:   `{"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_1","output_index":0,"delta":"{\"a\"","obfuscation":"x"}`,
		want: &protocol.FunctionArgsDeltaEvent{EventHeader: protocol.EventHeader{Type: protocol.EventFunctionArgsDelta, SequenceNumber: 4}, ItemID: "fc_1", Delta: `{"a"`},
	},
	{name: "response.function_call_arguments.done", in: `{"type":"response.function_call_arguments.done","sequence_number":5,"item_id":"fc_1","output_index":0,"name":"f","arguments":"{}"}`},
	{name: "response.completed", in: `{"type":"response.completed","sequence_number":10,"response":{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Paris","annotations":[]}]}],"tools":[],"tool_choice":"auto","usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":7}}}`},
	{name: "response.failed", in: `{"type":"response.failed","sequence_number":3,"response":{"id":"resp_1","status":"failed","output":null,"tool_choice":"auto","error":{"code":"server_error","message":"boom"}}}`},
	{name: "response.incomplete", in: `{"type":"response.incomplete","sequence_number":3,"response":{"id":"resp_1","status":"incomplete","tool_choice":"auto","incomplete_details":{"reason":"max_output_tokens"}}}`},
	{name: "response.cancelled", in: `{"type":"response.cancelled","sequence_number":3,"response":{"id":"resp_1","status":"cancelled","tool_choice":"required"}}`},
	{name: "response.queued", in: `{"type":"response.queued","sequence_number":0,"response":{"id":"resp_1","status":"queued","tool_choice":{"type":"function","name":"f"}}}`},
	{name: "response.in_progress", in: `{"type":"response.in_progress","sequence_number":1,"response":null}`},
	{
		name: "error",
		in:   `{"type":"error","sequence_number":7,"error":{"type":"invalid_request_error","code":"invalid_value","message":"bad","param":"input"}}`,
		want: &protocol.ErrorEvent{
			EventHeader: protocol.EventHeader{Type: protocol.EventError, SequenceNumber: 7},
			Error:       protocol.ErrorPayload{Type: protocol.InvalidRequest, Code: ptr("invalid_value"), Message: "bad", Param: ptr("input")},
		},
	},
}

var eventErrCases = []errCase{
	{"not JSON", `data: {}`, protocol.CodeInvalidJSON, ""},
	{"array", `[]`, protocol.CodeInvalidJSON, ""},
	{"type not a string", `{"type":true}`, protocol.CodeInvalidJSON, ""},
	{"missing type", `{"sequence_number":1}`, protocol.CodeMissingRequired, "type"},
	{"unknown type", `{"type":"response.audio.delta","sequence_number":1}`, protocol.CodeUnknownEventType, "type"},
	{"output item missing", `{"type":"response.output_item.added","sequence_number":1,"output_index":0}`, protocol.CodeInvalidType, "item"},
	{"output item unknown type", `{"type":"response.output_item.done","sequence_number":1,"output_index":0,"item":{"type":"image_generation_call"}}`, protocol.CodeInvalidValue, "item.type"},
	{"output item bad content", `{"type":"response.output_item.done","sequence_number":1,"output_index":0,"item":{"type":"message","role":"assistant","content":[{"type":"x"}]}}`, protocol.CodeInvalidValue, "item.content[0].type"},
	{"output_index a string", `{"type":"response.output_item.added","sequence_number":1,"output_index":"0","item":{"type":"item_reference","id":"x"}}`, protocol.CodeInvalidType, ""},
	{"content part missing", `{"type":"response.content_part.added","sequence_number":1,"item_id":"m","output_index":0,"content_index":0}`, protocol.CodeInvalidType, "part"},
	{"content part unknown", `{"type":"response.content_part.done","sequence_number":1,"part":{"type":"audio"}}`, protocol.CodeInvalidValue, "part.type"},
	{"summary part without type", `{"type":"response.reasoning_summary_part.added","sequence_number":1,"part":{}}`, protocol.CodeMissingRequired, "part.type"},
	{"sequence_number a string", `{"type":"response.output_text.delta","sequence_number":"1","delta":"x"}`, protocol.CodeInvalidType, ""},
	{"delta a number", `{"type":"response.output_text.delta","sequence_number":1,"delta":1}`, protocol.CodeInvalidType, ""},
	{"response a string", `{"type":"response.completed","sequence_number":1,"response":"resp_1"}`, protocol.CodeInvalidType, ""},
	{"response with a bad output item", `{"type":"response.completed","sequence_number":1,"response":{"output":[{"type":"x"}]}}`, protocol.CodeInvalidType, ""},
	{"error payload a string", `{"type":"error","sequence_number":1,"error":"boom"}`, protocol.CodeInvalidType, ""},
}

func TestDecodeEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range eventCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, perr := protocol.DecodeEvent([]byte(tc.in))
			if perr != nil {
				t.Fatalf("DecodeEvent(%s): %v", tc.in, perr)
			}
			if want := protocol.EventType(strings.SplitN(tc.name, " ", 2)[0]); protocol.Type(got) != want {
				t.Errorf("Type() = %s, want %s", protocol.Type(got), want)
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("DecodeEvent(%s)\n got %s\nwant %s", tc.in, mustMarshal(t, got), mustMarshal(t, tc.want))
			}
			var in struct {
				SequenceNumber int    `json:"sequence_number"`
				StreamID       string `json:"stream_id"`
			}
			if err := json.Unmarshal([]byte(tc.in), &in); err != nil {
				t.Fatal(err)
			}
			if h := protocol.Header(got); h.SequenceNumber != in.SequenceNumber || h.StreamID != in.StreamID {
				t.Errorf("header = %+v, want sequence_number %d, stream_id %q", *h, in.SequenceNumber, in.StreamID)
			}
			roundTrip(t, got, protocol.DecodeEvent)
		})
	}
}

func TestDecodeEventErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range eventErrCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, perr := protocol.DecodeEvent([]byte(tc.in))
			if got != nil {
				t.Errorf("DecodeEvent(%s) returned an event with its error: %#v", tc.in, got)
			}
			wantError(t, perr, tc.code, tc.param)
		})
	}
}

// TestDecodeEventLean: the lean decode of every event is the full one,
// but for the tools a response echoes; frames that do not decode fail
// alike.
func TestDecodeEventLean(t *testing.T) {
	t.Parallel()
	var frames []string
	for _, tc := range eventCases {
		frames = append(frames, tc.in)
	}
	withTools := &protocol.Response{ID: "resp_1", Object: "response", Status: protocol.ResponseRequiresAction, Output: protocol.Items{},
		Tools: []protocol.Tool{{Type: protocol.ToolFunction, Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Type: protocol.ToolWebSearch, Raw: json.RawMessage(`{"type":"web_search"}`)}},
		Metadata: map[string]string{}, RequiredAction: &protocol.RequiredAction{Type: "submit_tool_outputs"}}
	for _, ev := range append(allEvents(), &protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventDone}, Response: withTools}) {
		frames = append(frames, string(mustMarshal(t, ev)))
	}
	for _, f := range frames {
		full, perr := protocol.DecodeEvent([]byte(f))
		if perr != nil {
			t.Fatalf("DecodeEvent(%s): %v", f, perr)
		}
		lean, perr := protocol.DecodeEventLean([]byte(f))
		if perr != nil {
			t.Fatalf("DecodeEventLean(%s): %v", f, perr)
		}
		if re, ok := full.(*protocol.ResponseEvent); ok && re.Response != nil {
			r := *re.Response
			r.Tools = nil
			full = &protocol.ResponseEvent{EventHeader: re.EventHeader, Response: &r}
		}
		if !reflect.DeepEqual(lean, full) {
			t.Errorf("%s:\nlean %s\nfull %s", f, mustMarshal(t, lean), mustMarshal(t, full))
		}
	}
	for _, tc := range eventErrCases {
		_, perr := protocol.DecodeEventLean([]byte(tc.in))
		wantError(t, perr, tc.code, tc.param)
	}
}

// TestDecodeEventSkipping: an event whose type the client keeps decodes
// as DecodeEventLean has it; any other is its header alone, the header the
// full decode reads, on a lane too, but a pause, which is decoded without
// its output; broken JSON is refused either way; a frame whose type is not
// first is decoded whole.
func TestDecodeEventSkipping(t *testing.T) {
	t.Parallel()
	frames := []string{`{"type":"response.output_text.done","sequence_number":5,"stream_id":"lane-2","item_id":"m","output_index":0,"content_index":0,"text":"x"}`}
	for _, tc := range eventCases {
		frames = append(frames, tc.in)
	}
	for _, ev := range allEvents() {
		frames = append(frames, string(mustMarshal(t, ev)))
	}
	none := func(protocol.EventType) bool { return false }
	all := func(protocol.EventType) bool { return true }
	for _, f := range frames {
		lean, perr := protocol.DecodeEventLean([]byte(f))
		if perr != nil {
			t.Fatalf("DecodeEventLean(%s): %v", f, perr)
		}
		kept, perr := protocol.DecodeEventSkipping([]byte(f), all)
		if perr != nil || !reflect.DeepEqual(kept, lean) {
			t.Errorf("kept %s: %v\n%#v\nwant %#v", f, perr, kept, lean)
		}
		skipped, perr := protocol.DecodeEventSkipping([]byte(f), none)
		var want protocol.Event = &protocol.SkippedEvent{EventHeader: *protocol.Header(lean)}
		if re, ok := lean.(*protocol.ResponseEvent); ok && re.Type == protocol.EventDone {
			pause := *re
			if re.Response != nil {
				r := *re.Response
				r.Output = nil
				pause.Response = &r
			}
			want = &pause
		}
		if perr != nil || !reflect.DeepEqual(skipped, want) {
			t.Errorf("skipped %s: %v\n%#v\nwant %#v", f, perr, skipped, want)
		}
	}
	for _, f := range []string{
		`{"type":"response.in_progress","sequence_number":1,"response":{"id":`,
		`{"type":"response.in_progress","sequence_number":1,"response":{}}x`,
		`{"type":"response.in_progress","sequence_number":1.5,"response":{}}`,
	} {
		if ev, perr := protocol.DecodeEventSkipping([]byte(f), none); perr == nil {
			t.Errorf("%s: skipped as %#v, want an error", f, ev)
		}
	}
	late := `{"sequence_number":3,"type":"response.in_progress","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`
	if ev, perr := protocol.DecodeEventSkipping([]byte(late), none); perr != nil || protocol.Type(ev) != protocol.EventInProgress {
		t.Errorf("type not first: %#v, %v; want it decoded whole", ev, perr)
	} else if _, ok := ev.(*protocol.ResponseEvent); !ok {
		t.Errorf("type not first: %T, want it decoded whole", ev)
	}
}

// TestDecodeRecordedEvents decodes every event of the real OpenAI streams
// (schematest.Recordings) and checks that re-marshaling keeps every field the
// recording had that tether models.
func TestDecodeRecordedEvents(t *testing.T) {
	t.Parallel()
	lines, _ := fixtureLines(t)
	for i, line := range lines {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ev, perr := protocol.DecodeEvent([]byte(line))
			if perr != nil {
				t.Fatalf("DecodeEvent(%s): %v", line, perr)
			}
			roundTrip(t, ev, protocol.DecodeEvent)
			out := mustMarshal(t, ev)
			if k := keys(t, out); k[0] != "type" {
				t.Errorf("%s: \"type\" is not first", out)
			}
			orig, got := object(t, []byte(line)), object(t, out)
			for _, k := range []string{"type", "sequence_number", "item_id", "output_index", "content_index", "delta", "text", "arguments", "name"} {
				if v, ok := orig[k]; ok && string(v) != string(got[k]) {
					t.Errorf("%s: %s = %s, recorded %s", protocol.Type(ev), k, got[k], v)
				}
			}
		})
	}
}

// allEvents is one value of every server event type, as the runtime builds
// them before stamping.
func allEvents() []protocol.Event {
	h := func(t protocol.EventType) protocol.EventHeader { return protocol.EventHeader{Type: t} }
	agent := func(t protocol.EventType) protocol.EventHeader {
		return protocol.EventHeader{Type: t, Agent: &protocol.AgentRef{AgentName: "/root/a"}}
	}
	resp := &protocol.Response{ID: "resp_1", Object: "response", Status: protocol.ResponseInProgress, Output: protocol.Items{}, Tools: []protocol.Tool{}, Metadata: map[string]string{}}
	msg := &protocol.Message{ID: "msg_1", Status: protocol.StatusInProgress, Role: protocol.RoleAssistant}
	var evs []protocol.Event
	for _, t := range []protocol.EventType{protocol.EventCreated, protocol.EventQueued, protocol.EventInProgress, protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled, protocol.EventDone} {
		evs = append(evs, &protocol.ResponseEvent{EventHeader: h(t), Response: resp})
	}
	evs = append(evs,
		&protocol.OutputItemEvent{EventHeader: h(protocol.EventOutputItemAdded), Item: msg},
		&protocol.OutputItemEvent{EventHeader: h(protocol.EventOutputItemDone), Item: msg},
		&protocol.ContentPartEvent{EventHeader: h(protocol.EventContentPartAdded), ItemID: "msg_1", Part: &protocol.OutputText{}},
		&protocol.ContentPartEvent{EventHeader: h(protocol.EventContentPartDone), ItemID: "msg_1", Part: &protocol.OutputText{Text: "x"}},
		&protocol.TextDeltaEvent{EventHeader: h(protocol.EventOutputTextDelta), ItemID: "msg_1", Delta: "x", Logprobs: &[]protocol.LogProb{}},
		&protocol.TextDeltaEvent{EventHeader: h(protocol.EventRefusalDelta), ItemID: "msg_1", Delta: "x"},
		&protocol.TextDeltaEvent{EventHeader: h(protocol.EventReasoningDelta), ItemID: "rs_1", Delta: "x"},
		&protocol.TextDoneEvent{EventHeader: h(protocol.EventOutputTextDone), ItemID: "msg_1", Text: ptr("x"), Logprobs: &[]protocol.LogProb{}},
		&protocol.TextDoneEvent{EventHeader: h(protocol.EventRefusalDone), ItemID: "msg_1", Refusal: ptr("x")},
		&protocol.TextDoneEvent{EventHeader: h(protocol.EventReasoningDone), ItemID: "rs_1", Text: ptr("x")},
		&protocol.AnnotationAddedEvent{EventHeader: h(protocol.EventAnnotationAdded), ItemID: "msg_1", Annotation: protocol.Annotation{Type: "url_citation", URL: "https://x"}},
		&protocol.SummaryPartEvent{EventHeader: h(protocol.EventSummaryPartAdded), ItemID: "rs_1", Part: &protocol.SummaryText{}},
		&protocol.SummaryPartEvent{EventHeader: h(protocol.EventSummaryPartDone), ItemID: "rs_1", Part: &protocol.SummaryText{Text: "s"}},
		&protocol.SummaryTextEvent{EventHeader: h(protocol.EventSummaryTextDelta), ItemID: "rs_1", Delta: ptr("s")},
		&protocol.SummaryTextEvent{EventHeader: h(protocol.EventSummaryTextDone), ItemID: "rs_1", Text: ptr("s")},
		&protocol.FunctionArgsDeltaEvent{EventHeader: h(protocol.EventFunctionArgsDelta), ItemID: "fc_1", Delta: "{"},
		&protocol.FunctionArgsDoneEvent{EventHeader: h(protocol.EventFunctionArgsDone), ItemID: "fc_1", Name: "f", Arguments: "{}"},
		protocol.Invalid(protocol.CodeInvalidValue, "", "bad").StreamError(),
		&protocol.StepRestartedEvent{EventHeader: h(protocol.EventStepRestarted), DiscardAfter: 11, OutputIndex: 3},
		&protocol.InjectCreatedEvent{EventHeader: h(protocol.EventInjectCreated), ResponseID: "resp_1"},
		// A sub-agent's, attributed to it: by the fast path and the codec's.
		&protocol.TextDeltaEvent{EventHeader: agent(protocol.EventOutputTextDelta), ItemID: "msg_2", Delta: "y", Logprobs: &[]protocol.LogProb{}},
		&protocol.OutputItemEvent{EventHeader: agent(protocol.EventOutputItemDone), Item: &protocol.MultiAgentCall{ID: "mac_1", CallID: "c", Action: protocol.ActionListAgents, Arguments: "{}"}},
		&protocol.WaitingEvent{EventHeader: h(protocol.EventWaiting), ResponseID: "resp_1", CallIDs: []string{"call_1", "call_2"},
			Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}, Timings: &protocol.Timings{SampleMicros: 7}},
	)
	return evs
}

func TestEventMarshal(t *testing.T) {
	t.Parallel()
	for _, ev := range allEvents() {
		t.Run(string(protocol.Type(ev)), func(t *testing.T) {
			t.Parallel()
			// Unstamped: sequence_number 0 is still sent, stream_id is not.
			b := mustMarshal(t, ev)
			k := keys(t, b)
			if k[0] != "type" {
				t.Fatalf("%s: \"type\" is not the first key", b)
			}
			m := object(t, b)
			if string(m["type"]) != `"`+string(protocol.Type(ev))+`"` {
				t.Errorf("%s: type %s, want %s", b, m["type"], protocol.Type(ev))
			}
			if string(m["sequence_number"]) != "0" {
				t.Errorf("%s: sequence_number = %s, want 0", b, m["sequence_number"])
			}
			if _, ok := m["stream_id"]; ok {
				t.Errorf("%s: stream_id sent for the default lane", b)
			}
			back, perr := protocol.DecodeEvent(b)
			if perr != nil {
				t.Fatalf("DecodeEvent(%s): %v", b, perr)
			}
			if protocol.Type(back) != protocol.Type(ev) {
				t.Fatalf("decoded %s as %s", protocol.Type(ev), protocol.Type(back))
			}
		})
	}
}

func TestEventHeaderStamping(t *testing.T) {
	t.Parallel()
	ev := &protocol.TextDeltaEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDelta}, ItemID: "msg_1", Delta: "hi"}
	h := protocol.Header(ev)
	h.SequenceNumber, h.StreamID = 42, "lane-7"
	got := string(mustMarshal(t, ev))
	want := `{"type":"response.output_text.delta","sequence_number":42,"stream_id":"lane-7","item_id":"msg_1","output_index":0,"content_index":0,"delta":"hi"}`
	if got != want {
		t.Fatalf("stamped event\n got %s\nwant %s", got, want)
	}
}

func TestResponseStatusTerminal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    protocol.ResponseStatus
		want bool
	}{
		{protocol.ResponseQueued, false},
		{protocol.ResponseInProgress, false},
		{protocol.ResponseRequiresAction, false},
		{protocol.ResponseCompleted, true},
		{protocol.ResponseFailed, true},
		{protocol.ResponseIncomplete, true},
		{protocol.ResponseCancelled, true},
	}
	for _, tc := range tests {
		t.Run(string(tc.s), func(t *testing.T) {
			t.Parallel()
			if got := tc.s.Terminal(); got != tc.want {
				t.Fatalf("%s.Terminal() = %v, want %v", tc.s, got, tc.want)
			}
		})
	}
}
