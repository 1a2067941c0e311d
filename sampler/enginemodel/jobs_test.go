package enginemodel

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestRunLoadByHand: one client, one job of two turns on testProfile (4
// blocks of 16 tokens). Turn 1: a 16-token header and 16 of task (2
// blocks), 16 out (one private block, which its output fills):
//
//	prefill 32 (2 ms) + a step of 1 (20.5 ms): first token at 22.5 ms;
//	15 more steps: done at 22.5 + 15 · 20.5 = 330 ms.
//
// Its tools take 1 s; turn 2 (nothing appended, 1 out) arrives at 1,330
// ms with 48 prompt tokens, all 3 blocks cached (the output's block too):
// one step, done at 1,350.5 ms. Swapped out meanwhile, its 3 blocks (48
// tokens · 131,072 bytes / 16 GB/s = 393.216 µs) come back first, and are
// held out of memory for the 1 s.
func TestRunLoadByHand(t *testing.T) {
	job := Job{Turns: []Turn{{Append: 16, Output: 16, Tools: time.Second}, {Output: 1}}}
	for _, tc := range []struct {
		policy  PolicyKind
		jobTime time.Duration
		held    float64 // token-seconds
	}{
		{Discard, 1350500 * time.Microsecond, 0},
		{Pin, 1350500 * time.Microsecond, 48},
		{Swap, 1350893216 * time.Nanosecond, 48},
	} {
		res := mustRunLoad(t, Load{Profile: testProfile(), Header: 16, Jobs: []Job{job}, Clients: 1, Duration: time.Millisecond,
			Policy: Policy{Kind: tc.policy, TTL: 10 * time.Second}})
		if res.Jobs != 1 || res.JobTimes[0] != tc.jobTime {
			t.Errorf("policy %d: %d jobs in %v, want 1 in %v", tc.policy, res.Jobs, res.JobTimes, tc.jobTime)
		}
		if !slices.Equal(res.TTFT, []time.Duration{22500 * time.Microsecond, 20500*time.Microsecond + tc.jobTime - 1350500*time.Microsecond}) {
			t.Errorf("policy %d: TTFT %v", tc.policy, res.TTFT)
		}
		if res.Stats.HeldTokenTime != tc.held {
			t.Errorf("policy %d: held %v token-seconds, want %v", tc.policy, res.Stats.HeldTokenTime, tc.held)
		}
		// 80 prompt tokens, 48 of them (turn 2's) cached, in memory or swapped.
		if hit := res.Stats.HitTokens + res.Stats.SwapTokens; res.Prompt != 80 || hit != 48 || res.Stats.Prefilled != 32 {
			t.Errorf("policy %d: %d prompt tokens, %d cached, %d prefilled", tc.policy, res.Prompt, hit, res.Stats.Prefilled)
		}
	}
}

// TestRunLoadPinHoldsBack: two clients of one-block-header jobs on a
// 4-block cache. Pinned for 10 s while its tools run, the first job's 3
// blocks keep the second out until the pin expires (and the first's turn
// 2 waits behind it: first come, first served); discarded, the second
// runs once the first's turn 1 ends.
func TestRunLoadPinHoldsBack(t *testing.T) {
	job := Job{Turns: []Turn{{Append: 16, Output: 16, Tools: time.Second}, {Output: 1}}}
	run := func(policy Policy) LoadResult {
		return mustRunLoad(t, Load{Profile: testProfile(), Header: 16, Jobs: []Job{job}, Clients: 2, Duration: time.Millisecond,
			Stagger: 400 * time.Millisecond, Seed: 1, Policy: policy})
	}
	discard, pin := run(Policy{Kind: Discard}), run(Policy{Kind: Pin, TTL: 10 * time.Second})
	if discard.Jobs != 2 || pin.Jobs != 2 {
		t.Fatalf("jobs: %d discarded, %d pinned", discard.Jobs, pin.Jobs)
	}
	if slices.Max(pin.JobTimes) < 10*time.Second || slices.Max(discard.JobTimes) > 2*time.Second {
		t.Errorf("job times: discarded %v, pinned %v: want the pin to hold the second job back past 10 s", discard.JobTimes, pin.JobTimes)
	}
	if discard.Stats.HeldTokenTime != 0 || pin.HeldTokens() <= 0 {
		t.Errorf("held: discarded %v, pinned %v token-seconds", discard.Stats.HeldTokenTime, pin.Stats.HeldTokenTime)
	}
}

// TestRunLoadUnboundedEqual: with a cache that never fills, every design
// and policy that keeps the cache in memory (discard, pin) gives the same
// model time: the designs differ in the engine only when it must choose
// what to keep.
func TestRunLoadUnboundedEqual(t *testing.T) {
	p := testProfile()
	p.KVMemoryBytes, p.CapacityTokens = 1<<20*131072, 1<<20
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	jobs := []Job{
		{Turns: []Turn{{Append: 300, Output: 40, Tools: 2 * time.Second}, {Append: 900, Output: 70, Tools: 500 * time.Millisecond}, {Append: 50, Output: 200}}},
		{Turns: []Turn{{Append: 120, Output: 10, Tools: 3 * time.Second}, {Append: 4000, Output: 30}}},
	}
	var want []time.Duration
	for _, d := range []Design{{Name: "stateless"}, {Name: "suspended", KnowsEnd: true}} {
		for _, pol := range []Policy{{Kind: Discard}, {Kind: Pin, TTL: time.Second}, {Kind: Pin, TTL: time.Minute}} {
			res := mustRunLoad(t, Load{Profile: p, Header: 500, Jobs: jobs, Clients: 8, Duration: 30 * time.Second, Stagger: 5 * time.Second,
				Seed: 7, Design: d, Policy: pol})
			if want == nil {
				want = res.JobTimes
				if len(want) < 16 {
					t.Fatalf("%d jobs", len(want))
				}
				continue
			}
			if !slices.Equal(res.JobTimes, want) {
				t.Errorf("%s, %+v: job times differ from the first's", d.Name, pol)
			}
		}
	}
}

// TestRunLoadKnowsEnd: jobs of one turn, pinned for 10 s. A design whose
// engine cannot tell a last turn pins it, and the second client waits for
// the pin; one that knows lets the cache go, and the second runs at once.
func TestRunLoadKnowsEnd(t *testing.T) {
	job := Job{Turns: []Turn{{Append: 16, Output: 16}}}
	for _, knows := range []bool{false, true} {
		res := mustRunLoad(t, Load{Profile: testProfile(), Header: 16, Jobs: []Job{job}, Clients: 2, Duration: time.Millisecond,
			Stagger: 400 * time.Millisecond, Seed: 1, Design: Design{KnowsEnd: knows}, Policy: Policy{Kind: Pin, TTL: 10 * time.Second}})
		if held := slices.Max(res.JobTimes) > 10*time.Second; res.Jobs != 2 || held == knows {
			t.Errorf("knows the end %v: %d jobs in %v", knows, res.Jobs, res.JobTimes)
		}
	}
}

func mustRunLoad(t *testing.T, l Load) LoadResult {
	t.Helper()
	res, err := RunLoad(t.Context(), l)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRunLoadCancelled: a run whose context ends stops with its error.
func TestRunLoadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	job := Job{Turns: []Turn{{Append: 16, Output: 16}}}
	if _, err := RunLoad(ctx, Load{Profile: testProfile(), Header: 16, Jobs: []Job{job}, Clients: 1, Duration: time.Hour}); err != context.Canceled {
		t.Errorf("%v, want context.Canceled", err)
	}
}

// TestRunLoadOverhead: the API's time comes before each turn: TestRunLoadByHand's
// rollout with 10 ms a turn and 1 µs a prompt token (32 tokens, then 48)
// takes 1,350.5 + 10.032 + 10.048 ms.
func TestRunLoadOverhead(t *testing.T) {
	job := Job{Turns: []Turn{{Append: 16, Output: 16, Tools: time.Second}, {Output: 1}}}
	res := mustRunLoad(t, Load{Profile: testProfile(), Header: 16, Jobs: []Job{job}, Clients: 1, Duration: time.Millisecond,
		Design: Design{Overhead: 10 * time.Millisecond, OverheadPerToken: time.Microsecond}})
	if want := 1370580 * time.Microsecond; res.Jobs != 1 || res.JobTimes[0] != want {
		t.Errorf("%v, want %v", res.JobTimes, want)
	}
}
