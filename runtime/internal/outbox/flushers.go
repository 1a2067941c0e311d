package outbox

import (
	"context"
	"sync"
	"time"
)

// Flushers write the outboxes of many connections from a few goroutines,
// rather than a goroutine a connection each time frames come. A writer on
// demand a batch kept every P's run queue full on a busy server, and a P
// polls the network only once its queue runs dry: a connection's reader
// then heard of its client's message late, from the runtime's monitor,
// and waited behind the writers (docs/measuring.md, "Where a step's time
// goes under load"). At most max flushers run at once, started as
// outboxes wait and gone when none does, so that an idle server holds
// none.
//
// A flusher never waits on a client: it writes what the socket takes at
// once (TryWriter), and an outbox whose socket does not take its batch
// whole goes on with a writer of its own, which writes the rest with the
// connection's deadline, and every batch after it, until its queue is
// empty; its next frames come back to the flushers.
type Flushers struct {
	max int

	mu      sync.Mutex
	q       []*Outbox // waiting for a flusher, oldest first from head; guarded by mu
	head    int       // guarded by mu
	running int       // guarded by mu
}

// NewFlushers returns flushers that run at most n goroutines at once.
func NewFlushers(n int) *Flushers { return &Flushers{max: max(n, 1)} }

// TryWriter is a BatchWriter that can write a batch without waiting:
// TryBatch writes what the connection takes at once and reports blocked
// when it did not take it all; FinishBatch then writes the rest, waiting,
// and returns as WriteBatch does. TryBatch holds no flush (More).
type TryWriter interface {
	BatchWriter
	TryBatch(batch []Frame, start time.Time) (end time.Time, blocked bool, err error)
	FinishBatch(start time.Time) (end time.Time, err error)
}

// FlushBy has o's writer on demand run on f's flushers. Set after
// WriteOnDemand, with a writer that is a TryWriter, before the first put.
func (o *Outbox) FlushBy(f *Flushers) {
	if t, ok := o.write.(TryWriter); ok && f != nil {
		o.try, o.flushers = t, f
	}
}

// add queues o for a flusher, and starts one if fewer than max run. The
// caller holds o.mu.
func (f *Flushers) add(o *Outbox) {
	f.mu.Lock()
	f.pushLocked(o)
	start := f.running < f.max
	if start {
		f.running++
	}
	f.mu.Unlock()
	if start {
		go f.run()
	}
}

// run is a flusher: it writes the outboxes queued, one after another, and
// ends when none is.
func (f *Flushers) run() {
	for {
		f.mu.Lock()
		if f.head == len(f.q) {
			f.running--
			f.mu.Unlock()
			return
		}
		o := f.q[f.head]
		f.q[f.head] = nil
		f.head++
		f.mu.Unlock()
		o.flush(f)
	}
}

// flush writes o's queue on a flusher until it is empty, as writeQueued
// does, without waiting: a batch the socket does not take whole is
// finished by a writer of o's own, which goes on from there.
//
// It writes at most flushTurn batches in a turn: an outbox that has frames
// queued still goes to the back of the flushers' queue, so that a stream
// that never stops (an unpaced model's) keeps no flusher from the others.
func (o *Outbox) flush(f *Flushers) {
	now := o.now()
	if o.hold != nil {
		o.hold.Waited(o.woke, now) // its time waiting for the CPU
	}
	for turn := 0; ; turn++ {
		if turn >= flushTurn && o.wroteTurn() {
			f.requeue(o)
			return
		}
		batch := o.Next(context.Background()) // nil once empty
		if batch == nil {
			return
		}
		end, blocked, err := o.try.TryBatch(batch, now)
		switch {
		case err != nil:
			o.writeFailed(err)
			return
		case blocked:
			go o.finish(now)
			return
		}
		now = end
	}
}

// flushTurn is how many batches a flusher writes of one outbox in a turn.
const flushTurn = 4

// wroteTurn ends a flusher's turn when frames are queued for another: it
// lets the batch written go, as Next does, and reports true; with none
// queued it reports false, and the flusher goes on (Next ends the writer).
func (o *Outbox) wroteTurn() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || len(o.q) == 0 {
		return false
	}
	o.taking = time.Time{} // written; the next batch's frames are queued
	o.countLocked(-o.inHand)
	o.inHand = 0
	clear(o.spare)
	ReleaseBuf(&o.spareB)
	return true
}

// requeue puts o, a flusher's, at the back of the queue, for a flusher
// running (the caller's) to take again.
func (f *Flushers) requeue(o *Outbox) {
	f.mu.Lock()
	f.pushLocked(o)
	f.mu.Unlock()
}

// pushLocked appends o to the queue, first moving the outboxes waiting to
// its front once those taken are half of it: on a server that never
// drains it, the queue stays the size of what waits. The caller holds mu.
func (f *Flushers) pushLocked(o *Outbox) {
	if f.head > 0 && f.head >= len(f.q)/2 {
		n := copy(f.q, f.q[f.head:])
		clear(f.q[n:])
		f.q, f.head = f.q[:n], 0
	}
	f.q = append(f.q, o)
}

// finish is the writer of o's own that a flusher hands a batch its socket
// did not take whole: it writes the rest, waiting, then goes on as a
// writer on demand.
func (o *Outbox) finish(start time.Time) {
	end, err := o.try.FinishBatch(start)
	if err != nil {
		o.writeFailed(err)
		return
	}
	o.writeFrom(end)
}
