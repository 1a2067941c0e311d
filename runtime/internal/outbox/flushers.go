package outbox

import (
	"context"
	"time"

	"github.com/tether-run/tether/internal/flushers"
)

// TryWriter is a BatchWriter that can write a batch without waiting:
// TryBatch writes what the connection takes at once and reports blocked
// when it did not take it all; FinishBatch then writes the rest, waiting,
// and returns as WriteBatch does. TryBatch holds no flush (More).
type TryWriter interface {
	BatchWriter
	TryBatch(batch []Frame, start time.Time) (end time.Time, blocked bool, err error)
	FinishBatch(start time.Time) (end time.Time, err error)
}

// FlushBy has o's writer on demand run on f's flushers (package
// flushers), which write many outboxes from a few goroutines. Set after
// WriteOnDemand, with a writer that is a TryWriter, before the first put.
func (o *Outbox) FlushBy(f *flushers.Flushers) {
	if t, ok := o.write.(TryWriter); ok && f != nil {
		o.try, o.flushers = t, f
	}
}

// FlushTurn writes o's queue on a flusher, as writeQueued does, without
// waiting: a batch the socket does not take whole is finished by a writer
// of o's own, which goes on from there. It writes at most flushTurn
// batches, and reports more when frames are still queued.
func (o *Outbox) FlushTurn() (more bool) {
	now := o.now()
	if o.hold != nil {
		o.hold.Waited(o.woke, now) // its time waiting for the CPU
	}
	for turn := 0; ; turn++ {
		if turn >= flushTurn && o.wroteTurn() {
			return true
		}
		batch := o.Next(context.Background()) // nil once empty
		if batch == nil {
			return false
		}
		end, blocked, err := o.try.TryBatch(batch, now)
		switch {
		case err != nil:
			o.writeFailed(err)
			return false
		case blocked:
			go o.finish(now)
			return false
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
