package ablate

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"gonum.org/v1/gonum/stat/distuv"
)

// The statistics behind a summary. A run has a few dozen round trips per
// mode on a shared machine where one of them now and then takes several
// times the others, so every figure about round trips is a robust one (a
// median, or a line fitted by medians) and comes with a bootstrap interval:
// the noise within the run (turns taken as independent), not between runs.

// quantile is the q-quantile of xs by linear interpolation between the
// closest ranks; 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// fit is the Theil–Sen line through (xs, ys): the slope is the median of
// the slopes between all pairs of points with different x, the intercept
// the median of y - slope·x. Unlike least squares, a single slow round trip
// moves neither. Both are 0 for fewer than two distinct x.
func fit(xs, ys []float64) (intercept, slope float64) {
	var slopes []float64
	for i := range xs {
		for j := i + 1; j < len(xs); j++ {
			if dx := xs[j] - xs[i]; dx != 0 {
				slopes = append(slopes, (ys[j]-ys[i])/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return 0, 0
	}
	slope = quantile(slopes, 0.5)
	rest := make([]float64, len(xs))
	for i := range xs {
		rest[i] = ys[i] - slope*xs[i]
	}
	return quantile(rest, 0.5), slope
}

// resamples is how many bootstrap resamples an interval takes.
const resamples = 1000

// resample calls each with resamples draws of n indexes with replacement,
// for bootstrap intervals. The seed is fixed: the same data give the same
// intervals.
func resample(n int, each func(idx []int)) { resampleSeed(n, 0x7e7e, each) }

// resampleSeed is resample with a seed of the caller's: two samples
// resampled together draw apart.
func resampleSeed(n int, seed uint64, each func(idx []int)) {
	resampleSeedN(n, seed, resamples, each)
}

// resampleSeedN is resampleSeed with times resamples.
func resampleSeedN(n int, seed uint64, times int, each func(idx []int)) {
	if n == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(n), seed))
	idx := make([]int, n)
	for range times {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		each(idx)
	}
}

// ci95 is the 95% percentile interval of a statistic's bootstrap values.
func ci95(vals []float64) [2]float64 {
	return [2]float64{quantile(vals, 0.025), quantile(vals, 0.975)}
}

// pick is xs at idx.
func pick(xs []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for i, k := range idx {
		out[i] = xs[k]
	}
	return out
}

// binomCDF is P(B ≤ k) for B ~ Binomial(n, p).
func binomCDF(k, n int, p float64) float64 {
	if k < 0 {
		return 0
	}
	if k >= n {
		return 1
	}
	// The terms by their logarithms: n is at most a few thousand here.
	lp, lq := math.Log(p), math.Log1p(-p)
	lgN, _ := math.Lgamma(float64(n + 1))
	var sum float64
	for i := 0; i <= k; i++ {
		lgI, _ := math.Lgamma(float64(i + 1))
		lgR, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lgN - lgI - lgR + float64(i)*lp + float64(n-i)*lq)
	}
	return min(sum, 1)
}

