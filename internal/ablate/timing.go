package ablate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/sampler"
)

// A turn's model time is computed from the timing the run is given (its
// speed, TTFT and PrefillRate), not measured, and the rest of its latency is
// API overhead. A server at a URL whose model runs at another timing would
// have every turn's difference counted as overhead, so the warm-up of the
// run's first design sets the server's own timing of each step (its
// timings' first_token and sample) against the computed one, and a clear
// mismatch ends the run. In-process, the server runs at the given timing by
// construction and nothing is checked.

// The tolerances of checkTiming (see matchTiming): a step is off by more
// than timingSlack and more than timingStepSlack, which is more than a
// timer's wake-up, the scheduler or an unpaced model's tokenizing moves
// one, and less than a model at another timing moves the timing probe's.
// A step that the assumed timing makes instant (an unpaced model) is off
// by more than unpacedStepSlack: it is all the server's own work, which a
// loaded machine stretches (up to 10 ms a probe step on 2 cores with a
// fresh clone's tests beside it), where a paced model's timer keeps time;
// a model at about 3,000 tokens/s or more is then not told from an
// unpaced one (a probe step of some 40 tokens takes 40 ms at 1,000).
const (
	timingSlack      = 0.25
	timingStepSlack  = 5 * time.Millisecond
	unpacedStepSlack = 15 * time.Millisecond
)

// TimingError is a run against a URL whose server's model does not run at
// the timing the run was given: the model time ablate computes for each
// turn would be wrong, and the difference counted as API overhead.
type TimingError struct {
	URL     string
	Assumed sampler.Timing
	// Measured is the timing the server's steps fit (fitTiming): TPS 0
	// when it streams unpaced.
	Measured sampler.Timing
	// StreamOff and FirstOff say what is off: the output rate (TPS), the
	// first token (TTFT and PrefillRate).
	StreamOff, FirstOff bool
	// First and AssumedFirst are a step's time to its first token, the
	// median as the server measured it and as Assumed makes it; Model and
	// AssumedModel the model's time over all the steps checked.
	First, AssumedFirst time.Duration
	Model, AssumedModel time.Duration
}

func (e *TimingError) Error() string {
	a, m := e.Assumed, e.Measured
	var what, pass, serve []string
	if e.StreamOff {
		speed := "streams unpaced"
		if m.TPS > 0 {
			speed = "streams at ~" + formatRate(m.TPS) + " tokens/s"
		}
		assumed := formatRate(a.TPS)
		if a.TPS == 0 {
			assumed += " (unpaced)"
		}
		what = append(what, fmt.Sprintf("%s where --tps is %s", speed, assumed))
		pass, serve = append(pass, "--tps "+formatRate(m.TPS)), append(serve, "--tps "+formatRate(a.TPS))
	}
	if e.FirstOff {
		what = append(what, fmt.Sprintf("sends a step's first token after ~%v where --ttft %v and --prefill-rate %s make it %v",
			round(e.First), a.TTFT, formatRate(a.PrefillRate), round(e.AssumedFirst)))
		ttft, rate := off(m.TTFT, a.TTFT, timingStepSlack), rateOff(m.PrefillRate, a.PrefillRate)
		if ttft || !rate {
			pass, serve = append(pass, "--ttft "+m.TTFT.String()), append(serve, "--ttft "+a.TTFT.String())
		}
		if rate || !ttft {
			pass, serve = append(pass, "--prefill-rate "+formatRate(m.PrefillRate)), append(serve, "--prefill-rate "+formatRate(a.PrefillRate))
		}
	}
	return fmt.Sprintf("ablate: the server at %s %s: pass %s (or serve with %s); ablate computes the model's time from these flags and counts the rest of a turn as API overhead (its warm-up's model took %v on the server, %v by the flags)",
		e.URL, strings.Join(what, ", and "), strings.Join(pass, " "), strings.Join(serve, " "), round(e.Model), round(e.AssumedModel))
}

