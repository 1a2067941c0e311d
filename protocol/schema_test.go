package protocol_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/tether-run/tether/internal/schematest"
	"github.com/tether-run/tether/protocol"
)

// TestSchemaResponse validates a response built from protocol types against
// the Open Responses ResponseResource schema.
func TestSchemaResponse(t *testing.T) {
	t.Parallel()
	v := schematest.Load(t)
	tests := []struct {
		name   string
		mutate func(r *protocol.Response)
	}{
		{"completed", func(*protocol.Response) {}},
		{"in progress", func(r *protocol.Response) {
			r.Status, r.CompletedAt, r.Usage, r.Output = protocol.ResponseInProgress, nil, nil, protocol.Items{}
		}},
		{"failed", func(r *protocol.Response) {
			r.Status = protocol.ResponseFailed
			r.Error = protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "", "boom").ResponseError()
		}},
		{"incomplete", func(r *protocol.Response) {
			r.Status, r.IncompleteDetails = protocol.ResponseIncomplete, &protocol.IncompleteDetails{Reason: "max_output_tokens"}
		}},
		{"every optional field set", func(r *protocol.Response) {
			r.PreviousResponseID, r.Instructions = ptr("resp_0"), ptr("Be brief.")
			r.ToolChoice = protocol.ToolChoice{Mode: "required", Function: "get_weather"}
			r.Text = protocol.TextConfig{Format: protocol.TextFormat{Type: "json_object"}, Verbosity: "low"}
			r.MaxOutputTokens, r.MaxToolCalls = ptr(100), ptr(3)
			r.Metadata = map[string]string{"k": "v"}
			r.SafetyIdentifier, r.PromptCacheKey, r.User = ptr("s"), ptr("p"), ptr("u")
			r.Reasoning.Summary = ptr("auto")
			r.Output = append(r.Output,
				&protocol.Message{ID: "msg_2", Status: protocol.StatusCompleted, Role: protocol.RoleAssistant, Phase: "commentary", Content: protocol.Contents{&protocol.Refusal{Refusal: "no"}}},
				&protocol.Reasoning{ID: "rs_2", Summary: protocol.Contents{&protocol.SummaryText{Text: "s"}}, EncryptedContent: ptr("e")},
			)
		}},
		{"allowed_tools", func(r *protocol.Response) {
			r.ToolChoice = protocol.ToolChoice{Allowed: []protocol.ToolRef{{Type: "function", Name: "get_weather"}}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := sampleResponse()
			tc.mutate(r)
			b := mustMarshal(t, r)
			if err := v.Response(b); err != nil {
				t.Fatalf("%s\n%v", b, err)
			}
		})
	}
}

// TestSchemaEvents validates the streaming events tether builds, stamped as
// the runtime stamps them, on SSE and on WebSocket.
func TestSchemaEvents(t *testing.T) {
	t.Parallel()
	v := schematest.Load(t)
	resp := sampleResponse()
	msg := &protocol.Message{ID: "msg_1", Status: protocol.StatusInProgress, Role: protocol.RoleAssistant}
	h := func(typ protocol.EventType) protocol.EventHeader { return protocol.EventHeader{Type: typ} }
	events := []protocol.Event{
		&protocol.ResponseEvent{EventHeader: h(protocol.EventCreated), Response: resp},
		&protocol.ResponseEvent{EventHeader: h(protocol.EventCompleted), Response: resp},
		&protocol.OutputItemEvent{EventHeader: h(protocol.EventOutputItemAdded), OutputIndex: 1, Item: msg},
		&protocol.OutputItemEvent{EventHeader: h(protocol.EventOutputItemDone), OutputIndex: 2, Item: &protocol.FunctionCall{ID: "fc_1", CallID: "call_1", Name: "f", Arguments: "{}", Status: protocol.StatusCompleted}},
		&protocol.ContentPartEvent{EventHeader: h(protocol.EventContentPartAdded), ItemID: "msg_1", OutputIndex: 1, Part: &protocol.OutputText{}},
		&protocol.TextDeltaEvent{EventHeader: h(protocol.EventOutputTextDelta), ItemID: "msg_1", OutputIndex: 1, Delta: "Par", Logprobs: &[]protocol.LogProb{}},
		&protocol.TextDeltaEvent{EventHeader: h(protocol.EventOutputTextDelta), ItemID: "msg_1", OutputIndex: 1, Delta: "is"},
		&protocol.TextDoneEvent{EventHeader: h(protocol.EventOutputTextDone), ItemID: "msg_1", OutputIndex: 1, Text: ptr("Paris"), Logprobs: &[]protocol.LogProb{}},
		&protocol.TextDoneEvent{EventHeader: h(protocol.EventRefusalDone), ItemID: "msg_1", Refusal: ptr("no")},
		&protocol.ContentPartEvent{EventHeader: h(protocol.EventContentPartDone), ItemID: "msg_1", OutputIndex: 1, Part: &protocol.OutputText{Text: "Paris"}},
		&protocol.SummaryPartEvent{EventHeader: h(protocol.EventSummaryPartAdded), ItemID: "rs_1", Part: &protocol.SummaryText{}},
		&protocol.SummaryTextEvent{EventHeader: h(protocol.EventSummaryTextDelta), ItemID: "rs_1", Delta: ptr("s")},
		&protocol.SummaryTextEvent{EventHeader: h(protocol.EventSummaryTextDone), ItemID: "rs_1", Text: ptr("s")},
		&protocol.FunctionArgsDeltaEvent{EventHeader: h(protocol.EventFunctionArgsDelta), ItemID: "fc_1", OutputIndex: 2, Delta: "{"},
		&protocol.FunctionArgsDoneEvent{EventHeader: h(protocol.EventFunctionArgsDone), ItemID: "fc_1", OutputIndex: 2, Name: "f", Arguments: "{}"},
		&protocol.AnnotationAddedEvent{EventHeader: h(protocol.EventAnnotationAdded), ItemID: "msg_1", Annotation: protocol.Annotation{Type: "url_citation", URL: "https://x", EndIndex: 3, Title: "X"}},
		protocol.Invalid(protocol.CodeInvalidValue, "top_p", "Bad top_p.").StreamError(),
	}
	for i, ev := range events {
		t.Run(fmt.Sprintf("%d-%s", i, protocol.Type(ev)), func(t *testing.T) {
			t.Parallel()
			protocol.Header(ev).SequenceNumber = i
			b := mustMarshal(t, ev)
			if err := v.StreamEvent(b); err != nil {
				t.Fatalf("SSE %s\n%v", b, err)
			}
			if protocol.Type(ev) == protocol.EventError {
				return // on WebSocket the error frame is WebSocketError
			}
			protocol.Header(ev).StreamID = "lane-1"
			b = mustMarshal(t, ev)
			if err := v.WebSocketEvent(b); err != nil {
				t.Fatalf("WebSocket %s\n%v", b, err)
			}
		})
	}
}

