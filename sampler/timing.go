package sampler

import (
	"math"
	"time"
)

// Timing is the timing model every backend paces its output with: a sample
// whose prompt has uncached tokens the prefix cache did not hold emits its
// first token TTFT + uncached/PrefillRate after it starts, and output token i
// (counting from 0) i/TPS after that. The schedule is absolute (see Pacer),
// so a sample of n > 0 tokens takes exactly
//
//	TTFT + uncached/PrefillRate + (n-1)/TPS
//
// whatever the consumer does, the last token ending it without a further
// wait. Cached prompt tokens cost nothing, as in an inference engine that
// reuses their KV blocks.
//
// The zero Timing is unpaced: no waits, no timers. A zero (or negative, NaN
// or infinite) PrefillRate makes prefill free and the same TPS leaves output
// unpaced; a TTFT <= 0 adds nothing. Timing is a value: copy it freely.
type Timing struct {
	TPS         float64       // output tokens per second; 0 = unpaced
	TTFT        time.Duration // fixed wait before the first token, whatever the prompt
	PrefillRate float64       // uncached prompt tokens per second; 0 = free
}

// Paced reports whether any sample can wait: false for the zero Timing.
func (t Timing) Paced() bool {
	return t.TTFT > 0 || finiteRate(t.TPS) || finiteRate(t.PrefillRate)
}

// Prefill is the time to read uncached prompt tokens: uncached/PrefillRate,
// rounded to the nanosecond.
func (t Timing) Prefill(uncached int) time.Duration {
	if uncached <= 0 || !finiteRate(t.PrefillRate) {
		return 0
	}
	return perRate(uncached, t.PrefillRate)
}

// FirstToken is the offset from a sample's start at which its first token is
// due: TTFT plus the prefill of the uncached prompt tokens.
func (t Timing) FirstToken(uncached int) time.Duration {
	return addSat(max(t.TTFT, 0), t.Prefill(uncached))
}

// Due is the offset from a sample's start at which output token i is due:
// FirstToken(uncached) + i/TPS. Each term is rounded on its own, from the
// start, so that no rounding error accumulates from token to token.
func (t Timing) Due(uncached, i int) time.Duration {
	d := t.FirstToken(uncached)
	if i > 0 && finiteRate(t.TPS) {
		d = addSat(d, perRate(i, t.TPS))
	}
	return d
}

// Duration is the model's time for a whole sample of n output tokens: the
// offset of its last token, or FirstToken when it has none (the prompt is
// read even when nothing is written).
func (t Timing) Duration(uncached, n int) time.Duration {
	return t.Due(uncached, max(n-1, 0))
}

// finiteRate reports whether rate paces anything: positive and finite.
func finiteRate(rate float64) bool { return rate > 0 && !math.IsInf(rate, 1) }

// perRate is n/rate seconds. n*1e9/rate is exact for whole rates and counts
// below 2^53/1e9, so a schedule of whole rates lands on whole nanoseconds.
func perRate(n int, rate float64) time.Duration {
	d := math.Round(float64(n) * float64(time.Second) / rate)
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// addSat is a+b for non-negative durations, saturating instead of wrapping
// (an absurd rate must not turn into a negative, immediate deadline).
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
