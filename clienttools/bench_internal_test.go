package clienttools

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// benchFrames is one step of a suspended rollout as tether streams it,
// recorded (serve --record) from ablate's load workload: the response.in_progress that
// resumes it, a message and three function calls, their deltas, parts and
// items, then the pause.
func benchFrames(b *testing.B) [][]byte {
	b.Helper()
	data, err := os.ReadFile("testdata/suspend-step.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(data), []byte("\n"))
}

// BenchmarkClientEvents measures the client's own work per server event on
// the suspend path: decoding the frame, the event callback, keeping the
// output items, recognising the pause. One op is one event. every-event:
// OnEvent sees them all; deltas: OnEvent asks for the deltas only (as
// ablate's load clients do); none: no OnEvent.
func BenchmarkClientEvents(b *testing.B) {
	frames := benchFrames(b)
	on := func(protocol.Event) {}
	deltas := []protocol.EventType{protocol.EventOutputTextDelta, protocol.EventFunctionArgsDelta}
	for _, bc := range []struct {
		name string
		ro   Rollout
	}{
		{"every-event", Rollout{OnEvent: on}},
		{"deltas", Rollout{OnEvent: on, Events: deltas}},
		{"none", Rollout{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := &run{c: &Client{}, ro: bc.ro, exec: newExecutor(nil, 1, nil)}
			rd := eventReader{keep: bc.ro.filter()}
			ctx := context.Background()
			size := 0
			for _, f := range frames {
				size += len(f)
			}
			b.SetBytes(int64(size / len(frames)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += len(frames) {
				r.beginTurn(r.start, frameCost{})
				k := 0
				end, err := r.readTurn(ctx, func() (protocol.Event, frameCost, error) {
					f := frames[k]
					k++
					return rd.decode(f, len(f))
				})
				if err != nil || protocol.Type(end) != protocol.EventDone {
					b.Fatalf("turn ended with %v, %v", end, err)
				}
				r.res = Result{}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
