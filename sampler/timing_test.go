package sampler

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/protocol"
)

const ms = time.Millisecond

// TestTimingArithmetic checks the model's formula, term by term, against
// figures worked out by hand.
func TestTimingArithmetic(t *testing.T) {
	t.Parallel()
	inf := math.Inf(1)
	tests := []struct {
		name          string
		timing        Timing
		uncached, n   int
		wantFirst     time.Duration
		wantDuration  time.Duration
		wantPaced     bool
		wantSecondTok time.Duration // Due(uncached, 1)
	}{
		{"zero", Timing{}, 5000, 100, 0, 0, false, 0},
		{"ttft only", Timing{TTFT: 200 * ms}, 5000, 100, 200 * ms, 200 * ms, true, 200 * ms},
		{"prefill only", Timing{PrefillRate: 1000}, 1500, 10, 1500 * ms, 1500 * ms, true, 1500 * ms},
		{"tps only", Timing{TPS: 100}, 1500, 11, 0, 100 * ms, true, 10 * ms},
		{"all three", Timing{TTFT: 200 * ms, PrefillRate: 4000, TPS: 50}, 1000, 51, 450 * ms, 1450 * ms, true, 470 * ms},
		{"nothing uncached", Timing{TTFT: 200 * ms, PrefillRate: 4000, TPS: 50}, 0, 51, 200 * ms, 1200 * ms, true, 220 * ms},
		{"no output", Timing{TTFT: 200 * ms, PrefillRate: 4000, TPS: 50}, 1000, 0, 450 * ms, 450 * ms, true, 470 * ms},
		{"fractional rates round once", Timing{PrefillRate: 3, TPS: 3}, 1, 4, 333333333, 1333333333, true, 666666666},
		{"infinite rates are free", Timing{PrefillRate: inf, TPS: inf}, 1000, 1000, 0, 0, false, 0},
		{"NaN and negative are free", Timing{TTFT: -ms, PrefillRate: math.NaN(), TPS: -5}, 1000, 1000, 0, 0, false, 0},
		{"saturates", Timing{TTFT: math.MaxInt64 - 1, PrefillRate: 1e-9}, 1000, 2, math.MaxInt64, math.MaxInt64, true, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tm := tt.timing
			if got := tm.FirstToken(tt.uncached); got != tt.wantFirst {
				t.Errorf("FirstToken = %v, want %v", got, tt.wantFirst)
			}
			if got := tm.Due(tt.uncached, 0); got != tt.wantFirst {
				t.Errorf("Due(0) = %v, want FirstToken %v", got, tt.wantFirst)
			}
			if got := tm.Due(tt.uncached, 1); got != tt.wantSecondTok {
				t.Errorf("Due(1) = %v, want %v", got, tt.wantSecondTok)
			}
			if got := tm.Duration(tt.uncached, tt.n); got != tt.wantDuration {
				t.Errorf("Duration = %v, want %v", got, tt.wantDuration)
			}
			if tm.Paced() != tt.wantPaced {
				t.Errorf("Paced = %v, want %v", tm.Paced(), tt.wantPaced)
			}
		})
	}
}

// sampleTimed runs s on req and records every delta with its time since the
// call, in a synctest bubble's fake time when run in one.
func sampleTimed(t *testing.T, s *Scripted, req *Request) ([]Delta, []time.Duration, time.Duration, Result) {
	t.Helper()
	var deltas []Delta
	var times []time.Duration
	start := time.Now()
	res, err := s.Sample(t.Context(), req, func(d Delta) {
		if d.Kind == TextDelta || d.Kind == ArgsDelta {
			times = append(times, time.Since(start))
		}
		deltas = append(deltas, d)
	})
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	checkDeltas(t, deltas, res)
	return deltas, times, time.Since(start), res
}

// Ways a request's Prompt arrives, one per transport: extended from the
// previous turn's (the WebSocket designs), re-rendered from the whole history
// (stateless HTTP, or a history rebuilt from the store), or not at all.
var promptModes = []struct {
	name   string
	prompt func(r *Renderer, prev *Prompt, items protocol.Items) *Prompt
}{
	{"extended", func(r *Renderer, prev *Prompt, items protocol.Items) *Prompt {
		p := prev
		for _, it := range items[prev.Items():] {
			p = p.Append(r.Item(it))
		}
		return p
	}},
	{"re-rendered", func(r *Renderer, _ *Prompt, items protocol.Items) *Prompt {
		var p *Prompt
		for _, it := range items {
			p = p.Append(r.Item(it))
		}
		return p
	}},
	{"nil", func(*Renderer, *Prompt, protocol.Items) *Prompt { return nil }},
}

// TestTimingPrefill checks the timing model in fake time on a conversation:
// the first turn pays TTFT, the prefill of its whole prompt and its output;
// the second pays the prefill of the items after the first turn's prompt
// only, whichever way its Prompt arrives; a change of instructions makes the
// whole prompt uncached again.
func TestTimingPrefill(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	// 1 ms per prompt token and 10 ms per output token keep the figures legible.
	timing := Timing{TTFT: 200 * ms, PrefillRate: 1000, TPS: 100}
	instr := "You are a careful coding agent."
	tools := []protocol.Tool{fnTool("read_file", `{"type":"object","properties":{"path":{"type":"string"}}}`)}
	const args, file = `{"path":"main.go"}`, "package main"
	user := userMsg("Read it.\ncall: read_file " + args)

	header := len(r.Header(instr, tools))
	p1 := header + len(r.Item(user))
	out1 := r.Count(args)
	answer := "read_file returned: " + file
	out2 := r.Count(answer)

	for _, mode := range promptModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := NewScripted(r, timing)
				req := &Request{Instructions: instr, Tools: tools, Items: protocol.Items{user}}
				turn := func(name string, wantPrompt, wantCached, wantOut int) []Delta {
					t.Helper()
					req.Prompt = mode.prompt(r, req.Prompt, req.Items)
					deltas, times, took, res := sampleTimed(t, s, req)
					if res.PromptTokens != wantPrompt || res.CachedPromptTokens != wantCached || res.OutputTokens != wantOut {
						t.Fatalf("%s: prompt %d, cached %d, output %d; want %d, %d, %d", name,
							res.PromptTokens, res.CachedPromptTokens, res.OutputTokens, wantPrompt, wantCached, wantOut)
					}
					first := 200*ms + time.Duration(wantPrompt-wantCached)*ms
					last := first + time.Duration(wantOut-1)*10*ms
					if times[0] != first || times[len(times)-1] != last || took != last {
						t.Errorf("%s: first token at %v, last at %v, took %v; want %v, %v, %v",
							name, times[0], times[len(times)-1], took, first, last, last)
					}
					return deltas
				}

				call := calls(output(turn("turn 1", p1, 0, out1)))[0]
				result := &protocol.FunctionCallOutput{CallID: call.CallID, Output: protocol.ToolOutput{Text: file}}
				req.Items = append(req.Items, call, result)
				p2 := p1 + len(r.Item(call)) + len(r.Item(result))
				if got := text(output(turn("turn 2", p2, p1, out2))); got != answer {
					t.Fatalf("turn 2 answered %q, want %q", got, answer)
				}

				req.Instructions = "Be brief." // a new system block: nothing after it is cached
				turn("new instructions", p2-header+len(r.Header(req.Instructions, tools)), 0, out2)
			})
		})
	}
}

// scriptedRollout is a conversation of turns steps: a user message scripts
// one call per turn whose arguments are about argTokens tokens, and every
// tool output is about outputTokens tokens.
func scriptedRollout(turns, argTokens, outputTokens int) (*protocol.Message, string) {
	var b strings.Builder
	b.WriteString("Work through the steps.\n")
	filler := strings.Repeat("lorem ipsum dolor sit amet ", max(argTokens/5, 1))
	for i := range turns {
		b.WriteString(`call: step {"n":` + strconv.Itoa(i) + `,"note":"` + filler + `"}` + "\n")
	}
	return userMsg(b.String()), strings.Repeat("consectetur adipiscing elit ", max(outputTokens/4, 1))
}

// BenchmarkPacing streams 2,000 tokens at 1,000 TPS in real time and reports
// how far the sample's wall time is from the model's (err_pct, whose goal is
// within 2%) and the latest any token came after its due time.
func BenchmarkPacing(b *testing.B) {
	const n, tps = 2000, 1000
	timing := Timing{TPS: tps}
	s := NewScripted(renderer(b), timing)
	args := `{"text":"` + strings.Repeat("lorem ipsum dolor sit amet ", n/5+10) + `"}`
	req := &Request{Items: protocol.Items{userMsg("call: write " + args)}, MaxOutputTokens: n}
	model := timing.Duration(0, n)
	var worst, errSum float64
	var maxLate time.Duration
	b.ReportAllocs()
	for b.Loop() {
		i := 0
		start := time.Now()
		res, err := s.Sample(b.Context(), req, func(d Delta) {
			if d.Kind == ArgsDelta {
				maxLate = max(maxLate, time.Since(start)-timing.Due(0, i))
				i++
			}
		})
		took := time.Since(start)
		if err != nil || res.OutputTokens != n {
			b.Fatalf("Sample: %d tokens, %v", res.OutputTokens, err)
		}
		e := float64(took-model) / float64(model)
		errSum += e
		worst = max(worst, math.Abs(e))
	}
	b.ReportMetric(100*errSum/float64(b.N), "err_pct")
	b.ReportMetric(float64(maxLate.Microseconds()), "max_late_us")
	if worst > 0.02 {
		b.Errorf("a sample of %d tokens at %d TPS was %.2f%% off the model's %v (goal: within 2%%)", n, tps, 100*worst, model)
	}
}

// BenchmarkPacingTurns plays a 50-turn rollout in real time, each turn
// extending the last turn's prompt, with TTFT and prefill, and reports the
// error of the whole rollout against the model's time (err_pct), the lateness
// of the last ten turns minus that of the first ten (drift_us: a lookup or a
// schedule that degraded with the conversation's length would show here),
// and the latest token.
func BenchmarkPacingTurns(b *testing.B) {
	const turns = 50
	r := renderer(b)
	timing := Timing{TTFT: 20 * ms, PrefillRate: 20000, TPS: 1000}
	user, toolText := scriptedRollout(turns, 100, 400)
	var errPct, drift float64
	var maxLate time.Duration
	b.ReportAllocs()
	for b.Loop() {
		s := NewScripted(r, timing)
		req := &Request{Instructions: "You are an agent.", Items: protocol.Items{user}}
		req.Prompt = req.Prompt.Append(r.Item(user))
		lateness := make([]time.Duration, 0, turns)
		var modelSum, tookSum time.Duration
		for turn := range turns {
			var deltas []Delta
			var tokenAt []time.Duration
			start := time.Now()
			res, err := s.Sample(b.Context(), req, func(d Delta) {
				if d.Kind == ArgsDelta || d.Kind == TextDelta {
					tokenAt = append(tokenAt, time.Since(start))
				}
				deltas = append(deltas, d)
			})
			took := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			uncached := res.PromptTokens - res.CachedPromptTokens
			for i, at := range tokenAt {
				maxLate = max(maxLate, at-timing.Due(uncached, i))
			}
			model := timing.Duration(uncached, res.OutputTokens)
			modelSum += model
			tookSum += took
			lateness = append(lateness, took-model)
			cs := calls(output(deltas))
			if len(cs) != 1 {
				b.Fatalf("turn %d: %d calls, want 1", turn, len(cs))
			}
			out := &protocol.FunctionCallOutput{CallID: cs[0].CallID, Output: protocol.ToolOutput{Text: toolText}}
			req.Items = append(req.Items, cs[0], out)
			req.Prompt = req.Prompt.Append(r.Item(cs[0])).Append(r.Item(out))
		}
		errPct = 100 * float64(tookSum-modelSum) / float64(modelSum)
		drift = float64((meanDuration(lateness[turns-10:]) - meanDuration(lateness[:10])).Microseconds())
	}
	b.ReportMetric(errPct, "err_pct")
	b.ReportMetric(drift, "drift_us")
	b.ReportMetric(float64(maxLate.Microseconds()), "max_late_us")
}

func meanDuration(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// TestPacerCancelDuringPrefill: a sample cancelled while its prompt is being
// read returns at once, with nothing emitted.
func TestPacerCancelDuringPrefill(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 300*ms)
		defer cancel()
		s := NewScripted(renderer(t), Timing{TTFT: 100 * ms, PrefillRate: 10, TPS: 1000})
		start := time.Now()
		n := 0
		_, err := s.Sample(ctx, longRequest(0), func(Delta) { n++ })
		if err != context.DeadlineExceeded || n != 0 || time.Since(start) != 300*ms {
			t.Fatalf("err %v after %v with %d deltas; want DeadlineExceeded after 300ms, none", err, time.Since(start), n)
		}
	})
}