func TestSchemaWebSocketError(t *testing.T) {
	t.Parallel()
	v := schematest.Load(t)
	for _, stream := range []string{"", "lane-1"} {
		for _, e := range []*protocol.Error{
			protocol.Invalid(protocol.CodeInvalidStreamID, "stream_id", "Bad stream_id."),
			protocol.Errorf(http.StatusNotFound, protocol.CodePreviousResponseNotFound, "previous_response_id", "Not found."),
			protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "", "Boom."),
		} {
			b := mustMarshal(t, e.WebSocketError(stream))
			if err := v.WebSocketEvent(b); err != nil {
				t.Errorf("%s\n%v", b, err)
			}
		}
	}
}

func TestSchemaCompact(t *testing.T) {
	t.Parallel()
	v := schematest.Load(t)
	c := &protocol.CompactResponse{
		ID: "resp_c", Object: "response.compaction", CreatedAt: 1767368377,
		Output: protocol.Items{
			&protocol.Message{ID: "msg_1", Status: protocol.StatusCompleted, Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "hi"}}},
			&protocol.Compaction{ID: "cmp_1", EncryptedContent: "sealed"},
		},
		Usage: protocol.Usage{InputTokens: 3, OutputTokens: 1, TotalTokens: 4},
	}
	b := mustMarshal(t, c)
	if err := v.Compact(b); err != nil {
		t.Fatalf("%s\n%v", b, err)
	}
}

// TestSchemaRecordedEvents re-marshals every recorded OpenAI event through
// protocol types: what tether relays must still conform.
func TestSchemaRecordedEvents(t *testing.T) {
	t.Parallel()
	v := schematest.Load(t)
	lines, _ := fixtureLines(t)
	for i, line := range lines {
		ev, perr := protocol.DecodeEvent([]byte(line))
		if perr != nil {
			t.Fatalf("line %d: %v", i, perr)
		}
		b := mustMarshal(t, ev)
		if err := v.StreamEvent(b); err != nil {
			t.Errorf("line %d re-marshaled as %s\n%v", i, b, err)
		}
	}
}

// TestSchemaDecodedInput validates items decoded from the easy input shapes,
// as the runtime echoes them, against the ItemField union.
func TestSchemaDecodedInput(t *testing.T) {
	t.Parallel()
	v := schematest.Load(t)
	r, perr := protocol.DecodeCreateRequest([]byte(`{"model":"m","input":[
		{"role":"user","content":"hi"},
		{"role":"assistant","content":"hello"},
		{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{}","status":"completed"},
		{"type":"function_call_output","id":"fco_1","call_id":"call_1","output":"ok","status":"completed"}]}`))
	if perr != nil {
		t.Fatal(perr)
	}
	for i, it := range r.Input {
		if m, ok := it.(*protocol.Message); ok {
			m.ID, m.Status = fmt.Sprintf("msg_%d", i), protocol.StatusCompleted
		}
		b, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Schema("ItemField", b); err != nil {
			t.Errorf("input[%d] %s\n%v", i, b, err)
		}
	}
}
