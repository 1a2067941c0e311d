package sampler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/sampler/enginemodel"
)

// modelProfile is a small engine for the served engine's tests: a KV cache
// of 2,048 tokens in blocks of 16, which eight rollouts of a few hundred
// tokens contend for.
func modelProfile() *enginemodel.Profile {
	p := &enginemodel.Profile{Name: "test", Layers: 32, KVHeads: 8, HeadDim: 128, BytesPerValue: 2, KVBytesPerToken: 131072,
		KVMemoryBytes: 2048 * 131072, CapacityTokens: 2048, BlockTokens: 16,
		DecodeBase: 10 * time.Millisecond, DecodePerSeq: 500 * time.Microsecond, PrefillTokensPerSec: 4000,
		SwapBytesPerSec: 16e9, Sources: map[string]string{}}
	for _, f := range []string{"Layers", "KVHeads", "HeadDim", "BytesPerValue", "KVMemoryBytes",
		"DecodeBase", "DecodePerSeq", "PrefillTokensPerSec", "SwapBytesPerSec"} {
		p.Sources[f] = "the test's own figure"
	}
	return p
}

// modelJob is the rollout client c runs in the tests: three turns, the
// tools of the first two taking seconds, a little longer for each client
// (so that no two turns arrive at the instant a step ends, where a live
// engine and a simulated one may order them differently).
func modelJob(c int) enginemodel.Job {
	skew := time.Duration(c) * 11 * time.Millisecond
	return enginemodel.Job{Turns: []enginemodel.Turn{
		{Append: 300, Output: 20, Tools: 2*time.Second + skew},
		{Append: 40, Output: 30, Hidden: 12, Tools: 3*time.Second + skew}, // reasoning first
		{Append: 60, Output: 10},
	}}
}

// modelStart is when client c starts its rollout, apart from the others'.
func modelStart(c int) time.Duration { return time.Duration(c) * 37 * time.Millisecond }

// liveJob runs job as a client of m would: each turn's prompt is the last
// turn's prompt and output with the turn's tokens appended, its output one
// call but the last turn's (one message), and its tools' time between
// turns. It returns the job's time, and what the engine did with each turn.
func liveJob(t *testing.T, m *EngineModel, r *Renderer, cache *PrefixCache, client int, job enginemodel.Job, suspended bool) (time.Duration, []*EngineResult) {
	start := time.Now()
	var p *Prompt
	var served []*EngineResult
	unique := func(n, turn, at int) []Token { // tokens of this client's alone
		toks := make([]Token, n)
		for i := range toks {
			toks[i] = Token(1000 + client*10000 + turn*1000 + at + i)
		}
		return toks
	}
	for k, tr := range job.Turns {
		p = p.Append(unique(tr.Append, k, 0))
		last := k == len(job.Turns)-1
		req := &Request{Instructions: "You are a test.", Prompt: p, Suspended: suspended, Session: fmt.Sprint("rollout ", client)}
		visible := tr.Output - tr.Hidden
		choose := func(*Request) ([]part, int) {
			return []part{{call: !last, callID: "call", name: "f", toks: make([]string, visible)}}, tr.Hidden
		}
		tokens := 0
		res, err := m.sample(t.Context(), r, cache, req, choose, func(d Delta) {
			if d.Kind == TextDelta || d.Kind == ArgsDelta {
				tokens++
			}
		})
		if err != nil || tokens != visible || res.Engine == nil {
			t.Fatalf("client %d turn %d: %d tokens of %d, %+v, %v", client, k, tokens, visible, res.Engine, err)
		}
		served = append(served, res.Engine)
		p = p.Append(unique(visible, k, 500)) // the output, in the next turn's prompt: its reasoning is not
		if !last {
			time.Sleep(tr.Tools)
		}
	}
	return time.Since(start), served
}

