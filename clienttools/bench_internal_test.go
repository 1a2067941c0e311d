package clienttools

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// benchFrames is one step of a suspended rollout as the server streams it:
// a message streamed token by token, a function call whose arguments
// stream, its output_item.done, then the pause.
func benchFrames(b *testing.B) [][]byte {
	b.Helper()
	resp := &protocol.Response{ID: "resp_1", Object: "response", Status: protocol.ResponseInProgress, Output: protocol.Items{}, Tools: []protocol.Tool{}, Metadata: map[string]string{}}
	var evs []protocol.Event
	seq := 0
	add := func(ev protocol.Event) {
		protocol.Header(ev).SequenceNumber = seq
		seq++
		evs = append(evs, ev)
	}
	add(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventInProgress}, Response: resp})
	msg := &protocol.Message{ID: "msg_1", Role: protocol.RoleAssistant, Status: protocol.StatusInProgress, Content: protocol.Contents{}}
	add(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, Item: msg})
	for i := range 40 {
		add(&protocol.TextDeltaEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDelta}, ItemID: "msg_1", Delta: fmt.Sprintf(" tok%d", i), Logprobs: &[]protocol.LogProb{}})
	}
	fc := &protocol.FunctionCall{ID: "fc_1", CallID: "call_1", Name: "read_file", Status: protocol.StatusInProgress}
	add(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, OutputIndex: 1, Item: fc})
	for i := range 12 {
		add(&protocol.FunctionArgsDeltaEvent{EventHeader: protocol.EventHeader{Type: protocol.EventFunctionArgsDelta}, ItemID: "fc_1", OutputIndex: 1, Delta: fmt.Sprintf("a%d", i)})
	}
	done := *fc
	done.Arguments, done.Status = `{"path":"pkg/config/file.go"}`, protocol.StatusCompleted
	add(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemDone}, OutputIndex: 1, Item: &done})
	paused := *resp
	paused.Status = protocol.ResponseRequiresAction
	paused.RequiredAction = &protocol.RequiredAction{Type: "submit_tool_outputs", SubmitToolOutputs: protocol.SubmitToolOutputs{ToolCalls: []protocol.PendingCall{{CallID: "call_1", Name: "read_file", Arguments: done.Arguments}}}}
	add(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventDone}, Response: &paused})
	frames := make([][]byte, len(evs))
	for i, ev := range evs {
		var err error
		if frames[i], err = json.Marshal(ev); err != nil {
			b.Fatal(err)
		}
	}
	return frames
}

// BenchmarkClientEvents measures the client's own work per server event on
// the suspend path: decoding the frame, the event callback, keeping the
// output items, recognising the pause. One op is one event.
func BenchmarkClientEvents(b *testing.B) {
	frames := benchFrames(b)
	r := &run{c: &Client{}, ro: Rollout{OnEvent: func(protocol.Event) {}}, exec: newExecutor(nil, 1, nil)}
	ctx := context.Background()
	bytes := 0
	for _, f := range frames {
		bytes += len(f)
	}
	b.SetBytes(int64(bytes / len(frames)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(frames) {
		r.beginTurn(r.start, frameCost{})
		k := 0
		end, err := r.readTurn(ctx, func() (protocol.Event, frameCost, error) {
			f := frames[k]
			k++
			return decode(f, len(f))
		})
		if err != nil || end.Type != protocol.EventDone {
			b.Fatalf("turn ended with %v, %v", end, err)
		}
		r.res = Result{}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
