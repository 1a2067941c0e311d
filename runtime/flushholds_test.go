package runtime_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/internal/flushhold"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// heldStream is what one paced response over a WebSocket came to.
type heldStream struct {
	text, want string // the deltas joined, and the completed response's text
	deltas     int
	took       time.Duration // from the create to the terminal event
	holds      uint64        // the server's flush holds
}

// streamHeld streams one paced response (1,000 tokens a second, on an
// engine of the bubble's) from a server whose engine reports late, over a
// WebSocket, in a synctest bubble.
func streamHeld(t *testing.T, late func(*sampler.Engine) func() time.Duration) heldStream {
	t.Helper()
	var s heldStream
	synctest.Test(t, func(t *testing.T) {
		r := renderer(t)
		engine := sampler.NewEngine()
		scripted := sampler.NewScripted(r, sampler.Timing{TPS: 1000})
		scripted.SetEngine(engine)
		h := newPipeHarness(t, runtime.Options{Renderer: r, EngineLate: late(engine),
			Models: map[string]runtime.Sampler{"tether-scripted": scripted}})
		c := h.dial(t, "")
		start := time.Now()
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "hi"}))
		events := c.untilTerminal(t)
		s.took = time.Since(start)
		for _, f := range events {
			if e := decodeEv(t, f); e.Type == "response.output_text.delta" {
				s.text += e.Delta
				s.deltas++
			}
		}
		last := events[len(events)-1]
		if typ := eventType(t, last); typ != "response.completed" {
			t.Fatalf("the response ended with %s", last)
		}
		s.want = outputText(t, last)
		s.holds = h.srv.FlushHolds()
	})
	return s
}

// TestFlushHolds: a connection's writer holds its flush only while the
// server is saturated. A server whose engine steps on time and whose
// writers run at once (a bubble's clock: nothing is late) never holds one;
// one whose engine says it steps late holds them, and its stream arrives
// whole and in order, ending at most a hold's bound later.
func TestFlushHolds(t *testing.T) {
	t.Parallel()
	onTime := streamHeld(t, func(e *sampler.Engine) func() time.Duration { return e.Late })
	if onTime.holds != 0 {
		t.Errorf("a server not saturated held %d flushes", onTime.holds)
	}
	if onTime.deltas < 2 || onTime.text != onTime.want {
		t.Fatalf("not saturated: %d deltas %q, want the response's text %q in several", onTime.deltas, onTime.text, onTime.want)
	}
	late := streamHeld(t, func(*sampler.Engine) func() time.Duration {
		return func() time.Duration { return time.Second }
	})
	if late.holds == 0 {
		t.Error("a saturated server held no flush")
	}
	if late.text != late.want || late.want != onTime.want {
		t.Errorf("saturated: deltas %q, response %q, want %q", late.text, late.want, onTime.want)
	}
	if late.took > onTime.took+flushhold.DefaultBound {
		t.Errorf("saturated, the response took %v, more than a hold's bound (%v) past %v", late.took, flushhold.DefaultBound, onTime.took)
	}
	t.Logf("not saturated: %d deltas in %v; saturated: %d in %v, %d holds", onTime.deltas, onTime.took, late.deltas, late.took, late.holds)
}