// TestEngineModelMatchesSimulator: eight rollouts run live on a served
// engine, on synctest's clock, take the times the simulator gives the
// same load (RunLoad, the clients' starts and jobs
// alike), in as many steps, and find in the cache what it finds, for every
// design and policy: the two release a turn's cache by one function
// (Policy.Ending) and name its blocks alike.
func TestEngineModelMatchesSimulator(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	header := len(r.Header("You are a test.", nil))
	policies := []struct {
		p         enginemodel.Policy
		byRollout bool
	}{
		{enginemodel.Policy{Kind: enginemodel.Discard}, false},
		{enginemodel.Policy{Kind: enginemodel.Pin, TTL: 2500 * time.Millisecond}, false},
		{enginemodel.Policy{Kind: enginemodel.Pin, TTL: 2500 * time.Millisecond}, true},
		{enginemodel.Policy{Kind: enginemodel.Swap}, false},
	}
	for _, design := range []enginemodel.Design{{Name: "turns"}, {Name: "suspend", KnowsEnd: true}} {
		for _, pol := range policies {
			name := design.Name + ", " + PolicyName(pol.p, pol.byRollout)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				const clients = 8
				jobs, starts := make([]enginemodel.Job, clients), make([]time.Duration, clients)
				for c := range clients {
					jobs[c], starts[c] = modelJob(c), modelStart(c)
				}
				sim, err := enginemodel.RunLoad(t.Context(), enginemodel.Load{Profile: modelProfile(), Header: header,
					Jobs: jobs, Clients: clients, Starts: starts, Duration: time.Nanosecond, Design: design,
					Policy: pol.p, ByProgram: pol.byRollout})
				if err != nil || sim.Jobs != clients {
					t.Fatalf("simulated: %d jobs, %v", sim.Jobs, err)
				}
				synctest.Test(t, func(t *testing.T) {
					m, err := NewEngineModel(EngineModelOptions{Profile: modelProfile(), Policy: pol.p, ByRollout: pol.byRollout})
					if err != nil {
						t.Fatal(err)
					}
					cache := NewPrefixCache(r, PrefixCacheOptions{})
					times := make([]time.Duration, clients)
					var wg sync.WaitGroup
					for c := range clients {
						wg.Go(func() {
							time.Sleep(modelStart(c))
							times[c], _ = liveJob(t, m, r, cache, c, jobs[c], design.KnowsEnd)
						})
					}
					wg.Wait()
					live := m.Stats()
					slices.Sort(times)
					simTimes := slices.Sorted(slices.Values(sim.JobTimes))
					t.Logf("completion: live %v, simulated %v; hits %d against %d; prefilled %d against %d; steps %d against %d",
						meanDuration(times), meanDuration(simTimes), live.HitTokens+live.SwapTokens, sim.Stats.HitTokens+sim.Stats.SwapTokens,
						live.Prefilled, sim.Stats.Prefilled, live.Steps, sim.Stats.Steps)
					// Equal to the nanosecond, unless an arrival fell on the
					// instant a step ended: the simulator admits it with that
					// step, the live engine as its goroutines happen to run
					// (under the race detector's scheduling, one rollout of
					// the 64 here comes 1.8% late). Hence the 3%, and the
					// mean's 0.5%.
					for i := range times {
						if !near(float64(times[i]), float64(simTimes[i]), 0.03) {
							t.Errorf("completion times live %v, simulated %v", times, simTimes)
							break
						}
					}
					if !near(float64(meanDuration(times)), float64(meanDuration(simTimes)), 0.005) {
						t.Errorf("mean completion time live %v, simulated %v", meanDuration(times), meanDuration(simTimes))
					}
					if !near(float64(live.Steps), float64(sim.Stats.Steps), 0.01) || !near(float64(live.Prefilled), float64(sim.Stats.Prefilled), 0.01) ||
						!near(float64(live.HitTokens), float64(sim.Stats.HitTokens), 0.01) || !near(float64(live.SwapTokens), float64(sim.Stats.SwapTokens), 0.01) {
						t.Errorf("live: %d steps, %d prefilled, %d hit, %d swapped; simulated: %d, %d, %d, %d", live.Steps,
							live.Prefilled, live.HitTokens, live.SwapTokens, sim.Stats.Steps, sim.Stats.Prefilled, sim.Stats.HitTokens, sim.Stats.SwapTokens)
					}
				})
			})
		}
	}
}

// near reports whether a is within frac of b.
func near(a, b, frac float64) bool { return a >= b*(1-frac) && a <= b*(1+frac) }

