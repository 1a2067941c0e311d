package sampler

import (
	"context"
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
