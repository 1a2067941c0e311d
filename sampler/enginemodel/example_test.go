package enginemodel_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tether-run/tether/sampler/enginemodel"
)

// Two turns of one rollout with a 2-second tool call between them (the
// second turn's prompt begins with the first's), and another rollout
// that comes while the tool runs, on a cache of 4 blocks. Discarded, the
// first turn's cache gives the other rollout room at once, and the second
// turn computes again what was evicted. Pinned for the tool's 2 seconds,
// it holds the other rollout back until the pin expires, and the second
// turn, which came meanwhile, waits behind it (first come, first served):
// here pinning loses on both counts.
func ExampleSimulate() {
	p := &enginemodel.Profile{Name: "example", Layers: 32, KVHeads: 8, HeadDim: 128, BytesPerValue: 2, KVBytesPerToken: 131072,
		KVMemoryBytes: 64 * 131072, CapacityTokens: 64, BlockTokens: 16,
		DecodeBase: 20 * time.Millisecond, DecodePerSeq: 500 * time.Microsecond, PrefillTokensPerSec: 16000, SwapBytesPerSec: 16e9,
		Sources: map[string]string{"Layers": "example", "KVHeads": "example", "HeadDim": "example", "BytesPerValue": "example",
			"KVMemoryBytes": "example", "DecodeBase": "example", "DecodePerSeq": "example", "PrefillTokensPerSec": "example", "SwapBytesPerSec": "example"}}
	if err := p.Check(); err != nil {
		panic(err)
	}
	tokens := func(base uint32, n int) []uint32 {
		t := make([]uint32, n)
		for i := range t {
			t[i] = base + uint32(i)
		}
		return t
	}
	turn1, turn2 := tokens(0, 32), tokens(0, 48) // the second turn: the first's 32 tokens and 16 more
	other := tokens(1000, 32)
	t0 := time.Unix(0, 0)
	for _, policy := range []enginemodel.Policy{{Kind: enginemodel.Discard}, {Kind: enginemodel.Pin, TTL: 2 * time.Second}} {
		served := enginemodel.Simulate(p, []enginemodel.Request{
			{ID: 1, Arrive: t0, Prompt: enginemodel.BlockHashes(turn1, 16), PromptTokens: 32, Output: 1, Policy: policy},
			{ID: 2, Arrive: t0.Add(time.Second), Prompt: enginemodel.BlockHashes(other, 16), PromptTokens: 32, Output: 1},
			{ID: 3, Arrive: t0.Add(2 * time.Second), Prompt: enginemodel.BlockHashes(turn2, 16), PromptTokens: 48, Output: 1},
		})
		fmt.Printf("pinned %v: the other rollout waits %v; the second turn recomputes %d tokens, done at %v\n",
			policy.Kind == enginemodel.Pin, served[1].Admitted.Sub(t0.Add(time.Second)), served[2].Recomputed, served[2].Finish.Sub(t0))
	}
	// Output:
	// pinned false: the other rollout waits 0s; the second turn recomputes 32 tokens, done at 2.0225s
	// pinned true: the other rollout waits 1.0225s; the second turn recomputes 32 tokens, done at 2.0675s
}

// One client runs a rollout of two turns with a one-second tool call
// between them on Llama-3-8B's profile. Turn 1 prefills 32 tokens (2.2 ms
// at 14,400 a second) and makes 16 steps of 9.727 ms: 157.9 ms; the tool
// takes a second; turn 2 finds its 48 tokens cached and makes one step.
// The steps read 680 tokens of context in all (32 to 47 in turn 1's, 48
// in turn 2's): 0.044 ms at 2,039 GB/s.
// Swapped out while the tool ran, they come back first (48 · 131,072
// bytes at 22 GB/s: 0.29 ms); discarded, they stayed in memory, since
// nothing needed the room.
func ExampleRunLoad() {
	p, err := enginemodel.LoadProfile("llama3-8b-a100")
	if err != nil {
		panic(err)
	}
	job := enginemodel.Job{Turns: []enginemodel.Turn{{Append: 16, Output: 16, Tools: time.Second}, {Output: 1}}}
	for name, kind := range map[string]enginemodel.PolicyKind{"discarded": enginemodel.Discard, "swapped": enginemodel.Swap} {
		res, err := enginemodel.RunLoad(context.Background(), enginemodel.Load{Profile: p, Header: 16, Jobs: []enginemodel.Job{job}, Clients: 1,
			Duration: time.Millisecond, Policy: enginemodel.Policy{Kind: kind}})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: done in %v, %d of %d prompt tokens cached\n", name, res.JobTimes[0],
			res.Stats.HitTokens+res.Stats.SwapTokens, res.Prompt)
	}
	// Unordered output:
	// discarded: done in 1.167624926s, 48 of 80 prompt tokens cached
	// swapped: done in 1.167910901s, 48 of 80 prompt tokens cached
}
