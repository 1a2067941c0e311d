package clienttools_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestBranch: a best-of-4 over one tool call, in both designs, over a
// WebSocket and over WebTransport: each branch answers the call with its
// own output, reads it, and goes on to a later call of its own (run with
// Funcs) and its answer; every branch's output starts with the shared
// prefix and diverges after it. A branch with callbacks of its own has its
// events and calls seen by them, the others' by the Rollout's.
func TestBranch(t *testing.T) {
	t.Parallel()
	base, wt := serverWT(t, runtime.Options{}, true)
	candidates := []string{"30s", "5s", "120s", "10s"}
	for _, tc := range []struct {
		mode clienttools.Mode
		wt   bool
	}{{clienttools.ModeSuspend, false}, {clienttools.ModeTurns, false}, {clienttools.ModeSuspend, true}, {clienttools.ModeTurns, true}} {
		mode := tc.mode
		name := mode.String()
		if tc.wt {
			name += "/webtransport"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var later atomic.Int32 // the branches run their calls at once
			funcs := []clienttools.Func{
				{Name: "read_config", Parameters: []byte(`{"type":"object"}`), Run: func(context.Context, string) (string, error) {
					t.Error("the branched call ran with Funcs")
					return "", nil
				}},
				{Name: "check", Parameters: []byte(`{"type":"object"}`), Run: func(context.Context, string) (string, error) {
					later.Add(1)
					return "checked", nil
				}},
			}
			c := &clienttools.Client{BaseURL: base}
			if tc.wt {
				c = &clienttools.Client{BaseURL: wt.base, Transport: clienttools.TransportWebTransport, CertHash: wt.hash}
			}
			var events, calls int
			ro := clienttools.Rollout{Mode: mode, Funcs: funcs, OnEvent: func(protocol.Event) { events++ },
				OnCall: func(clienttools.Call) { calls++ },
				Request: &protocol.CreateRequest{Model: sampler.ScriptedModel,
					Input: userInput("Pick a timeout.\ncall: read_config {\"path\":\"client.toml\"}\ncall: check {}")}}
			var branches []clienttools.Branch
			branchEvents := make([]int, len(candidates))
			branchCalls := make([][]string, len(candidates))
			for i := range candidates {
				branches = append(branches, clienttools.Branch{Output: func(call clienttools.Call) (string, error) {
					if call.Name != "read_config" || call.Arguments != `{"path":"client.toml"}` {
						t.Errorf("branch %d asked for %+v", i, call)
					}
					return "timeout = " + candidates[i], nil
				}})
				if i%2 == 0 { // the others' events and calls go to the Rollout's callbacks
					branches[i].OnEvent = func(protocol.Event) { branchEvents[i]++ }
					branches[i].OnCall = func(c clienttools.Call) { branchCalls[i] = append(branchCalls[i], c.Name) }
				}
			}
			results, err := c.Branch(t.Context(), ro, branches)
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != len(candidates) || events == 0 {
				t.Fatalf("%d results, %d events", len(results), events)
			}
			var prefix string
			for i, res := range results {
				if res.Response.Status != protocol.ResponseCompleted {
					t.Fatalf("branch %d: %s", i, res.Response.Status)
				}
				first, ok := res.Output[0].(*protocol.FunctionCall)
				if !ok || first.Name != "read_config" {
					t.Fatalf("branch %d starts with %#v", i, res.Output[0])
				}
				if i == 0 {
					prefix = first.ID
				} else if first.ID != prefix {
					t.Errorf("branch %d's prefix is %s, branch 0's %s", i, first.ID, prefix)
				}
				if len(res.Calls) != 1 || res.Calls[0].Name != "check" {
					t.Errorf("branch %d ran %+v", i, res.Calls)
				}
				if i%2 == 0 && (branchEvents[i] == 0 || len(branchCalls[i]) != 1 || branchCalls[i][0] != "check") {
					t.Errorf("branch %d's own callbacks saw %d events and the calls %q", i, branchEvents[i], branchCalls[i])
				}
				if text := res.Text(); !strings.Contains(text, "check returned: checked") {
					t.Errorf("branch %d answered %q", i, text)
				}
				if res.Usage.OutputTokens == 0 || res.Usage.InputTokens == 0 {
					t.Errorf("branch %d usage %+v", i, res.Usage)
				}
				var sum protocol.Usage // the turns' usage, the prefix's once
				for _, turn := range res.Turns {
					sum.Add(turn.Usage)
				}
				if sum != res.Usage {
					t.Errorf("branch %d: turns sum to %+v, the branch's usage is %+v", i, sum, res.Usage)
				}
				for j, it := range res.Output {
					if fco, ok := it.(*protocol.FunctionCall); ok && fco.Name == "check" && strings.Contains(fco.ID, prefix) {
						t.Errorf("branch %d's item %d is the prefix's", i, j)
					}
				}
			}
			if later.Load() != int32(len(candidates)) {
				t.Errorf("check ran %d times", later.Load())
			}
			if calls != len(candidates)/2 { // the odd branches'
				t.Errorf("the Rollout's OnCall saw %d calls", calls)
			}
		})
	}
	c := &clienttools.Client{BaseURL: base}
	ro := clienttools.Rollout{Mode: clienttools.ModeChained, Request: &protocol.CreateRequest{Model: sampler.ScriptedModel, Input: userInput("Hi")}}
	if _, err := c.Branch(t.Context(), ro, make([]clienttools.Branch, 2)); err == nil {
		t.Error("chained mode branched")
	}
	ro.Mode = clienttools.ModeSuspend
	if _, err := c.Branch(t.Context(), ro, nil); err == nil {
		t.Error("0 branches")
	}
	if _, err := c.Branch(t.Context(), ro, make([]clienttools.Branch, 2)); err == nil || !strings.Contains(err.Error(), "nothing to branch") {
		t.Errorf("a rollout without a call: %v", err)
	}
}

// TestBranchTimings: a branch's Result tells model, tools and API
// overhead apart as an unbranched run's does, in both designs: the
// prefix's sampling counts as model time (a fork's response times only its
// own work, though its usage counts the prefix), every turn's server
// timing is its own, none negative, and the turns sum to the Result's.
// The model is paced, a second to each step's first token: a branch whose
// prefix went uncounted shows less model time than its two steps took.
// No bound is put on the API's overhead, which a busy machine stretches.
func TestBranchTimings(t *testing.T) {
	t.Parallel()
	r, err := sharedRenderer()
	if err != nil {
		t.Fatal(err)
	}
	paced := sampler.Timing{TTFT: time.Second, TPS: 200}
	base := server(t, runtime.Options{Models: map[string]runtime.Sampler{sampler.ScriptedModel: sampler.NewScripted(r, paced)}})
	for _, mode := range []clienttools.Mode{clienttools.ModeSuspend, clienttools.ModeTurns} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			check := clienttools.Func{Name: "check", Parameters: []byte(`{"type":"object"}`),
				Run: func(context.Context, string) (string, error) { return "checked", nil }}
			ro := clienttools.Rollout{Mode: mode, Funcs: []clienttools.Func{check},
				Request: &protocol.CreateRequest{Model: sampler.ScriptedModel, Include: []string{protocol.IncludeTimings},
					Input: userInput("Check.\ncall: check {}")}}
			c := &clienttools.Client{BaseURL: base}
			one, err := c.Run(t.Context(), ro)
			if err != nil {
				t.Fatal(err)
			}
			// Two steps, each a paced first token: the model's time has
			// about that floor, whatever the machine's load; an uncounted
			// step, or a prefix, falls a whole TTFT below it. Not quite
			// that floor: a step's pacing runs from when its prompt was
			// ready, a moment before its timing starts (CI once measured
			// 1.998 s for the two).
			floor := 2*paced.TTFT - paced.TTFT/10
			model, _, overhead := timeSplit(one)
			if model < floor || overhead < 0 {
				t.Fatalf("unbranched: model %v (at least %v), API overhead %v", model, floor, overhead)
			}
			results, err := c.Branch(t.Context(), ro, make([]clienttools.Branch, 2))
			if err != nil {
				t.Fatal(err)
			}
			for i, res := range results {
				bModel, bTools, bOverhead := timeSplit(res)
				if bModel < floor || bOverhead < 0 {
					t.Errorf("branch %d: model %v (at least %v: the prefix's step and its own), API overhead %v of %v (tools %v); unbranched: model %v, overhead %v of %v",
						i, bModel, floor, bOverhead, res.Elapsed, bTools, model, overhead, one.Elapsed)
				}
				var sum protocol.Timings
				for j, turn := range res.Turns {
					if turn.Server.SampleMicros < 0 || turn.Server.TotalMicros < 0 {
						t.Errorf("branch %d turn %d: server timings %+v", i, j, turn.Server)
					}
					sum.Add(turn.Server)
				}
				if sum.SampleMicros != res.Server.SampleMicros {
					t.Errorf("branch %d: the turns sample %d µs, the branch %d µs", i, sum.SampleMicros, res.Server.SampleMicros)
				}
			}
		})
	}
}

// timeSplit is where a rollout's time went, as tether run sums it up: the
// model's (the server's sampling), the client tools', and the rest, the
// API's overhead.
func timeSplit(res *clienttools.Result) (model, tools, overhead time.Duration) {
	for _, turn := range res.Turns {
		tools += turn.Tools
	}
	model = time.Duration(res.Server.SampleMicros) * time.Microsecond
	return model, tools, res.Elapsed - tools - model
}
