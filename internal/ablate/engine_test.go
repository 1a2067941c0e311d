package ablate

import (
	"slices"
	"strings"
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

// TestEngineConclusions: the sentences name, per design, the fastest policy
// against discarding over runs of loads with its gain seed by seed, no
// gain where the intervals overlap 1, and where pinning loses.
func TestEngineConclusions(t *testing.T) {
	cell := func(design, policy string, clients int, seeds ...float64) EngineCell {
		return EngineCell{Design: design, Policy: policy, Clients: clients, JCT: mean(seeds), JCTSeeds: seeds}
	}
	run := &EngineRun{Seeds: 3, Cells: []EngineCell{
		cell("suspend", "discard", 1, 100, 101, 99),
		cell("suspend", "pin 10s", 1, 100, 100, 100),
		cell("suspend", "pin 10s, by rollout", 1, 99, 102, 100),
		cell("suspend", "discard, by rollout", 1, 100, 101, 99),
		cell("suspend", "discard", 8, 200, 210, 190),
		cell("suspend", "pin 10s", 8, 220, 231, 209),
		cell("suspend", "pin 10s, by rollout", 8, 100, 105, 95),
		cell("suspend", "discard, by rollout", 8, 150, 158, 143),
		cell("suspend", "discard", 64, 900, 910, 890),
		cell("suspend", "pin 10s", 64, 1000, 1011, 989),
		cell("suspend", "pin 10s, by rollout", 64, 300, 303, 297),
		cell("suspend", "discard, by rollout", 64, 450, 455, 445),
	}}
	got := run.conclusions()
	want := []string{
		"suspend: at 1 rollout no policy is faster than discard beyond its interval; at 8–64 rollouts pin 10s, by rollout is fastest, 2.00× (2.00–2.00) faster than discard at 8 and 3.00× (3.00–3.00) at 64 (rollout completion time, 95% intervals over 3 runs a cell).",
		"suspend: pin 10s loses to discard at 8 and 64 rollouts (0.91× (0.91–0.91) as fast at 8, 0.90× (0.90–0.90) at 64).",
	}
	if !slices.Equal(got, want) {
		t.Errorf("conclusions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	run.Cells = slices.DeleteFunc(run.Cells, func(c EngineCell) bool { return c.Policy == "pin 10s" })
	if got := run.conclusions()[1]; got != "suspend: pinning never makes rollouts longer than discarding here." {
		t.Errorf("without the losing policy: %s", got)
	}
}
