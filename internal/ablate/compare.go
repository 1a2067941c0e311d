package ablate

import (
	"errors"
	"fmt"
	"slices"
)

// Change is one figure of one mode at one speed in two runs, B against A,
// as benchstat sets two builds side by side: each run's figure with its 95%
// interval, their ratio with its interval (the two runs' turns resampled
// apart), and whether the change is significant: its bootstrap p-value,
// Holm-adjusted over every figure compared, under Alpha.
type Change struct {
	Mode        string     `json:"mode"`
	TPS         float64    `json:"tps"`
	Figure      string     `json:"figure"` // "end to end (computed)", "API overhead", "round trip p50"
	Unit        string     `json:"unit"`   // of A and B: "ms" or "µs"
	A, B        float64    `json:"-"`
	ACI, BCI    [2]float64 `json:"-"`
	Ratio       float64    `json:"ratio"` // B / A
	RatioCI     [2]float64 `json:"ratio_ci95"`
	P           float64    `json:"p"` // Holm-adjusted
	Significant bool       `json:"significant"`
	// Over rounds: the ratio's interval with each run's rounds resampled
	// whole, and its p-value by a randomization test that deals the rounds
	// anew between the runs (roundsPermP), round by round when the two
	// ran in one interleaved run (Results.Interleaved); the
	// p-value Holm-adjusted over the figures that have them (a run of
	// fewer than MinRounds rounds, and the round trips' median, have none).
	// A change significant over turns and not over rounds is within what
	// two runs of one build may differ by.
	RatioRoundsCI     [2]float64 `json:"ratio_rounds_ci95"`
	PRounds           float64    `json:"p_rounds"`
	SignificantRounds bool       `json:"significant_rounds"`
}

// Alpha is the significance level of Compare, after Holm's correction.
const Alpha = 0.05

// pResamples is how many bootstrap resamples a p-value of Compare takes:
// its least value, 2/pResamples, times Holm's number of tests must stay
// well under Alpha for the 36 figures of four designs at three speeds.
const pResamples = 20000

// ConfigDiff is how run b's configuration differs from run a's: measured,
// in what the runs measured (the workload, its trace, tools and calls, the
// model, the sub-agents, the rounds), which makes their figures another
// rollout's, not the same one's in two builds or two configurations; and
// knobs, in what a comparison of two configurations compares (the speeds,
// the model's timing, the cost model, the tools' scale, the store, the
// server and where it ran), each "name: A → B".
func ConfigDiff(a, b *Results) (measured, knobs []string) {
	x, y := a.Config, b.Config
	diff := func(into *[]string, name string, va, vb any) {
		if fmt.Sprint(va) != fmt.Sprint(vb) {
			*into = append(*into, fmt.Sprintf("%s: %v → %v", name, va, vb))
		}
	}
	diff(&measured, "workload", x.Workload, y.Workload)
	diff(&measured, "model", x.Model, y.Model)
	diff(&measured, "calls", x.Calls, y.Calls)
	diff(&measured, "agents", x.Agents, y.Agents)
	diff(&measured, "rounds", x.Reps, y.Reps)
	diff(&knobs, "tok/s", x.Speeds, y.Speeds)
	diff(&knobs, "ttft_us", x.TTFTUS, y.TTFTUS)
	diff(&knobs, "prefill_rate", x.Prefill, y.Prefill)
	diff(&knobs, "cost", fmt.Sprintf("%+v", x.Cost), fmt.Sprintf("%+v", y.Cost))
	diff(&knobs, "tool_scale", x.ToolScale, y.ToolScale)
	diff(&knobs, "store", x.Store, y.Store)
	diff(&knobs, "url", x.URL, y.URL)
	// A server in the harness's process against one in a process of its
	// own: the same binary's API overhead differs by where it ran (chained
	// 41.7 against 47.6 ms in one evening's runs).
	diff(&knobs, "placement", placement(a), placement(b))
	return measured, knobs
}

// placement says where a run's server ran: in ablate's own process, or in
// a process of its own (--builds, --sweep of a server's flags, --url).
func placement(r *Results) string {
	if r.Machine.InProcess {
		return "in-process"
	}
	return "own process"
}

// sameWork reports whether runs a and b did the same model and tool work:
// the same rollout (nothing ConfigDiff calls measured differs) at the same
// timing and tools' scale. Builds, and cost models, may differ.
func sameWork(a, b *Results) bool {
	measured, _ := ConfigDiff(a, b)
	x, y := a.Config, b.Config
	return len(measured) == 0 && x.TTFTUS == y.TTFTUS && x.Prefill == y.Prefill && x.ToolScale == y.ToolScale
}

// Compare sets run b against run a, figure by figure, for every mode and
// speed both ran: the headline's end to end and API overhead (per
// rollout, from the turns), and the round trips' median overhead. The
// summaries are computed again from the trials, so that a results.json
// of any tether that wrote this schema compares. Two runs of the same
// work (sameWork) share their model and tool time, as a run's designs
// do: their ends to end then differ by their API overhead, not by the
// tools' timer jitter from one run to the other.
func Compare(a, b *Results) ([]Change, error) {
	if a.Schema != b.Schema {
		return nil, fmt.Errorf("ablate: compare: %s against %s: results of two schemas", a.Schema, b.Schema)
	}
	wa, wb := sharedWork(a.Trials), sharedWork(b.Trials)
	if sameWork(a, b) {
		wa = sharedWork(slices.Concat(a.Trials, b.Trials))
		wb = wa
	}
	sa, sb := inModeOrder(summarizeSharing(a.Trials, wa), a.Config.Modes), inModeOrder(summarizeSharing(b.Trials, wb), b.Config.Modes)
	var out []Change
	var ps, psRounds []float64
	var withRounds []int // the changes that have an interval over rounds
	for _, y := range sb {
		for _, x := range sa {
			if x.Mode != y.Mode || x.TPS != y.TPS {
				continue
			}
			for _, f := range []struct {
				name, unit string
				scale      float64
				ax, bx     []float64
				fa, fb     func([]float64) float64
				byRounds   bool
			}{
				{"end to end (computed)", "ms", 1e-3, x.turns, y.turns, x.endToEnd, y.endToEnd, true},
				{"API overhead", "ms", 1e-3, x.turns, y.turns, x.apiOverhead, y.apiOverhead, true},
				{"round trip p50", "µs", 1, x.trips, y.trips, median, median, false},
			} {
				if len(f.ax) == 0 || len(f.bx) == 0 {
					continue
				}
				if f.fa(f.ax) == 0 {
					continue // nothing to set B against
				}
				boot := ratioBootN(f.bx, f.ax, f.fb, f.fa, pResamples)
				c := Change{Mode: y.Mode, TPS: y.TPS, Figure: f.name, Unit: f.unit,
					A: f.scale * f.fa(f.ax), B: f.scale * f.fb(f.bx), Ratio: ratio(f.fb(f.bx), f.fa(f.ax)), RatioCI: ci95(boot)}
				c.ACI, c.BCI = scaled(bootstrapCI(f.ax, f.fa), f.scale), scaled(bootstrapCI(f.bx, f.fb), f.scale)
				if f.name == "round trip p50" {
					c.ACI, _ = medianCI(f.ax)
					c.BCI, _ = medianCI(f.bx)
				}
				if f.byRounds && len(x.rounds) >= MinRounds && len(y.rounds) >= MinRounds {
					// Two runs: their rounds apart, unless they ran round
					// by round in one interleaved run.
					paired := a.Interleaved != "" && a.Interleaved == b.Interleaved && slices.Equal(x.reps, y.reps)
					rb := roundsRatioBoot(y.rounds, x.rounds, f.fb, f.fa, paired, pResamples)
					c.RatioRoundsCI = ci95Rounds(rb, min(len(x.rounds), len(y.rounds)))
					withRounds, psRounds = append(withRounds, len(out)), append(psRounds, roundsPermP(y.rounds, x.rounds, f.fb, f.fa, paired, pResamples))
				}
				out = append(out, c)
				ps = append(ps, bootP(boot))
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("ablate: compare: the two runs share no mode at one speed")
	}
	for i, p := range holm(ps) {
		out[i].P, out[i].Significant = p, p < Alpha
	}
	for k, p := range holm(psRounds) {
		i := withRounds[k]
		out[i].PRounds, out[i].SignificantRounds = p, p < Alpha
	}
	return out, nil
}

func median(xs []float64) float64 { return quantile(xs, 0.5) }

func scaled(ci [2]float64, f float64) [2]float64 { return [2]float64{ci[0] * f, ci[1] * f} }
