package runtime_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestStoreMemory: thousands of small stored rollouts under a small store
// bound keep the live heap within the bound and a stated headroom: a
// record's bytes count what it holds, and nothing else keeps a stored
// response's rollout alive with it.
func TestStoreMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures memory: not in -short, not under the race detector (.ci/run runs it without)")
	}
	const bound = 8 << 20
	model := sampler.NewScripted(renderer(t), sampler.Timing{})
	model.Cache().Configure(sampler.PrefixCacheOptions{MaxTokens: -1}) // its own bound, in tokens: not this test's
	h := newHarness(t, runtime.Options{Renderer: renderer(t), Models: map[string]runtime.Sampler{sampler.ScriptedModel: model},
		MemoryStore: runtime.MemoryStoreOptions{MaxBytes: bound}})
	c := &clienttools.Client{BaseURL: h.base}
	look := clienttools.Func{Name: "look", Parameters: []byte(`{"type":"object","properties":{"at":{"type":"string"}}}`),
		Run: func(context.Context, string) (string, error) {
			return "seen it: what a tool says, a sentence or two long", nil
		}}
	run := func(n int) {
		for i := range n {
			_, err := c.Run(t.Context(), clienttools.Rollout{Mode: clienttools.ModeChained, Funcs: []clienttools.Func{look},
				Request: &protocol.CreateRequest{Model: sampler.ScriptedModel, Input: protocol.Items{protocol.UserMessage(fmt.Sprintf("Look at %d.\ncall: look {\"at\":\"x\"}", i))}}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	run(20) // what the first responses make once
	before := liveHeap()
	const n = 4000 // two records each, several times the bound
	run(n)
	held := int64(liveHeap()) - int64(before)
	t.Logf("%d stored rollouts under a %d MiB bound: live heap +%.1f MiB", n, bound>>20, float64(held)/mib)
	if held > bound*23/20 {
		t.Errorf("the live heap grew %.1f MiB under a store bound of %d MiB: want at most the bound and 15%%", float64(held)/mib, bound>>20)
	}
}

// TestStoredRolloutMemory: 2,000 small stored rollouts, each a suspended
// rollout over a WebSocket whose client never says response.processed, so
// that each keeps its tail for the resume window beside its record, as an
// outside soak's did. What they hold is told apart by letting the tails go
// (response.processed): the records stay within 1.5× of their stored size
// (the response, its input and its items, encoded: 2.4 KB a rollout;
// measured 1.24×, 3.0 KB, the store's indexes with them), and the tails
// free no more than the server counts them, which maxTailBytes bounds
// (measured 1.01-1.04×: 2.0 KB a tail, for 4.3 KB of frames). In all, 5.0
// KB a rollout. Kept as the rollouts left them, the tails held 7.8 KB
// each, counted 4.3 KB (1.8×): 10.8 KB a rollout. And a pause's timer,
// stopped when its client answered, kept the whole ended rollout alive
// until the runtime swept it (afterFunc), which letting the tails go
// (stopping their timers) brings about: the tails then freed 1.5-1.6× their
// count.
func TestStoredRolloutMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures memory: not in -short, not under the race detector (.ci/run runs it without)")
	}
	st := &sizingStore{MemoryStore: runtime.NewMemoryStore(runtime.MemoryStoreOptions{})}
	model := sampler.NewScripted(renderer(t), sampler.Timing{})
	model.Cache().Configure(sampler.PrefixCacheOptions{MaxTokens: -1}) // its own bound, in tokens: not this test's
	h := newHarness(t, runtime.Options{Renderer: renderer(t), Models: map[string]runtime.Sampler{sampler.ScriptedModel: model}, Store: st})
	c := h.dial(t, nil)
	look := []any{map[string]any{"type": "function", "name": "look",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"at": map[string]any{"type": "string"}}}}}
	run := func(n int) (ids []string) {
		for i := range n {
			evs, _ := driveSuspended(t, c, map[string]any{"model": sampler.ScriptedModel, "store": true, "tools": look,
				"input": fmt.Sprintf("Look at %d.\ncall: look {\"at\":\"x\"}", i)})
			if typ := eventType(t, last(evs)); typ != "response.completed" {
				t.Fatalf("rollout %d: %s", i, last(evs))
			}
			ids = append(ids, respID(t, last(evs)))
		}
		return ids
	}
	processed := func(ids []string) {
		for _, id := range ids {
			c.send(t, refEv("response.processed", id, ""))
		}
		// Handled in order: once this is answered, so are they.
		c.send(t, create(map[string]any{"model": sampler.ScriptedModel, "store": false, "input": "Hi."}))
		c.terminal(t)
	}
	processed(run(20)) // what the first rollouts make once
	stored0, tails0 := st.bytes.Load(), runtime.TailBytes(h.srv)
	before := settledHeap()
	const n = 2000
	ids := run(n)
	withTails := settledHeap()
	counted := runtime.TailBytes(h.srv) - tails0
	processed(ids)
	records := settledHeap()
	stored := st.bytes.Load() - stored0
	perRollout := func(b int64) float64 { return float64(b) / n }
	held, tails := int64(records)-int64(before), int64(withTails)-int64(records)
	t.Logf("%d stored rollouts of %.0f B stored each: live heap +%.0f B a rollout (%.2f× stored), its record %.0f B (%.2f×), its tail %.0f B (counted %.0f B)",
		n, perRollout(stored), perRollout(held+tails), float64(held+tails)/float64(stored),
		perRollout(held), float64(held)/float64(stored), perRollout(tails), perRollout(int64(counted)))
	if held > stored*3/2 {
		t.Errorf("the records hold %.0f B a rollout, %.2f× their stored size: want at most 1.5×", perRollout(held), float64(held)/float64(stored))
	}
	if tails > int64(counted)*23/20 {
		t.Errorf("letting the tails go freed %.0f B a rollout, counted %.0f B: want at most 1.15× the count, which bounds them", perRollout(tails), perRollout(int64(counted)))
	}
}

// sizingStore is a MemoryStore that adds up the stored size of what it is
// given: each record's response, input and items, encoded, as a store
// that writes records writes them.
type sizingStore struct {
	*runtime.MemoryStore
	bytes atomic.Int64
}

func (s *sizingStore) Put(ctx context.Context, rec *runtime.Record) error {
	for _, v := range []any{rec.Response, rec.Input, rec.Items} {
		b, err := protocol.Marshal(v)
		if err != nil {
			return err
		}
		s.bytes.Add(int64(len(b)))
	}
	return s.MemoryStore.Put(ctx, rec)
}
