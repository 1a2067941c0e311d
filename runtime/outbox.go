package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// outbox is the queue of encoded frames between the goroutines that produce
// a stream's events and the one goroutine that writes them (a WebSocket
// session's writeLoop, an SSE handler).
//
// Putting a frame never blocks, so producers may hold their own locks while
// they put: a rollout keeps its events in order under its lock, a suspended
// rollout keeps its replay log in step with the connection under its own.
// Flow control is separate: a producer that can afford to wait calls room,
// with no lock held, and waits on the channel it returns. Each producer thus
// runs at most one batch of frames past the soft bound; the hard bound
// catches those that never wait (the read loop's error replies) when the
// client does not read at all. What a session does then is its slow-client
// rule, in one place (session.tooSlow).
type outbox struct {
	soft, hard int // frames
	hardBytes  int // and bytes: a queue past either bound is a client too slow

	now func() time.Time

	mu     sync.Mutex
	q      []queued      // guarded by mu
	bytes  int           // of the frames in q, guarded by mu
	spare  []queued      // the writer's last batch, reused; guarded by mu
	closed bool          // guarded by mu
	ended  bool          // no more frames will come: take returns nil once empty; guarded by mu
	full   chan struct{} // non-nil while len(q) >= soft; closed when it drains; guarded by mu
	ready  chan struct{} // 1-buffered: frames are waiting for the writer
}

// queued is one frame in an outbox: its bytes, when it was queued, and the
// account of the response it belongs to (nil for a frame of none, such as
// an error event).
type queued struct {
	b    []byte
	at   time.Time
	acct *delivery
}

// delivery is what one response's frames cost on their way out: encoding
// them (counted by the producer), waiting in the outbox and being written
// (counted by the writer). The rollout reads it when it reports its
// timings; the fields are atomic because those are different goroutines.
type delivery struct {
	frames, encode, outbox, write atomic.Int64 // frames written; nanoseconds
}

// wrote counts one frame the writer wrote from start to end.
func (d *delivery) wrote(q queued, start, end time.Time) {
	d.frames.Add(1)
	d.outbox.Add(int64(start.Sub(q.at)))
	d.write.Add(int64(end.Sub(start)))
}

// outQueueBytes is an outbox's hard bound in bytes (see outbox).
const outQueueBytes = 16 << 20

func newOutbox(soft int, now func() time.Time) *outbox {
	return &outbox{soft: soft, hard: 4 * soft, hardBytes: outQueueBytes, now: now, ready: make(chan struct{}, 1)}
}

// put queues b for the writer, on acct's account (nil for none). It never
// blocks; it fails once the outbox is closed, or beyond the hard bound.
func (o *outbox) put(b []byte, acct *delivery) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.closed || o.ended:
		return errSessionClosed
	case len(o.q) >= o.hard, len(o.q) > 0 && o.bytes+len(b) > o.hardBytes:
		return errSlowClient
	}
	o.q = append(o.q, queued{b: b, at: o.now(), acct: acct})
	o.bytes += len(b)
	if len(o.q) == o.soft {
		o.full = make(chan struct{})
	}
	select {
	case o.ready <- struct{}{}:
	default:
	}
	return nil
}

// room returns nil when the outbox is below its soft bound, and otherwise a
// channel closed when the writer has drained it (or the outbox closes).
func (o *outbox) room() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.full == nil {
		return nil
	}
	return o.full
}

// take waits for frames and returns all of them, oldest first, or nil when
// ctx ends or the outbox has ended and is empty. The returned slice is the
// writer's until its next take.
func (o *outbox) take(ctx context.Context) []queued {
	for {
		o.mu.Lock()
		if o.closed || o.ended && len(o.q) == 0 {
			o.mu.Unlock()
			return nil
		}
		if len(o.q) > 0 {
			batch := o.q
			clear(o.spare) // the frames the writer has written
			o.q, o.spare, o.bytes = o.spare[:0], batch, 0
			o.drainedLocked()
			o.mu.Unlock()
			return batch
		}
		o.mu.Unlock()
		select {
		case <-o.ready:
		case <-ctx.Done():
			return nil
		}
	}
}

// end tells the writer that no more frames will come: it takes the ones
// queued, then nil.
func (o *outbox) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// close fails every later put and releases the producers waiting for room.
// The frames still queued are dropped.
func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.q, o.bytes = nil, 0
	o.drainedLocked()
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

func (o *outbox) drainedLocked() {
	if o.full != nil {
		close(o.full)
		o.full = nil
	}
}
