package ablate

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// syntheticRun is three trials of each mode of 26 turns whose overheads
// are lognormal around perTurn[mode] µs, with 10 s of model and tools.
func syntheticRun(seed uint64, perTurn map[string]float64) *Results {
	return generatedRun(rand.New(rand.NewPCG(seed, 1)), 3, 26, 0, 0.4, perTurn)
}

// generatedRun is rounds trials of each mode of turns turns, lognormal
// around perTurn[mode] µs with turnSD, every round's turns moved together
// by a factor e^(roundSD·N) of their own when roundSD is set, with 10 s of
// model and tools.
func generatedRun(rng *rand.Rand, rounds, turns int, roundSD, turnSD float64, perTurn map[string]float64) *Results {
	r := &Results{Schema: SchemaVersion}
	for rep := range rounds {
		busy := 1.0
		if roundSD > 0 {
			busy = math.Exp(roundSD * rng.NormFloat64())
		}
		for _, mode := range []string{"stateless", "suspend"} {
			tr := Trial{Mode: mode, TPS: 1000, Rep: rep, ModelUS: 6e6, ToolsUS: 4e6}
			for i := range turns {
				o := busy * perTurn[mode] * math.Exp(turnSD*rng.NormFloat64())
				tr.Turns = append(tr.Turns, Turn{Turn: i, ContextTokens: 1000 * (i + 1), OverheadUS: o, FloorUS: 500})
				tr.OverheadUS += o
			}
			tr.ElapsedUS = tr.ModelUS + tr.ToolsUS + tr.OverheadUS
			r.Trials = append(r.Trials, tr)
		}
	}
	return r
}

// TestCompare: B against A, where suspend's turns cost 1 ms more in B and
// stateless's the same: suspend's changes are significant, their sizes
// inside their intervals (+26 ms of API overhead a rollout: +50% on 2 ms a
// turn), stateless's are "~".
func TestCompare(t *testing.T) {
	t.Parallel()
	a := syntheticRun(1, map[string]float64{"stateless": 5000, "suspend": 2000})
	b := syntheticRun(2, map[string]float64{"stateless": 5000, "suspend": 3000})
	changes, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 6 {
		t.Fatalf("%d changes, want 3 figures × 2 modes", len(changes))
	}
	for _, c := range changes {
		t.Logf("%s %s: %.1f → %.1f, ×%.3f %v p=%.3f", c.Mode, c.Figure, c.A, c.B, c.Ratio, c.RatioCI, c.P)
		if c.RatioCI[0] > c.Ratio || c.RatioCI[1] < c.Ratio {
			t.Errorf("%s %s: ratio %v outside its interval %v", c.Mode, c.Figure, c.Ratio, c.RatioCI)
		}
		switch c.Mode {
		case "suspend":
			if !c.Significant {
				t.Errorf("suspend %s: +50%% a turn not significant (p=%v)", c.Figure, c.P)
			}
			if c.Figure == "API overhead" && (c.RatioCI[0] > 1.5 || c.RatioCI[1] < 1.5) {
				t.Errorf("suspend API overhead: ×%v %v, want 1.5 inside", c.Ratio, c.RatioCI)
			}
		case "stateless":
			if c.Significant {
				t.Errorf("stateless %s: no change called significant (p=%v, %v)", c.Figure, c.P, c.RatioCI)
			}
		}
	}
	if _, err := Compare(a, &Results{Schema: "tether.ablate/v1"}); err == nil {
		t.Error("two schemas compared")
	}
}

// TestConfigDiff: what two runs measured (workload, model, calls, agents,
// rounds) and the settings they were measured at (speeds, timing, cost
// model, tools' scale, store, server, where it ran) differ apart, each named with both
// values; a run against itself differs in nothing.
func TestConfigDiff(t *testing.T) {
	t.Parallel()
	a := &Results{Config: RunConfig{Workload: "trace:calc-fix-24 tools:replay", Model: "replay:calc-fix-24", Calls: 24, Reps: 3, Speeds: []float64{1000}}}
	b := &Results{Config: a.Config}
	if m, k := ConfigDiff(a, b); len(m)+len(k) != 0 {
		t.Errorf("a run against itself: %q, %q", m, k)
	}
	b.Config.Workload, b.Config.Reps, b.Config.Cost.HopLatencyUS = "trace:calc-fix-12 tools:instant", 1, 1000
	m, k := ConfigDiff(a, b)
	if len(m) != 2 || m[0] != "workload: trace:calc-fix-24 tools:replay → trace:calc-fix-12 tools:instant" || m[1] != "rounds: 3 → 1" ||
		len(k) != 1 || !strings.HasPrefix(k[0], "cost: ") || !strings.Contains(k[0], "HopLatencyUS:1000") {
		t.Errorf("measured %q, knobs %q", m, k)
	}
	b = &Results{Config: a.Config, Machine: Machine{InProcess: true}}
	if _, k := ConfigDiff(a, b); len(k) != 1 || k[0] != "placement: own process → in-process" {
		t.Errorf("a server in ablate's process against one of its own: knobs %q", k)
	}
}

// TestHolm: Holm's adjustment on a known case.
func TestHolm(t *testing.T) {
	got := holm([]float64{0.01, 0.04, 0.03, 0.005})
	want := []float64{0.03, 0.06, 0.06, 0.02}
	for i := range want {
		if !near(got[i], want[i]) {
			t.Fatalf("holm = %v, want %v", got, want)
		}
	}
}

// TestSweepReaches: gains that grow with the knob reach a reference
// between the two values around it, at the value a straight line between
// them gives; a reference no value reaches is not reached.
func TestSweepReaches(t *testing.T) {
	t.Parallel()
	sw := &SweepResults{Knob: "hop-latency", Unit: "ms"}
	for i, per := range []float64{2000, 40000, 160000} {
		res := syntheticRun(uint64(i), map[string]float64{"stateless": per, "suspend": 2000})
		res.Config.Modes, res.Config.Speeds = []string{"stateless", "suspend"}, []float64{1000}
		sw.Values, sw.Labels, sw.Runs = append(sw.Values, float64(10*i)), append(sw.Labels, strconv.Itoa(10*i)+"ms"), append(sw.Runs, res)
	}
	gains := sw.Speedups("stateless")
	if len(gains) != 3 || gains[0].Gain > 0.01 || gains[2].Gain < 0.2 || gains[1].Gain > gains[2].Gain {
		t.Fatalf("gains %+v", gains)
	}
	ref := Reference{Source: "test", Baseline: "stateless", Gain: (gains[1].Gain + gains[2].Gain) / 2}
	x, ok := sw.Reaches(ref, "suspend")
	if !ok || !near(x, 15) {
		t.Errorf("reaches %v (%v), want 15, halfway between 10 and 20", x, ok)
	}
	if _, ok := sw.Reaches(Reference{Baseline: "stateless", Gain: 0.9}, "suspend"); ok {
		t.Error("a 90% gain reached")
	}
	charts, err := sw.SweepCharts()
	if err != nil || len(charts) != 1 { // no chained in these runs
		t.Fatalf("%d charts, %v", len(charts), err)
	}
	checkSVG(t, charts[0].Name, charts[0].SVG)
}

// roundsRun is rounds trials of each mode of 8 turns, lognormal around
// perTurn[mode] µs, every round's turns moved together by a factor of its
// own (a machine busier in some rounds than in others), the same for both
// modes: the run-to-run spread that resampling turns does not hold.
func roundsRun(seed uint64, rounds int, perTurn map[string]float64) *Results {
	return generatedRun(rand.New(rand.NewPCG(seed, 2)), rounds, 8, 0.5, 0.2, perTurn)
}

