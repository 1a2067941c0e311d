// Package flushhold is the policy by which a server's connection writers
// hold a flush briefly, to take the next batch of frames with it, while the
// server is saturated, and only then.
//
// A writer that flushes each batch as soon as it has one makes one write
// syscall a batch; on a server streaming tokens to hundreds of clients that
// is most often one small delta frame a write, and the writes are a quarter
// of its CPU. Holding the flush for the connection's next frame halves
// those writes, at the price of the hold's delay. That price is worth
// paying only when the server is saturated: its tokens then wait for the
// CPU longer than the hold, and what the hold saves shortens that wait.
// When it is not, a hold is latency added for nothing, so a writer does
// not hold at all.
//
// A Policy is shared by every writer of a server. It sees saturation in
// two signals, each read and written with atomics only: writers that
// waited long to run once they had bytes to write (the writers' queue for
// the CPU is long: Waited), and the engine that paces the tokens stepping
// late (Options.Late, sampler.Engine.Late). The writers' signal is
// saturation when every writer for Options.LateFor waited past
// Options.LateAfter; the engine's, when its latest four steps each were
// late past it. A queue that lasts a moment is not: a collection's pause,
// a timer a millisecond late, or the machine's other work (a load run's
// clients) taking the server's threads off the CPU for the kernel's
// time slice, each of which makes the writers of those few milliseconds
// late together on an idle server. A writer asks Hold before it
// flushes: when the server is saturated, Hold waits until the writer is
// told more is ready, or Options.Bound passes, and counts the hold.
//
// It is one policy for every writer of the project's servers: package
// runtime's session writer, and a minimal server's writer such as the
// Example's (a load run's floor), so that they are measured alike.
package flushhold

import (
	"math"
	"sync/atomic"
	"time"
)

// DefaultBound is the longest a flush is held. A stream at the load's 1,000
// tokens a second has its next token 1 ms after the last: a hold of that
// long takes the connection's next delta with it, while a longer one would
// add lag for no larger batch (a rollout whose frames wait merges its
// deltas anyway). It is also well under the wait a token sees on a
// saturated server (tens of milliseconds at p99), which is when a hold
// happens at all.
const DefaultBound = time.Millisecond

// DefaultLateAfter is how late a writer's run or the engine's step must be
// for the server to count as saturated. On a server with CPU to spare a
// woken goroutine runs within tens of microseconds, and a timer fires
// within a few hundred (a garbage collection's pause included); twice the
// hold's bound is past that noise, and a queue of that length is one a hold
// can shorten.
const DefaultLateAfter = 2 * time.Millisecond

// DefaultLateFor is how long the writers must have been late, every one of
// them, for the server to count as saturated by their signal. Measured at
// 50 streams (a server at a tenth of its two cores, beside its clients),
// the writers' late runs lasted 2 to 16 ms, each a few of the kernel's
// time slices; at 500 (saturated), 1,350 of 51,000 runs in 20 s lasted
// longer, some over 64 ms.
const DefaultLateFor = 20 * time.Millisecond

// Options configure a Policy. The zero value holds for DefaultBound on the
// writers' signal alone.
type Options struct {
	// Bound is the longest a flush is held; 0 is DefaultBound.
	Bound time.Duration
	// LateAfter is the lateness, of a writer's run or the engine's step,
	// past which the server is saturated; 0 is DefaultLateAfter.
	LateAfter time.Duration
	// LateFor is how long every writer must have been late for the server
	// to be saturated by the writers' signal; 0 is DefaultLateFor.
	LateFor time.Duration
	// Late reports how late the engine that paces the tokens stepped
	// last, past its earliest due token (sampler.Engine.Late). It is
	// called once a flush, never a frame, and must be cheap (atomics).
	// Nil: the writers' signal alone.
	Late func() time.Duration
}

// Policy decides, for every writer of a server, whether a flush is held.
// It is safe for concurrent use; its methods take no lock. A nil *Policy
// never holds.
type Policy struct {
	bound, lateAfter, lateFor time.Duration
	late                      func() time.Duration

	epoch     time.Time    // the times below count from it, in nanoseconds
	lateSince atomic.Int64 // when the writers' current late run began; onTime when the latest writer was on time
	lastRun   atomic.Int64 // when the latest writer ran
	holds     atomic.Uint64
}

// New returns a policy with opts' bounds and signal.
func New(opts Options) *Policy {
	p := &Policy{
		bound:     orDefault(opts.Bound, DefaultBound),
		lateAfter: orDefault(opts.LateAfter, DefaultLateAfter),
		lateFor:   orDefault(opts.LateFor, DefaultLateFor),
		late:      opts.Late,
		epoch:     time.Now(),
	}
	p.lateSince.Store(onTime)
	return p
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Bound is the longest Hold waits.
func (p *Policy) Bound() time.Duration { return p.bound }

// Waited records that a writer that had bytes to write since since (the
// frame that woke it was queued, or its buffer was first filled) ran at
// now. A few atomics; a writer calls it once a batch.
func (p *Policy) Waited(since, now time.Time) {
	if p == nil {
		return
	}
	at := int64(now.Sub(p.epoch))
	p.lastRun.Store(at)
	if now.Sub(since) <= p.lateAfter {
		p.lateSince.Store(onTime)
		return
	}
	p.lateSince.CompareAndSwap(onTime, int64(since.Sub(p.epoch))) // the run began as this writer began to wait
}

// onTime is lateSince while the latest writer was on time.
const onTime = math.MinInt64

// Saturated reports whether the server is saturated: every writer for
// Options.LateFor up to the latest waited, or the engine stepped (four
// steps in a row, as sampler.Engine.Late tells it), later than
// Options.LateAfter.
func (p *Policy) Saturated() bool {
	if p == nil {
		return false
	}
	if since := p.lateSince.Load(); since != onTime && p.lastRun.Load()-since >= int64(p.lateFor) {
		return true
	}
	return p.late != nil && p.late() > p.lateAfter
}

// Holds is how many flushes were held.
func (p *Policy) Holds() uint64 {
	if p == nil {
		return 0
	}
	return p.holds.Load()
}

// Timer is one writer's timer for its holds, made at its first. The zero
// Timer is ready to use; it belongs to one writer (one goroutine at a
// time), and holds no timer running once Hold has returned.
type Timer struct{ t *time.Timer }

// Hold holds a writer's flush while the server is saturated: it waits
// until more is ready to receive (the writer's signal that bytes were
// added since it took its batch) or the policy's bound passes, and reports
// whether it held, counting the hold. When the server is not saturated it
// returns false at once, without waiting. The writer then takes what was
// added meanwhile, if anything, and flushes it with what it had.
//
// A writer whose signal may hold a stale token (sent before it took its
// batch) drains it before Hold, or the hold ends at once.
func (p *Policy) Hold(t *Timer, more <-chan struct{}) bool {
	if !p.Saturated() {
		return false
	}
	p.holds.Add(1)
	if t.t == nil {
		t.t = time.NewTimer(p.bound)
	} else {
		t.t.Reset(p.bound)
	}
	select {
	case <-more:
		t.t.Stop()
	case <-t.t.C:
	}
	return true
}
