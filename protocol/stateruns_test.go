package protocol

import (
	"bytes"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// TestStateRunsSameBytes: a running response's state (its status, output,
// usage, required action, timings) and a function call's step events,
// whatever their strings hold, encode to the codec's bytes, by the fast
// paths or, where those give up, the codec's.
func TestStateRunsSameBytes(t *testing.T) {
	t.Parallel()
	for _, s := range deltaStrings {
		checkStateRuns(t, s, "call_1")
	}
}

// FuzzStateRuns is TestStateRunsSameBytes over any strings.
func FuzzStateRuns(f *testing.F) {
	for _, s := range deltaStrings {
		f.Add(s, "call_1")
	}
	f.Fuzz(func(t *testing.T, s, other string) { checkStateRuns(t, s, other) })
}

// TestStateRunsFast: the fast paths take a suspended rollout's pause and
// resume whole (the codec is not their fallback for the usual case).
func TestStateRunsFast(t *testing.T) {
	t.Parallel()
	rs := stateResponses("plain", "call_1")
	for _, i := range []int{0, 2, 3} { // as created, paused, forked
		for run, fast := range []func([]byte, *Response) ([]byte, bool){appendStateRun1, appendStateRun2, appendStateRun3, appendStateRun4} {
			if _, ok := fast(nil, rs[i]); !ok {
				t.Errorf("response %d: state run %d is not taken by its fast path", i, run+1)
			}
		}
	}
	if _, ok := appendStateRun2(nil, rs[5]); !ok { // a step that says something, then calls
		t.Error("a step's output of a message and a call: not taken by the fast path")
	}
	for _, it := range []Item{&FunctionCall{CallID: "c", Name: "n", Arguments: "{}"}, &Message{Role: RoleAssistant, Content: Contents{&OutputText{Text: "t"}}}} {
		ev := &OutputItemEvent{EventHeader: EventHeader{Type: EventOutputItemDone, SequenceNumber: 3}, Item: it}
		if _, ok := appendStepEvent(nil, ev); !ok {
			t.Errorf("output_item.done of a %T: not taken by the fast path", it)
		}
	}
}

// stateResponses are responses with a kept echo in the states a running
// rollout's events carry, with s and other in their strings.
func stateResponses(s, other string) []*Response {
	str := func(s string) *string { return &s }
	base := &Response{ID: "resp_1", Object: "response", CreatedAt: 1700000000, Status: ResponseInProgress,
		Model: "tether-scripted", Output: Items{}, Tools: []Tool{}, ToolChoice: ToolChoice{Mode: "auto"},
		Truncation: "disabled", ParallelToolCalls: true, Text: TextConfig{Format: TextFormat{Type: "text"}},
		TopP: 1, Temperature: 1, ServiceTier: "auto", Metadata: map[string]string{}}
	if err := base.KeepEcho(); err != nil {
		panic(err)
	}
	offset, done := 3, int64(1700000009)
	call := &FunctionCall{ID: "fc_" + other, CallID: other, Name: "read_file", Arguments: s, Status: StatusCompleted}
	var out []*Response
	for _, change := range []func(r *Response){
		func(*Response) {},
		func(r *Response) { r.Output = nil },
		func(r *Response) {
			r.Status, r.OutputOffset, r.Output = ResponseRequiresAction, &offset, Items{call}
			r.Usage = &Usage{InputTokens: 175, InputTokensDetails: InputTokensDetails{CachedTokens: 58}, OutputTokens: 18,
				OutputTokensDetails: OutputTokensDetails{ReasoningTokens: 2}, TotalTokens: 193}
			r.RequiredAction = &RequiredAction{Type: "submit_tool_outputs", SubmitToolOutputs: SubmitToolOutputs{ToolCalls: []PendingCall{
				{Type: ItemFunctionCall, CallID: other, Name: "read_file", Arguments: s},
				{CallID: "c2", Name: s, Namespace: other, Input: s}}}}
			r.Timings = &Timings{DecodeMicros: 1004, RenderMicros: 5, TotalMicros: -1, Frames: 3, CachedTokens: 7, SafetyFlags: 1}
		},
		func(r *Response) {
			r.RequiredAction = &RequiredAction{Type: s}
			r.ForkedFrom = str(s)
		},
		func(r *Response) {
			r.Output = Items{call, &FunctionCallOutput{CallID: other, Output: ToolOutput{Text: s}}, nil}
			r.Timings = &Timings{AgentSampleMicros: map[string]int64{"/root": 1}}
		},
		func(r *Response) {
			r.Output = Items{call, &Message{Role: RoleAssistant, Content: Contents{&OutputText{Text: s}}}}
		},
		func(r *Response) {
			r.Status, r.CompletedAt = ResponseStatus(s), &done
			r.Error = &ResponseError{Code: "server_error", Message: s}
			r.IncompleteDetails = &IncompleteDetails{Reason: s}
		},
	} {
		r := *base
		change(&r)
		out = append(out, &r)
	}
	return out
}

func checkStateRuns(t *testing.T, s, other string) {
	t.Helper()
	var vals []any
	for _, r := range stateResponses(s, other) {
		vals = append(vals, r, &ResponseEvent{EventHeader: EventHeader{Type: EventDone, SequenceNumber: 12, StreamID: other}, Response: r})
	}
	h := EventHeader{Type: EventOutputItemAdded, SequenceNumber: 8, StreamID: other}
	vals = append(vals,
		&OutputItemEvent{EventHeader: h, OutputIndex: 1, Item: &FunctionCall{ID: "fc_1", CallID: other, Name: "read_file", Status: StatusInProgress}},
		&OutputItemEvent{EventHeader: h, Item: &FunctionCall{CallID: "c", Name: s, Arguments: s, Namespace: other}},
		&OutputItemEvent{EventHeader: h, Item: &FunctionCallOutput{CallID: other, Output: ToolOutput{Text: s}}},
		&OutputItemEvent{EventHeader: h, Item: &Message{Role: RoleAssistant, Content: Contents{&OutputText{Text: s}}}},
		&OutputItemEvent{EventHeader: h},
		&OutputItemEvent{EventHeader: EventHeader{Type: EventOutputItemDone, Agent: &AgentRef{AgentName: s}}, Item: &FunctionCall{CallID: s}},
		&FunctionArgsDoneEvent{EventHeader: EventHeader{Type: EventFunctionArgsDone, SequenceNumber: 4, StreamID: other}, ItemID: "fc_" + other, OutputIndex: 2, Name: "read_file", Arguments: s},
		&FunctionArgsDoneEvent{EventHeader: EventHeader{Type: EventFunctionArgsDone}, ItemID: s, Arguments: s},
	)
	for _, v := range vals {
		want, err := jsonv2.Marshal(v, v1Options)
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("frame: ")
		got, err := AppendMarshal(append(make([]byte, 0, 4), prefix...), v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(prefix, want...)) {
			t.Errorf("%T with %q:\n got %s\nwant %s%s", v, s, got, prefix, want)
		}
	}
}
