package runtime_test

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/tether-run/tether/runtime"
)

// TestJournalBytesPerPause: what a pause appends to a durable rollout's
// journal does not grow with its context. The same rollout of 8 steps (one
// read_file call each) on top of 1,000 and of 100,000 tokens of context
// appends the same bytes a pause (its write and its answer's) within 10%,
// while the snapshot that begins the journal grows with the context.
func TestJournalBytesPerPause(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	const steps = 8
	var perPause, snapshot [2]float64
	for i, n := range []int{1_000, 100_000} {
		synctest.Test(t, func(t *testing.T) {
			sizes := &sizedCheckpoints{Checkpoints: runtime.NewMemoryCheckpoints()}
			o := durableOptions(sizes)
			o.Renderer = r
			c := newPipeHarness(t, o).dial(t, "Bearer alice")
			c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "base", "input": history(t, r, n)}))
			base := respID(t, last(c.untilTerminal(t)))
			var calls [][]dcall
			for s := range steps {
				calls = append(calls, []dcall{{"read_file", fmt.Sprintf(`{"path":"pkg/config/file%d.go"}`, s)}})
			}
			events, _ := driveSuspended(t, c, map[string]any{"model": "tether-scripted", "store": false, "suspend": true,
				"previous_response_id": base, "input": script(calls)})
			if end := eventType(t, last(events)); end != "response.completed" {
				t.Fatalf("the rollout ended with %s", end)
			}
			perPause[i] = float64(sizes.bytes.Load()) / steps
			snapshot[i] = float64(sizes.snapshotBytes.Load())
		})
	}
	t.Logf("appended a pause: %.0f bytes at 1k tokens, %.0f at 100k; snapshots: %.0f and %.0f", perPause[0], perPause[1], snapshot[0], snapshot[1])
	if perPause[1] > 1.1*perPause[0] || perPause[0] == 0 {
		t.Errorf("a pause appended %.0f bytes at 100k tokens of context, %.0f at 1k: it grows with the context", perPause[1], perPause[0])
	}
	if snapshot[1] < 5*snapshot[0] { // compressed: the fixture's files repeat each other

		t.Errorf("snapshots of %.0f bytes at 100k tokens, %.0f at 1k: the context did not grow", snapshot[1], snapshot[0])
	}
}
