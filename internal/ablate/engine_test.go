package ablate

import (
	"testing"

	"github.com/tether-run/tether/sampler"
)

// TestEngineJob: the trace's rollout as the engine sees it, a turn a
// step, each with its output, and tools' time after every step with
// calls.
func TestEngineJob(t *testing.T) {
	traces, err := sampler.LoadTraces()
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range traces {
		header, job, err := EngineJob(tr)
		if err != nil {
			t.Fatal(err)
		}
		if header < 100 || len(job.Turns) != len(tr.Steps) {
			t.Errorf("%s: a %d-token header, %d turns for %d steps", tr.Name, header, len(job.Turns), len(tr.Steps))
		}
		for i, turn := range job.Turns {
			calls := len(tr.Steps[i].Calls) > 0
			if turn.Append <= 0 || turn.Output <= 0 || (i+1 < len(job.Turns)) != calls {
				t.Errorf("%s: turn %d: %+v (%d calls)", tr.Name, i, turn, len(tr.Steps[i].Calls))
			}
		}
	}
}
