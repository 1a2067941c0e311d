package sampler

import (
	"context"
	"math"
	"time"
)

// Pacing is a timing model for output: the first token is due TTFT after the
// sample starts, and token i (counting from 0) is due at
// start + TTFT + i/TPS. The schedule is absolute, so a slow consumer never
// makes later tokens later still: tokens already due are emitted at once. A
// sample of n tokens therefore takes TTFT + (n-1)/TPS, the last token ending
// it without a further wait. The zero Pacing is unpaced: no waits, no timers.
type Pacing struct {
	TPS  float64       // output tokens per second; 0 = unpaced
	TTFT time.Duration // wait before the first token
}

func (p Pacing) unpaced() bool { return p.TTFT <= 0 && !(p.TPS > 0) }

// due is the offset from the start at which token i is due.
func (p Pacing) due(i int) time.Duration {
	d := max(p.TTFT, 0)
	if p.TPS > 0 && !math.IsInf(p.TPS, 1) && i > 0 {
		// i*1e9/TPS is exact for whole rates and token counts below 2^53/1e9.
		d += time.Duration(math.Round(float64(i) * float64(time.Second) / p.TPS))
	}
	return d
}

// pacer holds one sample's schedule. It is owned by the sampling goroutine.
type pacer struct {
	p     Pacing
	done  <-chan struct{}
	start time.Time   // zero when unpaced
	timer *time.Timer // created on the first wait that has to block
}

func newPacer(ctx context.Context, p Pacing) *pacer {
	pc := &pacer{p: p, done: ctx.Done()}
	if !p.unpaced() {
		pc.start = time.Now()
	}
	return pc
}

// wait blocks until token i is due, or ctx ends. It returns ctx.Err() when ctx
// has ended, even if the token was already due.
func (pc *pacer) wait(ctx context.Context, i int) error {
	if !pc.start.IsZero() {
		if d := time.Until(pc.start.Add(pc.p.due(i))); d > 0 {
			if pc.timer == nil {
				pc.timer = time.NewTimer(d)
			} else {
				pc.timer.Reset(d)
			}
			select {
			case <-pc.timer.C:
			case <-pc.done:
				return ctx.Err()
			}
		}
	}
	select {
	case <-pc.done:
		return ctx.Err()
	default:
		return nil
	}
}

func (pc *pacer) stop() {
	if pc.timer != nil {
		pc.timer.Stop()
	}
}
