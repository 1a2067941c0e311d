package sampler

import (
	"context"
	"sync"
	"time"
)

// Pacer releases one sample's output tokens on a Timing's schedule: token i
// is due at start + Due(uncached, i). The schedule is absolute, so a slow
// consumer never makes later tokens later still: tokens already due are
// released at once, and the sample still ends on time.
//
// A Pacer is owned by the goroutine that streams the sample; it is not safe
// for concurrent use. Stop releases its timer.
type Pacer struct {
	t        Timing
	uncached int
	start    time.Time   // zero when unpaced
	timer    *time.Timer // created on the first wait that has to block
	late     time.Duration
}

// NewPacer returns the pacer of a sample that started at start and whose
// prompt has uncached tokens. Backends take start before they look the prompt
// up, so that the lookup is spent inside the model's time rather than added
// to it. A zero start means now. An unpaced Timing never reads the clock.
func NewPacer(t Timing, start time.Time, uncached int) *Pacer {
	p := &Pacer{t: t, uncached: uncached}
	if t.Paced() {
		if start.IsZero() {
			start = time.Now()
		}
		p.start = start
	}
	return p
}

// Wait blocks until token i is due, or ctx ends. It returns ctx.Err() when
// ctx has ended, even if the token was already due.
func (p *Pacer) Wait(ctx context.Context, i int) error {
	if !p.start.IsZero() {
		due := p.start.Add(p.t.Due(p.uncached, i))
		if d := time.Until(due); d > 0 {
			if p.timer == nil {
				p.timer = time.NewTimer(d)
			} else {
				p.timer.Reset(d)
			}
			select {
			case <-p.timer.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		p.late = max(time.Since(due), 0)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	default:
		return nil
	}
}

// Late is how late the last Wait returned after its token was due: the
// timer's resolution (on Linux, Go's timers wake up to a millisecond late),
// or a consumer that kept the sample from its schedule. The sample ends that
// much after the timing model's time; the model, not the API, took it.
func (p *Pacer) Late() time.Duration { return p.late }

// Stop releases the pacer's timer. The pacer must not be used afterwards.
func (p *Pacer) Stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// Pace releases n tokens on t's schedule, stepped by e with every sample it
// steps, as a local model's sample is but with no model behind it: no
// prompt to look up, no text to tokenize. The first token is due at start
// + t.Due(uncached, skip), after skip tokens paced unsent (a step's
// reasoning), and each next 1/TPS later. emit(i, more) is called for each
// token i as it falls due, on the engine's goroutine (it must not wait),
// more when token i+1 goes out in the same step. Pace returns when all n
// are out, or ctx's error when it ends first. With an unpaced t every token
// is emitted at once, on the caller's goroutine.
//
// The streaming floor of a load run (internal/streamfloor) paces its
// precomputed frames with it, so that its cadence is the served models'.
func (e *Engine) Pace(ctx context.Context, t Timing, start time.Time, uncached, skip, n int, emit func(i int, more bool)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if start.IsZero() && t.Paced() {
		start = time.Now()
	}
	if !t.Paced() {
		start = time.Time{}
	}
	i := 0
	seq := newSequence(ctx, nil, t, start, uncached, skip, []part{{toks: blankTokens(n)}}, 0, func(d Delta) {
		if d.Kind == TextDelta {
			emit(i, d.More)
			i++
		}
	})
	if start.IsZero() {
		seq.step(time.Time{})
	} else {
		e.run(ctx, seq)
	}
	return seq.err
}

// blanks are empty tokens, shared read-only by every Pace: a paced
// sequence steps through its part's tokens by index, and Pace's have no
// text.
var blanks struct {
	sync.Mutex
	toks []string
}

// blankTokens is n empty tokens.
func blankTokens(n int) []string {
	blanks.Lock()
	defer blanks.Unlock()
	if blanks.toks == nil || len(blanks.toks) < n { // never nil: a nil part's tokens are its text's
		blanks.toks = make([]string, max(n, 2*len(blanks.toks), 64))
	}
	return blanks.toks[:n:n]
}
