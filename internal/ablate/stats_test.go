package ablate

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// TestFit: the Theil–Sen line goes through points on a line exactly, and a
// few wild points (a slow round trip) do not move it, where least squares
// would.
func TestFit(t *testing.T) {
	var xs, ys []float64
	for i := range 20 {
		x := float64(i)
		xs, ys = append(xs, x), append(ys, 1000+3*x)
	}
	if a, b := fit(xs, ys); !near(a, 1000) || !near(b, 3) {
		t.Errorf("fit of y = 1000 + 3x: %v + %vx", a, b)
	}
	ys[17], ys[18] = 40000, 25000 // two round trips the machine slowed
	if a, b := fit(xs, ys); math.Abs(a-1000) > 1 || math.Abs(b-3) > 0.5 {
		t.Errorf("with two outliers: %v + %vx, want about 1000 + 3x", a, b)
	}
	if a, b := fit([]float64{2, 2, 2}, []float64{1, 5, 9}); a != 0 || b != 0 {
		t.Errorf("no distinct x: %v + %vx, want 0 + 0x", a, b)
	}
}

// TestSummaryRoundTrips checks the round-trip arithmetic on made-up
// trials: overhead that grows 10 µs per 1k tokens from 1,000 µs, against
// a floor of 500 µs.
func TestSummaryRoundTrips(t *testing.T) {
	var ts []Trial
	for rep := range 3 {
		tr := Trial{Mode: "suspend", TPS: 1000, Rep: rep}
		for i := range 12 {
			ctx := 1000 * (i + 1)
			o := 1000 + 10*float64(i+1)
			tr.Turns = append(tr.Turns, Turn{Turn: i, ContextTokens: ctx, OverheadUS: o, FloorUS: 500, WarmFloorUS: 250, RenderUS: 100})
			tr.OverheadUS += o
		}
		tr.ElapsedUS = tr.OverheadUS
		ts = append(ts, tr)
	}
	s := summarizeGroup(ts, 0)
	if s.RoundTrips != 30 {
		t.Fatalf("%d round trips, want 30 (12 turns less the first and last, ×3)", s.RoundTrips)
	}
	if !s.SlopeCarried || !near(s.SlopeUSPer1kTokens, 10) || !near(s.FitFirstUS, 1020) || !near(s.FitLastUS, 1110) {
		t.Errorf("line: slope %v (carried %v), first %v, last %v", s.SlopeUSPer1kTokens, s.SlopeCarried, s.FitFirstUS, s.FitLastUS)
	}
	if !near(s.FirstOverheadUS, 1030) || !near(s.LastOverheadUS, 1100) {
		t.Errorf("first 3 %v, last 3 %v, want 1030 and 1100", s.FirstOverheadUS, s.LastOverheadUS)
	}
	// Round trips 2..11 at 500 µs of floor: overhead/floor from 2.04 to 2.22.
	if !near(s.FloorRatioMedian, (1060+1070)/2/500.0) || !near(s.FloorRatioExRender, (960+970)/2/500.0) {
		t.Errorf("floor ratios: median %v, without render %v", s.FloorRatioMedian, s.FloorRatioExRender)
	}
	// 30 round trips carry no p99: their maximum instead. The warm ratio
	// sets quantiles against quantiles.
	if s.RoundTripP99US != 0 || s.FloorRatioP99 != 0 || s.RoundTripMaxUS != 1110 || !near(s.WarmFloorRatio, 1065/250.0) {
		t.Errorf("p99 %v (ratio %v), max %v, warm ratio %v", s.RoundTripP99US, s.FloorRatioP99, s.RoundTripMaxUS, s.WarmFloorRatio)
	}
	// The headline: 12 turns of 1000 + 10·(1..12) µs a trial.
	if !near(s.APIOverheadUS, 12*1065) || !near(s.EndToEndUS, 12*1065) || s.APIOverheadCI[0] > s.APIOverheadUS || s.APIOverheadCI[1] < s.APIOverheadUS {
		t.Errorf("API overhead %v (%v), end to end %v, want %v", s.APIOverheadUS, s.APIOverheadCI, s.EndToEndUS, 12*1065)
	}
	for name, ci := range map[string][2]float64{"slope": s.SlopeCI, "floor ratio": s.FloorRatioMedianCI, "median": s.RoundTripMedianCI} {
		if ci[0] > ci[1] {
			t.Errorf("%s interval %v is upside down", name, ci)
		}
	}
	if !near(s.SlopeCI[0], 10) || !near(s.SlopeCI[1], 10) {
		t.Errorf("slope interval %v of points on a line, want [10, 10]", s.SlopeCI)
	}
	if s.FloorRatioMedianCI[0] > s.FloorRatioMedian || s.FloorRatioMedianCI[1] < s.FloorRatioMedian || s.FloorRatioMedianCI[0] < 2.04 || s.FloorRatioMedianCI[1] > 2.22 {
		t.Errorf("floor ratio interval %v around %v", s.FloorRatioMedianCI, s.FloorRatioMedian)
	}
	if again := summarizeGroup(ts, 0); again.FloorRatioMedianCI != s.FloorRatioMedianCI {
		t.Errorf("intervals differ between two summaries of the same trials: %v, %v", again.FloorRatioMedianCI, s.FloorRatioMedianCI)
	}
}