// TestEngineModelCancel: a sample whose context ends leaves the engine,
// its blocks released, and the engine goes on with the others.
func TestEngineModelCancel(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	synctest.Test(t, func(t *testing.T) {
		m, err := NewEngineModel(EngineModelOptions{Profile: modelProfile()})
		if err != nil {
			t.Fatal(err)
		}
		cache := NewPrefixCache(r, PrefixCacheOptions{})
		ctx, cancel := context.WithCancel(t.Context())
		p := (*Prompt)(nil).Append(make([]Token, 100))
		choose := func(*Request) ([]part, int) { return []part{{toks: make([]string, 1000)}}, 0 }
		done := make(chan error)
		go func() {
			_, err := m.sample(ctx, r, cache, &Request{Prompt: p}, choose, func(d Delta) {
				if d.Kind == TextDelta && d.Text == "" {
					cancel() // its first token
				}
			})
			done <- err
		}()
		if err := <-done; err != context.Canceled {
			t.Fatalf("cancelled sample: %v", err)
		}
		res, err := m.sample(t.Context(), r, cache, &Request{Prompt: p}, func(*Request) ([]part, int) { return []part{{toks: make([]string, 3)}}, 0 }, func(Delta) {})
		if err != nil || res.OutputTokens != 3 {
			t.Fatalf("the next sample: %d tokens, %v", res.OutputTokens, err)
		}
		synctest.Wait()
		if m.Stats().Decoded > 10 {
			t.Errorf("the engine decoded %d tokens: the cancelled sample ran on", m.Stats().Decoded)
		}
	})
}

// TestEngineModelPinKeepsTheContext: a rollout's turn that comes back after
// a 5 s tool call, while another rollout's prompt needs the room its cache
// holds, gets its first token after a step that prefills only its new
// tokens when the engine pins its cache for 10 s and admits the turns of
// earlier rollouts first; discarded, most of its context is prefilled
// again. Pinned in arrival order, it waits behind the other rollout, which
// waits for the pin to end: where pinning loses.
func TestEngineModelPinKeepsTheContext(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	prompt := func(client, n int) *Prompt {
		toks := make([]Token, n)
		for i := range toks {
			toks[i] = Token(client*10000 + i)
		}
		return (*Prompt)(nil).Append(toks)
	}
	out := func(n int) func(*Request) ([]part, int) {
		return func(*Request) ([]part, int) {
			return []part{{call: true, callID: "c", name: "f", toks: make([]string, n)}}, 0
		}
	}
	pin := enginemodel.Policy{Kind: enginemodel.Pin, TTL: 10 * time.Second}
	for _, tc := range []struct {
		policy                 enginemodel.Policy
		byRollout              bool
		minPrefill, maxPrefill int           // of the returning turn
		minFirst, maxFirst     time.Duration // its first token
	}{
		{pin, true, 1, 32, 0, 50 * time.Millisecond},
		{enginemodel.Policy{Kind: enginemodel.Discard}, false, 600, 1300, 150 * time.Millisecond, time.Second},
		{pin, false, 600, 1300, 5 * time.Second, 20 * time.Second},
	} {
		t.Run(PolicyName(tc.policy, tc.byRollout), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m, err := NewEngineModel(EngineModelOptions{Profile: modelProfile(), Policy: tc.policy, ByRollout: tc.byRollout})
				if err != nil {
					t.Fatal(err)
				}
				cache := NewPrefixCache(r, PrefixCacheOptions{})
				a := prompt(1, 1200)
				first, err := m.sample(t.Context(), r, cache, &Request{Prompt: a, Suspended: true, Session: "a"}, out(10), func(Delta) {})
				if err != nil {
					t.Fatal(err)
				}
				go func() { // another rollout, while a's tool runs
					time.Sleep(time.Second)
					m.sample(t.Context(), r, cache, &Request{Prompt: prompt(2, 1500), Suspended: true, Session: "b"}, out(10), func(Delta) {})
				}()
				time.Sleep(5 * time.Second) // a's tool call
				a = a.Append(make([]Token, 10)).Append([]Token{7, 7, 7})
				again, err := m.sample(t.Context(), r, cache, &Request{Prompt: a, Suspended: true, Session: "a"}, out(10), func(Delta) {})
				if err != nil {
					t.Fatal(err)
				}
				e := again.Engine
				t.Logf("%s: first turn's first token %v (%d prefilled); the turn after the tool's %v (%d prefilled, %d found)",
					m.Label(), first.Engine.FirstToken, first.Engine.Recomputed, e.FirstToken, e.Recomputed, e.Hit)
				if e.Recomputed < tc.minPrefill || e.Recomputed > tc.maxPrefill || e.FirstToken < tc.minFirst || e.FirstToken > tc.maxFirst {
					t.Errorf("the returning turn prefilled %d tokens (want %d to %d), its first token after %v (want %v to %v)",
						e.Recomputed, tc.minPrefill, tc.maxPrefill, e.FirstToken, tc.minFirst, tc.maxFirst)
				}
				synctest.Wait()
			})
		})
	}
}
