package clienttools_test

import (
	"testing"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
)

// TestResultBreakdown: a rollout's wall time splits into the model's (the
// server's report), the tools' (every turn's wait) and the API overhead,
// the rest; without the server's timings the rest holds the model's time.
func TestResultBreakdown(t *testing.T) {
	t.Parallel()
	turns := []clienttools.Turn{{Tools: 30 * time.Millisecond}, {Tools: 20 * time.Millisecond}, {}}
	for _, tc := range []struct {
		name string
		res  clienttools.Result
		want clienttools.Breakdown
	}{
		{"timed by the server", clienttools.Result{Elapsed: time.Second, Turns: turns, Server: protocol.Timings{SampleMicros: 900_000}},
			clienttools.Breakdown{Model: 900 * time.Millisecond, Tools: 50 * time.Millisecond, Overhead: 50 * time.Millisecond}},
		{"no server timings", clienttools.Result{Elapsed: time.Second, Turns: turns},
			clienttools.Breakdown{Tools: 50 * time.Millisecond, Overhead: 950 * time.Millisecond}},
		{"no turn", clienttools.Result{}, clienttools.Breakdown{}},
		// A tree: the root sampled 100 ms on its own (130 in all); /root/a 300 ms with tools of
		// 50 + 40 ms (two turns; two calls at once in the second, the
		// longer counted); /root/b 200 ms with 20 ms and a child /root/b/c
		// of 150 ms and 100 ms: b's chain (470 ms) beats a's (390 ms).
		{"a tree's critical path", clienttools.Result{Elapsed: time.Second,
			Server: protocol.Timings{SampleMicros: 130_000, AgentSampleMicros: map[string]int64{"/root": 100_000, "/root/a": 300_000, "/root/b": 200_000, "/root/b/c": 150_000}},
			Calls: []clienttools.Call{
				{Agent: "/root/a", Turn: 1, Duration: 50 * time.Millisecond},
				{Agent: "/root/a", Turn: 2, Duration: 40 * time.Millisecond},
				{Agent: "/root/a", Turn: 2, Duration: 10 * time.Millisecond},
				{Agent: "/root/b", Turn: 1, Duration: 20 * time.Millisecond},
				{Agent: "/root/b/c", Turn: 3, Duration: 100 * time.Millisecond},
			}},
			clienttools.Breakdown{Model: 450 * time.Millisecond, Tools: 120 * time.Millisecond, Overhead: 430 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.res.Breakdown(); got != tc.want {
				t.Errorf("Breakdown() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