// TestFloorRatioOfQuantiles: the ratio to the floor sets the round trips'
// median overhead against their floors' median, not the median of each
// round trip's own ratio, where one quick echo under a slow round trip
// makes an outlier of a typical one.
func TestFloorRatioOfQuantiles(t *testing.T) {
	tr := Trial{Mode: "suspend", TPS: 1000}
	for i, tn := range []struct{ overhead, floor float64 }{{0, 1}, {1000, 100}, {2000, 1000}, {3000, 1000}, {0, 1}} {
		tr.Turns = append(tr.Turns, Turn{Turn: i, ContextTokens: 1000 * (i + 1), OverheadUS: tn.overhead, FloorUS: tn.floor, WarmFloorUS: tn.floor / 2})
	}
	s := summarizeGroup([]Trial{tr}, 0)
	if s.RoundTrips != 3 || !near(s.FloorRatioMedian, 2) || !near(s.WarmFloorRatio, 4) {
		t.Errorf("%d round trips, × floor %v (want 2000/1000), × warm %v (want 2000/500)", s.RoundTrips, s.FloorRatioMedian, s.WarmFloorRatio)
	}
	if s.FloorRatioP99 != 0 || s.RoundTripMaxUS != 3000 || s.SlopeCarried {
		t.Errorf("3 round trips: × floor p99 %v, max %v, slope carried %v; want no p99, a max of 3000 and no slope", s.FloorRatioP99, s.RoundTripMaxUS, s.SlopeCarried)
	}
}

// TestConclusionComputed: the sentence labels its end to end as computed,
// and sets the trials' measured median beside it when the two put the
// design on different sides of stateless, and only then.
func TestConclusionComputed(t *testing.T) {
	s := Summary{Mode: "suspend", APIOverheadVsStateless: 0.25, APIOverheadVsStatelessCI: [2]float64{0.22, 0.3},
		EndToEndVsStateless: 0.995, EndToEndVsStatelessCI: [2]float64{0.993, 0.997}, ModelToolsShare: 0.998}
	for _, tc := range []struct {
		measured float64
		want     string
	}{
		{0, "end to end (computed) 0.5% faster [0.3–0.7]; model"},
		{0.99, "end to end (computed) 0.5% faster [0.3–0.7]; model"},
		{1.005, "end to end (computed) 0.5% faster [0.3–0.7], though as measured its median trial was 0.5% slower; model"},
	} {
		s.ElapsedVsStateless = tc.measured
		if got := Conclusion(s); !strings.Contains(got, tc.want) {
			t.Errorf("measured %v: %q, want it to hold %q", tc.measured, got, tc.want)
		}
	}
}

// TestRoundsIntervals: turns that move together round by round (a machine
// busy in some rounds) give an interval over rounds as wide as the rounds
// scatter, where resampling the turns believes every turn a draw of its
// own; and a ratio of two designs whose rounds ran side by side, drawn
// round by round together, holds only what differs between the designs.
func TestRoundsIntervals(t *testing.T) {
	var rounds, twice [][]float64
	var turns []float64
	for k := range 10 {
		var r, d []float64
		for i := range 20 {
			v := 100 + 10*float64(k) + float64(i%3)
			r, d = append(r, v), append(d, 2*v)
		}
		rounds, twice, turns = append(rounds, r), append(twice, d), append(turns, r...)
	}
	byTurns, byRounds := bootstrapCI(turns, mean), roundsCI(rounds, mean)
	if w, wr := byTurns[1]-byTurns[0], byRounds[1]-byRounds[0]; wr < 3*w {
		t.Errorf("interval over rounds %v (%.1f wide), over turns %v (%.1f): want the first 3 times as wide at least", byRounds, wr, byTurns, w)
	}
	paired := ci95(roundsRatioBoot(rounds, twice, mean, mean, true, resamples))
	apart := ci95(roundsRatioBoot(rounds, twice, mean, mean, false, resamples))
	if paired != [2]float64{0.5, 0.5} {
		t.Errorf("paired ratio %v, want exactly 0.5: every round's ratio is", paired)
	}
	if apart[0] >= 0.49 || apart[1] <= 0.51 {
		t.Errorf("ratio drawn apart %v: want it to hold the rounds' scatter", apart)
	}
}

// TestRoundsPermP: paired rounds where b is a's every round times 1.1 are
// as far from 1 as a deal gets, and only the deal observed and its mirror
// are: p is 2/2¹⁰ for ten rounds. Identical sides give 1. Apart, the
// rounds dealt anew by draws find the change only when it is larger than
// the rounds' scatter.
func TestRoundsPermP(t *testing.T) {
	var a, b [][]float64
	for k := range 10 {
		var r, d []float64
		for i := range 8 {
			v := 100 + 30*float64(k) + float64(i)
			r, d = append(r, v), append(d, 1.1*v)
		}
		a, b = append(a, r), append(b, d)
	}
	if p := roundsPermP(b, a, mean, mean, true, pResamples); !near(p, 2.0/1024) {
		t.Errorf("paired, b = 1.1 a every round: p = %v, want 2/1024", p)
	}
	if p := roundsPermP(a, a, mean, mean, true, pResamples); p != 1 {
		t.Errorf("identical sides: p = %v, want 1", p)
	}
	// Apart, the rounds' scatter (100 to 370) swamps a 10% change; with
	// rounds that scatter by 1%, every deal but the observed one (and the
	// few that deal the same rounds) is nearer 1.
	if p := roundsPermP(b, a, mean, mean, false, pResamples); p < 0.2 {
		t.Errorf("apart, b = 1.1 a, rounds scattering threefold: p = %v, want no change found", p)
	}
	for k := range a {
		for i := range a[k] {
			a[k][i] = 1000 + float64(k+i)
			b[k][i] = 1.1 * a[k][i]
		}
	}
	if p := roundsPermP(b, a, mean, mean, false, pResamples); p > 0.001 {
		t.Errorf("apart, b = 1.1 a, rounds scattering by 1%%: p = %v, want the change found", p)
	}
}

// TestRoundsPermPHoldsItsLevel: two sides of one build, their rounds
// paired and moved together by the machine (a factor a round) and apart
// by a little (each side's own), ten rounds each, a thousand times over:
// the randomization test calls about 5% of them significant at 5%, as a
// test at that level must (52 of 1,000). The bootstrap of rounds it
// replaced called twice as many (113).
func TestRoundsPermPHoldsItsLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("a thousand pairs of runs")
	}
	t.Parallel()
	rng := rand.New(rand.NewPCG(62, 5))
	const runs = 1000
	perm, boot := 0, 0
	for range runs {
		var a, b [][]float64
		for range 10 {
			busy := math.Exp(0.3 * rng.NormFloat64())
			side := func() []float64 {
				own := busy * math.Exp(0.05*rng.NormFloat64())
				r := make([]float64, 24)
				for i := range r {
					r[i] = own * 1000 * math.Exp(0.5*rng.NormFloat64())
				}
				return r
			}
			a, b = append(a, side()), append(b, side())
		}
		if roundsPermP(b, a, mean, mean, true, pResamples) < Alpha {
			perm++
		}
		if bootP(roundsRatioBoot(b, a, mean, mean, true, 2000)) < Alpha {
			boot++
		}
	}
	t.Logf("significant at 5%%: randomization %d of %d, bootstrap of rounds %d", perm, runs, boot)
	if perm > runs*7/100 {
		t.Errorf("the randomization test called %d of %d runs of one build significant at 5%%", perm, runs)
	}
}

// TestRoundsIntervalsCover: of 400 simulated runs of ten rounds, each
// round's turns moved together by the machine, the intervals over rounds
// hold the true figure about 95% of the time; plain percentile intervals
// of the same resamples, which they replaced, about 89%.
func TestRoundsIntervalsCover(t *testing.T) {
	if testing.Short() {
		t.Skip("400 runs resampled")
	}
	t.Parallel()
	rng := rand.New(rand.NewPCG(62, 7))
	const runs, n = 400, 10
	truth := 1000 * math.Exp(0.2*0.2/2) // the mean of the rounds' lognormal factor, times 1000
	expanded, plain := 0, 0
	for range runs {
		var rounds [][]float64
		for range n {
			busy := 1000 * math.Exp(0.2*rng.NormFloat64())
			r := make([]float64, 12)
			for i := range r {
				r[i] = busy + 300*rng.NormFloat64()
			}
			rounds = append(rounds, r)
		}
		if ci := roundsCI(rounds, mean); ci[0] <= truth && truth <= ci[1] {
			expanded++
		}
		if ci := ci95(roundsBoot(rounds, mean, 0x7e7e, roundsResamples)); ci[0] <= truth && truth <= ci[1] {
			plain++
		}
	}
	t.Logf("held the truth: expanded %d of %d, percentile %d", expanded, runs, plain)
	if expanded < runs*92/100 {
		t.Errorf("intervals over ten rounds held the truth in %d of %d runs, want 95%%", expanded, runs)
	}
}