// TestCompareOverRounds: two runs of one build on a machine whose rounds
// scatter differ in API overhead by more than their turns' intervals hold,
// which compare calls significant over turns; over rounds it does not.
// Within one run, stateless and suspend, whose rounds ran side by side,
// are set against each other round by round: the busy rounds cancel out.
func TestCompareOverRounds(t *testing.T) {
	t.Parallel()
	perTurn := map[string]float64{"stateless": 5000, "suspend": 2000}
	a, b := roundsRun(1, 10, perTurn), roundsRun(3, 10, perTurn) // runs 1 and 3 of six seeds, four of which are alike
	changes, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	overTurns := 0
	for _, c := range changes {
		t.Logf("%s %s: ×%.3f %v p=%.3f; over rounds %v p=%.3f", c.Mode, c.Figure, c.Ratio, c.RatioCI, c.P, c.RatioRoundsCI, c.PRounds)
		if c.Significant {
			overTurns++
		}
		switch {
		case c.Figure == "round trip p50" && c.RatioRoundsCI != [2]float64{}:
			t.Errorf("%s round trip p50: an interval over rounds %v", c.Mode, c.RatioRoundsCI)
		case c.Figure != "round trip p50" && (c.RatioRoundsCI[0] > c.Ratio || c.RatioRoundsCI[1] < c.Ratio):
			t.Errorf("%s %s: ratio %v outside its interval over rounds %v", c.Mode, c.Figure, c.Ratio, c.RatioRoundsCI)
		case c.SignificantRounds:
			t.Errorf("%s %s: two runs of one build differ significantly over rounds (p=%v)", c.Mode, c.Figure, c.PRounds)
		}
	}
	if overTurns == 0 {
		t.Error("no change significant over turns: the runs' rounds did not scatter as meant")
	}
	for _, s := range summarize(a.Trials) {
		if s.Mode != "suspend" {
			continue
		}
		w, wr := s.APIOverheadVsStatelessCI[1]-s.APIOverheadVsStatelessCI[0], s.APIOverheadVsStatelessRoundsCI[1]-s.APIOverheadVsStatelessRoundsCI[0]
		if r := s.APIOverheadVsStateless; wr <= 0 || wr >= w || s.APIOverheadVsStatelessRoundsCI[0] > r || s.APIOverheadVsStatelessRoundsCI[1] < r {
			t.Errorf("suspend against stateless %v: over turns %v, over rounds %v: want the second narrower, the busy rounds cancelled", r, s.APIOverheadVsStatelessCI, s.APIOverheadVsStatelessRoundsCI)
		}
		t.Logf("suspend against stateless: over turns %v (%.3f wide), over rounds, paired %v (%.3f)", s.APIOverheadVsStatelessCI, w, s.APIOverheadVsStatelessRoundsCI, wr)
	}
}

// TestCompareSharesTheWork: two runs of the same work whose tools' timers
// came out a millisecond apart, their turns alike: end to end, compare
// shares their model and tool time, as a run's designs share it, and finds
// no change, where the runs' own medians would set them a millisecond
// apart on intervals a fraction of that wide. Runs at two timings keep
// their own.
func TestCompareSharesTheWork(t *testing.T) {
	t.Parallel()
	perTurn := map[string]float64{"stateless": 50, "suspend": 20}
	a := generatedRun(rand.New(rand.NewPCG(1, 3)), 10, 26, 0, 0.01, perTurn)
	b := generatedRun(rand.New(rand.NewPCG(2, 3)), 10, 26, 0, 0.01, perTurn)
	for i := range b.Trials {
		b.Trials[i].ToolsUS += 1000
	}
	endToEnd := func(a, b *Results) []Change {
		changes, err := Compare(a, b)
		if err != nil {
			t.Fatal(err)
		}
		var out []Change
		for _, c := range changes {
			if c.Figure == "end to end (computed)" {
				out = append(out, c)
			}
		}
		return out
	}
	for _, c := range endToEnd(a, b) {
		if c.Significant || c.SignificantRounds || c.A != c.B && math.Abs(c.B-c.A) > 0.01 {
			t.Errorf("%s end to end: %.3f → %.3f ms (p=%v, over rounds p=%v): want the work shared, no change", c.Mode, c.A, c.B, c.P, c.PRounds)
		}
	}
	b.Config.TTFTUS = 1000 // another timing: its own model and tool time
	for _, c := range endToEnd(a, b) {
		if d := c.B - c.A; d < 0.99 || d > 1.01 {
			t.Errorf("%s end to end at another timing: %.3f → %.3f ms, want its own work, 1 ms more", c.Mode, c.A, c.B)
		}
	}
}
