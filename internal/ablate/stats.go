package ablate

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
)

// The statistics behind a summary. A run has a few dozen round trips per
// mode on a shared machine where one of them now and then takes several
// times the others, so every figure about round trips is a robust one (a
// median, or a line fitted by medians) and comes with a bootstrap interval
// that says how far the same run could have landed.

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
const resamples = 300

// resample calls each with resamples draws of n indexes with replacement,
// for bootstrap intervals. The seed is fixed: the same data give the same
// intervals.
func resample(n int, each func(idx []int)) {
	if n == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(n), 0x7e7e))
	idx := make([]int, n)
	for range resamples {
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

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// WithInterval formats v and its 95% interval as "5.7 (5.1–6.2)", with
// prec decimals.
func WithInterval(v float64, ci [2]float64, prec int) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	return f(v) + " (" + f(ci[0]) + "–" + f(ci[1]) + ")"
}
