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
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.res.Breakdown(); got != tc.want {
				t.Errorf("Breakdown() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