// medianCI is the 95% interval of the median of xs: between two order
// statistics (distribution-free), interpolated between neighbours as
// Hettmansperger and Sheather do so that it covers 95%, not the 96–98% of
// the nearest exact pair. ok is false for fewer than 6 values, which no
// 95% interval of order statistics can hold.
func medianCI(xs []float64) (ci [2]float64, ok bool) {
	n := len(xs)
	if n < 6 {
		return ci, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	// cover(k) is the coverage of [x(k), x(n-k+1)] (1-based): P(k ≤ B ≤ n-k).
	cover := func(k int) float64 { return binomCDF(n-k, n, 0.5) - binomCDF(k-1, n, 0.5) }
	k := 1
	for k+1 <= n/2 && cover(k+1) >= 0.95 {
		k++
	}
	gk, gk1 := cover(k), cover(k+1)
	lambda := 0.0
	if gk > gk1 {
		i := (gk - 0.95) / (gk - gk1)
		lambda = float64(n-k) * i / (float64(k) + float64(n-2*k)*i)
	}
	at := func(r int) float64 { return s[r-1] }
	ci[0] = (1-lambda)*at(k) + lambda*at(k+1)
	ci[1] = (1-lambda)*at(n-k+1) + lambda*at(n-k)
	return ci, true
}

// tailQuantile is the q-quantile of xs with its 95% interval between two
// order statistics, when the sample can carry it: when both ends of the
// interval are inside the sample. Otherwise carried is false, and what the
// sample says of that tail is its maximum (for q above 0.5).
func tailQuantile(xs []float64, q float64) (v float64, ci [2]float64, carried bool) {
	n := len(xs)
	if n == 0 {
		return 0, ci, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	// The largest l with P(B < l) ≤ 2.5% and the smallest u with
	// P(B ≥ u) ≤ 2.5%, B ~ Binomial(n, q): [x(l), x(u)] covers 95%.
	l, u := 0, n+1
	for r := 1; r <= n; r++ {
		if binomCDF(r-1, n, q) <= 0.025 {
			l = r
		}
	}
	for r := n; r >= 1; r-- {
		if 1-binomCDF(r-1, n, q) <= 0.025 {
			u = r
		}
	}
	if l < 1 || u > n {
		return s[n-1], ci, false
	}
	return quantile(s, q), [2]float64{s[l-1], s[u-1]}, true
}

// slopeCI is the 95% percentile interval of the Theil–Sen slope of
// (xs, ys) over resamples of the points.
func slopeCI(xs, ys []float64) [2]float64 {
	var slopes []float64
	rx, ry := make([]float64, len(xs)), make([]float64, len(ys))
	resample(len(xs), func(idx []int) {
		for i, k := range idx {
			rx[i], ry[i] = xs[k], ys[k]
		}
		_, b := fit(rx, ry)
		slopes = append(slopes, b)
	})
	return ci95(slopes)
}

// mean is the arithmetic mean of xs; 0 for none.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// bootstrapCI is the 95% percentile interval of stat over resamples of
// xs (with a seed of its own, so that the same data give the same
// interval).
func bootstrapCI(xs []float64, stat func([]float64) float64) [2]float64 {
	var vals []float64
	buf := make([]float64, len(xs))
	resample(len(xs), func(idx []int) {
		for i, k := range idx {
			buf[i] = xs[k]
		}
		vals = append(vals, stat(buf))
	})
	return ci95(vals)
}

// ratioCI is the 95% percentile interval of sa(a)/sb(b) over resamples of
// a and of b drawn apart (two independent samples).
func ratioCI(a, b []float64, sa, sb func([]float64) float64) [2]float64 {
	return ci95(ratioBoot(a, b, sa, sb))
}

// ratioBoot is the bootstrap distribution of sa(a)/sb(b): resamples of a
// and of b drawn apart.
func ratioBoot(a, b []float64, sa, sb func([]float64) float64) []float64 {
	return ratioBootN(a, b, sa, sb, resamples)
}

// ratioBootN is ratioBoot with n resamples: a p-value that Holm's
// correction multiplies by the number of tests needs more of them than an
// interval does (its least value is 2/n).
func ratioBootN(a, b []float64, sa, sb func([]float64) float64, n int) []float64 {
	var va, vb []float64
	ba, bb := make([]float64, len(a)), make([]float64, len(b))
	resampleSeedN(len(a), 0x7e7e, n, func(idx []int) {
		for i, k := range idx {
			ba[i] = a[k]
		}
		va = append(va, sa(ba))
	})
	resampleSeedN(len(b), 0x5eed, n, func(idx []int) {
		for i, k := range idx {
			bb[i] = b[k]
		}
		vb = append(vb, sb(bb))
	})
	if len(va) != len(vb) {
		return nil
	}
	vals := make([]float64, len(va))
	for i := range va {
		vals[i] = ratio(va[i], vb[i])
	}
	return vals
}

// bootP is the two-sided bootstrap p-value of "the ratio is 1": twice the
// share of the bootstrap ratios on the far side of 1, ratios of exactly 1
// counted on both sides (so that identical data are no change), at least
// one resample's worth, so that it is never 0.
func bootP(vals []float64) float64 {
	if len(vals) == 0 {
		return 1
	}
	var below, above, ties int
	for _, v := range vals {
		switch {
		case v < 1:
			below++
		case v > 1:
			above++
		default:
			ties++
		}
	}
	far := max(min(below, above)+ties, 1)
	return min(1, 2*float64(far)/float64(len(vals)))
}

// holm adjusts p-values for testing them all at once (Holm–Bonferroni):
// the i-th smallest of m is multiplied by m-i, and kept from falling below
// those before it.
func holm(ps []float64) []float64 {
	idx := make([]int, len(ps))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(ps[a], ps[b]) })
	out := make([]float64, len(ps))
	running := 0.0
	for rank, i := range idx {
		running = max(running, min(1, float64(len(ps)-rank)*ps[i]))
		out[i] = running
	}
	return out
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// WithInterval formats v and its 95% interval as "5.7 (5.1–6.2)", with
// prec decimals; "-76 (-154 to -9)" when a bound is negative, where a dash
// would read as a minus; v alone when the interval is [0, 0] (none given).
func WithInterval(v float64, ci [2]float64, prec int) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	if ci == [2]float64{} && v != 0 {
		return f(v) // no interval: too few values to give one
	}
	sep := "–"
	if ci[0] < 0 || ci[1] < 0 {
		sep = " to "
	}
	return f(v) + " (" + f(ci[0]) + sep + f(ci[1]) + ")"
}

