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
// late (Options.Late, sampler.Engine.Late). Either past Options.LateAfter
// four times in a row (the latest four writers, the engine's latest four
// steps) is saturation: one late wake-up, a collection's pause or a
// timer a millisecond late on an idle machine, is not. A writer asks Hold before it
// flushes: when the server is saturated, Hold waits until the writer is
// told more is ready, or Options.Bound passes, and counts the hold.
//
// It is one policy for every writer of the project's servers: package
// runtime's session writer, and a minimal server's writer such as the
// Example's (a load run's floor), so that they are measured alike.
package flushhold

import (
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

// Options configure a Policy. The zero value holds for DefaultBound on the
// writers' signal alone.
type Options struct {
	// Bound is the longest a flush is held; 0 is DefaultBound.
	Bound time.Duration
	// LateAfter is the lateness, of a writer's run or the engine's step,
	// past which the server is saturated; 0 is DefaultLateAfter.
	LateAfter time.Duration
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
	bound, lateAfter time.Duration
	late             func() time.Duration

	waits [lateWaits]atomic.Int64 // the latest writers' waits to run, in nanoseconds, a ring
	next  atomic.Uint64           // the ring's next slot
	holds atomic.Uint64           // flushes held
}

// lateWaits is how many of the latest writers must have waited past
// LateAfter for the server to be saturated by its writers' signal: one
// writer woken late (a collection's pause) is not a queue for the CPU.
const lateWaits = 4

// New returns a policy with opts' bounds and signal.
func New(opts Options) *Policy {
	return &Policy{
		bound:     orDefault(opts.Bound, DefaultBound),
		lateAfter: orDefault(opts.LateAfter, DefaultLateAfter),
		late:      opts.Late,
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Bound is the longest Hold waits.
func (p *Policy) Bound() time.Duration { return p.bound }

// Waited records that a writer ran d after it had bytes to write: after
// the frame that woke it was queued, or its buffer was first filled. Two
// atomics; a writer calls it once a batch.
func (p *Policy) Waited(d time.Duration) {
	if p != nil {
		p.waits[(p.next.Add(1)-1)%lateWaits].Store(int64(d))
	}
}

// Saturated reports whether the server is saturated: each of the latest
// four writers waited, or the engine stepped (four steps in a row, as
// sampler.Engine.Late tells it), later than Options.LateAfter.
func (p *Policy) Saturated() bool {
	if p == nil {
		return false
	}
	least := time.Duration(p.waits[0].Load())
	for i := 1; i < lateWaits; i++ {
		least = min(least, time.Duration(p.waits[i].Load()))
	}
	if least > p.lateAfter {
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