// round is d to a tenth of a millisecond: a step's times are no finer.
func round(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// stepTiming is one sampling step as the server timed it, and what it read
// and wrote.
type stepTiming struct {
	uncached  int           // uncached prompt tokens
	output    int           // output tokens, reasoning included
	reasoning int           // of which paced but not sent
	first     time.Duration // to the first token sent
	sample    time.Duration // the whole step, less the pacer's lateness
}

// checkTiming returns a *TimingError when the server's timing of turns (a
// rollout that asked for tether.timings, each turn one sampling step)
// is clearly off what assumed makes it; nil when it matches, or when the
// server sent no timings to check.
func checkTiming(url string, assumed sampler.Timing, turns []clienttools.Turn) error {
	var steps []stepTiming
	for _, t := range turns {
		s := t.Server
		if s.SampleMicros == 0 && s.FirstTokenMicros == 0 {
			continue // no timings: not a tether, or it does not send them
		}
		u := t.Usage
		sample := max(time.Duration(s.SampleMicros-s.PacerLateMicros)*time.Microsecond, 0)
		steps = append(steps, stepTiming{uncached: u.InputTokens - u.InputTokensDetails.CachedTokens, output: u.OutputTokens,
			reasoning: u.OutputTokensDetails.ReasoningTokens, first: min(time.Duration(s.FirstTokenMicros)*time.Microsecond, sample), sample: sample})
	}
	return matchTiming(url, assumed, steps)
}

// matchTiming is checkTiming over steps. A step is off when its model time
// is clearly off the computed one: by more than timingStepSlack and by more
// than timingSlack of the computed time of the part that moved, the first
// token or the stream after it (a model whose TTFT is off by 40 ms is off,
// however long its steps stream). The server is off when most of its
// steps are off the same way: a model at another timing moves every step,
// a stall of the machine one. A first token that comes late (the timer,
// the scheduler) moves a step's first token and not its end, as the tokens
// after it are due on the same schedule: it does not make a step off.
func matchTiming(url string, assumed sampler.Timing, steps []stepTiming) error {
	if len(steps) == 0 {
		return nil
	}
	e := &TimingError{URL: url, Assumed: assumed, Measured: fitTiming(assumed, steps)}
	var slow, fast int
	var first, assumedFirst []float64
	for _, s := range steps {
		want, wantFirst := assumed.Duration(s.uncached, s.output), assumed.Due(s.uncached, s.reasoning)
		if s.output == s.reasoning { // the whole step went by before its first token
			wantFirst = want
		}
		dModel, dFirst := s.sample-want, s.first-wantFirst
		ref := want - wantFirst // the stream moved
		if dFirst.Abs() >= (dModel - dFirst).Abs() {
			ref = wantFirst // the first token moved
		}
		slack := timingStepSlack
		if want == 0 {
			slack = unpacedStepSlack
		}
		if d := dModel.Abs(); d > slack && float64(d) > timingSlack*float64(ref) {
			if dModel > 0 {
				slow++
			} else {
				fast++
			}
		}
		e.Model, e.AssumedModel = e.Model+s.sample, e.AssumedModel+want
		first, assumedFirst = append(first, float64(s.first)), append(assumedFirst, float64(wantFirst))
	}
	if 2*slow <= len(steps) && 2*fast <= len(steps) {
		return nil
	}
	e.First, e.AssumedFirst = time.Duration(quantile(first, 0.5)), time.Duration(quantile(assumedFirst, 0.5))
	var streams bool
	var measuredFirst, wantFirst time.Duration
	for _, s := range steps {
		streams = streams || s.output-s.reasoning > 1
		measuredFirst += e.Measured.FirstToken(s.uncached)
		wantFirst += assumed.FirstToken(s.uncached)
	}
	e.StreamOff = streams && rateOff(e.Measured.TPS, assumed.TPS)
	e.FirstOff = off(measuredFirst, wantFirst, time.Duration(len(steps))*timingStepSlack)
	if !e.StreamOff && !e.FirstOff { // off only taken together
		e.StreamOff, e.FirstOff = streams, true
	}
	return e
}

// fitTiming is the timing steps fit, by medians, as a stall of one step
// moves none of them: TPS the median over the steps of their tokens after
// the first over the time they took (0 when that was next to nothing:
// unpaced), TTFT and PrefillRate the Theil-Sen line through each step's
// first token against its uncached prompt tokens, with the reasoning tokens
// paced before it taken off at the TPS found. The assumed PrefillRate is
// kept unless the steps clearly show another (their prompts too alike to
// tell prefill from the TTFT, or the rate found moving the largest one's
// prefill by no more than timingStepSlack).
func fitTiming(assumed sampler.Timing, steps []stepTiming) sampler.Timing {
	var m sampler.Timing
	var perToken []float64 // seconds
	for _, s := range steps {
		if sent := s.output - s.reasoning; sent > 1 {
			perToken = append(perToken, (s.sample-s.first).Seconds()/float64(sent-1))
		}
	}
	tok := quantile(perToken, 0.5)
	switch {
	case len(perToken) == 0: // nothing streamed to tell
		m.TPS = assumed.TPS
		if assumed.TPS > 0 {
			tok = 1 / assumed.TPS
		}
	case tok > unpacedToken.Seconds():
		m.TPS = roundRate(1 / tok)
	}
	xs, ys := make([]float64, len(steps)), make([]float64, len(steps))
	for i, s := range steps {
		xs[i], ys[i] = float64(s.uncached), max(s.first.Seconds()-float64(s.reasoning)*tok, 0)
	}
	var assumedB float64 // seconds per uncached token
	if r := assumed.PrefillRate; r > 0 && !math.IsInf(r, 1) {
		assumedB = 1 / r
	}
	b, most := assumedB, slices.Max(xs)
	if most-slices.Min(xs) >= minPrefillSpread {
		_, b = fit(xs, ys)
	}
	prefill := func(b float64) time.Duration { return time.Duration(b * most * 1e9) }
	switch {
	case (prefill(b) - prefill(assumedB)).Abs() <= timingStepSlack: // not clearly another rate
		b = assumedB
	case prefill(b) < minTTFT: // the server's own work before the first token, as minTTFT says: free
		b = 0
	}
	rest := make([]float64, len(xs))
	for i := range xs {
		rest[i] = ys[i] - b*xs[i]
	}
	a := quantile(rest, 0.5) // the TTFT
	if a < 0 {               // no TTFT: the rate alone
		var rates []float64
		for i := range xs {
			if xs[i] > 0 {
				rates = append(rates, ys[i]/xs[i])
			}
		}
		a, b = 0, quantile(rates, 0.5)
		if prefill(b) < minTTFT { // the server's own work before the first token, not a rate
			b = 0
		}
	}
	if m.TTFT = time.Duration(a * 1e9).Round(time.Millisecond); m.TTFT < minTTFT {
		m.TTFT = 0 // the server's own work before the first token, not its timing
	}
	if b > 0 {
		m.PrefillRate = roundRate(1 / b)
	}
	return m
}

const (
	// unpacedToken is the least time a token streamed after a step's first
	// takes for its server to be taken as paced, 20,000 tokens a second: an
	// unpaced server's own work takes nearly that long a token on a loaded
	// machine.
	unpacedToken = 50 * time.Microsecond
	// minTTFT is the least TTFT fitTiming finds: less is the server's work
	// before a step's first token (a prompt looked up, an unpaced model's
	// tokenizing), which takes up to a millisecond on a loaded machine.
	minTTFT = 2 * time.Millisecond
	// minPrefillSpread is the least spread of the steps' uncached prompt
	// tokens over which a prefill rate is fit apart from the TTFT.
	minPrefillSpread = 16
)

// off reports whether got is clearly off want: by more than timingSlack of
// want and by more than slack.
func off(got, want, slack time.Duration) bool {
	d := (got - want).Abs()
	return d > slack && float64(d) > timingSlack*float64(want)
}

// rateOff reports whether rate got is clearly off want: one free (0) and
// not the other, or apart by more than timingSlack.
func rateOff(got, want float64) bool {
	if got <= 0 || want <= 0 {
		return (got > 0) != (want > 0)
	}
	return math.Abs(math.Log(got/want)) > math.Log1p(timingSlack)
}

// roundRate is r to two significant digits: a measured rate's precision.
func roundRate(r float64) float64 {
	if r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return 0
	}
	unit := math.Pow(10, math.Floor(math.Log10(r))-1)
	return math.Round(r/unit) * unit
}

// formatRate is r as a flag takes it.
func formatRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }
