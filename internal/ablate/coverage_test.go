package ablate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// coverage draws reps samples with draw, computes the 95% interval of each
// with ci, and returns how often the interval held truth and its median
// width.
func coverage(reps int, truth float64, draw func(*rand.Rand) []float64, ci func([]float64) ([2]float64, bool)) (covered, width float64) {
	rng := rand.New(rand.NewPCG(7, 11))
	var hits, n int
	var widths []float64
	for range reps {
		c, ok := ci(draw(rng))
		if !ok {
			continue
		}
		n++
		if c[0] <= truth && truth <= c[1] {
			hits++
		}
		widths = append(widths, c[1]-c[0])
	}
	return float64(hits) / float64(n), quantile(widths, 0.5)
}

// exactWidth is the width of the central 95% of stat's sampling
// distribution, found by drawing: the interval a method would give if it
// knew the distribution.
func exactWidth(reps int, draw func(*rand.Rand) []float64, stat func([]float64) float64) float64 {
	rng := rand.New(rand.NewPCG(13, 17))
	vals := make([]float64, reps)
	for i := range vals {
		vals[i] = stat(draw(rng))
	}
	return quantile(vals, 0.975) - quantile(vals, 0.025)
}

func lognormal(rng *rand.Rand, n int, mu, sigma float64) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = math.Exp(mu + sigma*rng.NormFloat64())
	}
	return xs
}

// TestIntervalsOnKnownData: on synthetic data with known answers, the
// harness's 95% intervals cover the truth 93–97% of the time and are no
// wider than 110% of the exact interval (the central 95% of the statistic's
// own sampling distribution), so that padding them cannot pass: the median
// of round trips, the mean turn overhead behind the end-to-end figures,
// the ratio of two designs' means, and the slope of overhead against
// context. Tail quantiles, whose interval is between order statistics and
// so covers at least 95%, are checked for that, and for saying "not
// carried" where the sample is too small.
func TestIntervalsOnKnownData(t *testing.T) {
	if raceEnabled {
		t.Skip("a million resamples: too slow under the race detector; .ci/run runs it without")
	}
	t.Parallel()
	const reps = 1000
	check := func(name string, covered, width, exact float64) {
		t.Helper()
		t.Logf("%s: covers %.1f%%, width %.4g (exact %.4g, %.0f%%)", name, 100*covered, width, exact, 100*width/exact)
		if covered < 0.93 || covered > 0.97 {
			t.Errorf("%s: the 95%% interval covers the truth %.1f%% of the time, want 93–97%%", name, 100*covered)
		}
		if width > 1.10*exact {
			t.Errorf("%s: median width %.4g, more than 110%% of the exact %.4g", name, width, exact)
		}
	}

	// The median of 48 round trips' overhead, skewed as overhead is.
	rt := func(rng *rand.Rand) []float64 { return lognormal(rng, 48, 0, 0.5) }
	cov, w := coverage(reps, 1, rt, medianCI)
	check("median", cov, w, exactWidth(20000, rt, func(xs []float64) float64 { return quantile(xs, 0.5) }))

	// The mean of 100 turns' overhead.
	turns := func(rng *rand.Rand) []float64 { return lognormal(rng, 100, 0, 0.5) }
	trueMean := math.Exp(0.5 * 0.5 * 0.5)
	cov, w = coverage(reps, trueMean, turns, func(xs []float64) ([2]float64, bool) { return bootstrapCI(xs, mean), true })
	check("mean", cov, w, exactWidth(20000, turns, mean))

	// The ratio of two designs' means: one with half the other's overhead.
	pair := func(rng *rand.Rand) []float64 {
		return append(lognormal(rng, 100, 0, 0.5), lognormal(rng, 100, math.Log(2), 0.5)...)
	}
	ratioOf := func(xs []float64) float64 { return mean(xs[:100]) / mean(xs[100:]) }
	cov, w = coverage(reps, 0.5, pair, func(xs []float64) ([2]float64, bool) { return ratioCI(xs[:100], xs[100:], mean, mean), true })
	check("ratio of means", cov, w, exactWidth(20000, pair, ratioOf))

	// The Theil–Sen slope of 40 round trips whose overhead grows 10 µs per
	// 1k tokens of context over 1–40k, with noise of 40 µs.
	line := func(rng *rand.Rand) []float64 {
		ys := make([]float64, 40)
		for i := range ys {
			ys[i] = 1000 + 10*float64(i+1) + 40*rng.NormFloat64()
		}
		return ys
	}
	xs := make([]float64, 40)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	slopeOf := func(ys []float64) float64 { _, b := fit(xs, ys); return b }
	cov, w = coverage(reps/4, 10, line, func(ys []float64) ([2]float64, bool) { return slopeCI(xs, ys), true })
	check("slope", cov, w, exactWidth(4000, line, slopeOf))

	// p90 of 200 exponential round trips: covered at least 95%.
	exp := func(rng *rand.Rand) []float64 {
		xs := make([]float64, 200)
		for i := range xs {
			xs[i] = rng.ExpFloat64()
		}
		return xs
	}
	cov, _ = coverage(reps, math.Log(10), exp, func(xs []float64) ([2]float64, bool) {
		_, ci, ok := tailQuantile(xs, 0.9)
		return ci, ok
	})
	if cov < 0.95 {
		t.Errorf("p90 of 200: covers %.1f%%, want at least 95%%", 100*cov)
	}
	for _, tc := range []struct {
		n       int
		q       float64
		carried bool
	}{{48, 0.99, false}, {3, 0.95, false}, {58, 0.95, false}, {100, 0.95, true}, {6, 0.5, true}, {500, 0.99, true}} {
		xs := exp(rand.New(rand.NewPCG(1, uint64(tc.n))))[:min(tc.n, 200)]
		if tc.n > 200 {
			xs = slices.Concat(xs, xs, xs)[:tc.n]
		}
		v, _, carried := tailQuantile(xs, tc.q)
		if carried != tc.carried || !carried && v != slices.Max(xs) {
			t.Errorf("p%g of %d: carried %v (%v), want %v, and the maximum when not", 100*tc.q, tc.n, carried, v, tc.carried)
		}
	}
}