// A run's turns are not independent draws: the turns of one round ran
// together, and what the machine did then (another process, a collection,
// the CPU's clock) moved them together. The within-run intervals resample
// turns, and say how precisely one run measured its figures; the intervals
// over rounds resample whole rounds, each a trial's turns, and say how far
// another run of the same build on the same machine may land: a difference
// between two runs, or two builds, reads against them.

// MinRounds is the fewest rounds an interval over rounds is given from:
// resampling fewer draws from a handful of combinations (two rounds give
// three), and says nothing of the spread. From 10 it reads.
const MinRounds = 5

// roundsBoot is the bootstrap distribution of stat over n resamples of
// rounds, each drawn whole.
func roundsBoot(rounds [][]float64, stat func([]float64) float64, seed uint64, n int) []float64 {
	var vals, buf []float64
	resampleSeedN(len(rounds), seed, n, func(idx []int) {
		buf = buf[:0]
		for _, k := range idx {
			buf = append(buf, rounds[k]...)
		}
		vals = append(vals, stat(buf))
	})
	return vals
}

// roundsCI is the 95% interval of stat over resamples of rounds,
// expanded for how few they are (ci95Rounds).
func roundsCI(rounds [][]float64, stat func([]float64) float64) [2]float64 {
	return ci95Rounds(roundsBoot(rounds, stat, 0x7e7e, roundsResamples), len(rounds))
}

