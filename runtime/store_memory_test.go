package runtime_test

import (
	"context"
	"fmt"
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