// ci95Rounds is the 95% interval of a bootstrap over n rounds, expanded
// for how few the rounds are (Hesterberg's expanded percentile interval):
// its percentiles are taken at α' rather than 2.5%, where the normal
// quantile of α' is √(n/(n−1)) times Student's t of 2.5% with n−1
// degrees of freedom: 0.86% for ten rounds, 0.1% for five. A plain
// percentile interval of a few draws is too narrow: of 400 simulated
// runs of ten rounds, its intervals held the truth 89% of the time, the
// expanded ones 94% (TestRoundsIntervalsCover).
func ci95Rounds(vals []float64, n int) [2]float64 {
	if n < 2 {
		return ci95(vals)
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(0.975)
	a := distuv.UnitNormal.CDF(-math.Sqrt(float64(n)/float64(n-1)) * t)
	return [2]float64{quantile(vals, a), quantile(vals, 1-a)}
}

// roundsResamples is how many resamples an interval over rounds takes:
// more than one over turns, for its percentiles lie further out (0.1% for
// five rounds).
const roundsResamples = 4000

// roundsRatioBoot is the bootstrap distribution of sa(a)/sb(b) over n
// resamples of their rounds. Paired (a's round i ran beside b's round i:
// two designs of one run, two builds interleaved), one draw of round
// indices serves both, so that what moved a round moves both sides of the
// ratio; otherwise a and b are drawn apart.
func roundsRatioBoot(a, b [][]float64, sa, sb func([]float64) float64, paired bool, n int) []float64 {
	if !paired || len(a) != len(b) {
		va, vb := roundsBoot(a, sa, 0x7e7e, n), roundsBoot(b, sb, 0x5eed, n)
		out := make([]float64, len(va))
		for i := range va {
			out[i] = ratio(va[i], vb[i])
		}
		return out
	}
	var out, ba, bb []float64
	resampleSeedN(len(a), 0x7e7e, n, func(idx []int) {
		ba, bb = ba[:0], bb[:0]
		for _, k := range idx {
			ba, bb = append(ba, a[k]...), append(bb, b[k]...)
		}
		out = append(out, ratio(sa(ba), sb(bb)))
	})
	return out
}

// roundsPermP is the two-sided p-value of "sa(a)/sb(b) is 1" by
// exchanging whole rounds between a and b: a randomization test, which
// holds its level however few the rounds are, where a bootstrap of ten
// rounds does not (it made a build against itself differ, p=0.001).
// Paired (a's round i ran beside b's round i), each round's two sides are
// swapped or not, every way when the rounds are few enough
// (maxExactRounds), else by n draws; apart, the rounds of both are dealt
// anew to a and b, by n draws. A deal counts as far as the one observed
// when its ratio is as far from 1, in either direction (by its log).
// With n rounds paired, the least p is 2/2ⁿ: ten rounds give 0.002.
func roundsPermP(a, b [][]float64, sa, sb func([]float64) float64, paired bool, n int) float64 {
	dist := func(x, y []float64) float64 {
		va, vb := sa(x), sb(y)
		if va <= 0 || vb <= 0 {
			return math.Inf(1)
		}
		return math.Abs(math.Log(va / vb))
	}
	var x, y []float64
	deal := func(fromA func(k int) bool, all [][]float64) float64 {
		x, y = x[:0], y[:0]
		for k, r := range all {
			if fromA(k) {
				x = append(x, r...)
			} else {
				y = append(y, r...)
			}
		}
		return dist(x, y)
	}
	observed := dist(slices.Concat(a...), slices.Concat(b...))
	tol := observed * 1e-9 // a deal that only reorders the turns sums them in another order
	far, deals := 0, 0
	count := func(d float64) {
		deals++
		if d >= observed-tol {
			far++
		}
	}
	rng := rand.New(rand.NewPCG(uint64(len(a)), 0x9e37))
	if paired && len(a) == len(b) {
		// Round k of a is all[2k], of b all[2k+1]; a swap deals them the
		// other way round.
		all := make([][]float64, 0, 2*len(a))
		for k := range a {
			all = append(all, a[k], b[k])
		}
		var swaps uint64
		fromA := func(k int) bool { return (k%2 == 0) != (swaps>>(k/2)&1 == 1) }
		if len(a) <= maxExactRounds {
			for swaps = 0; swaps < 1<<len(a); swaps++ {
				count(deal(fromA, all))
			}
			return float64(far) / float64(deals)
		}
		for range n {
			swaps = rng.Uint64()
			count(deal(fromA, all))
		}
		return float64(far+1) / float64(deals+1) // the observed deal counted among them
	}
	all := slices.Concat(a, b)
	order := make([]int, len(all))
	inA := make([]bool, len(all))
	for i := range order {
		order[i] = i
	}
	for range n {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for i, k := range order {
			inA[k] = i < len(a)
		}
		count(deal(func(k int) bool { return inA[k] }, all))
	}
	return float64(far+1) / float64(deals+1)
}

// maxExactRounds is the most rounds whose every swap roundsPermP tries
// (2¹⁴ deals); past it, it draws.
const maxExactRounds = 14
