// Package outbox is the queue of encoded frames between the goroutines that
// produce a response's events and the one that writes them to its client,
// and the buffers those frames are encoded into and kept in. Putting a
// frame never blocks and, in steady state, allocates nothing.
package outbox

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tether-run/tether/internal/flushers"
	"github.com/tether-run/tether/internal/flushhold"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// ErrClosed is Put's error once the outbox is closed or ended; ErrSlowClient
// once the client has fallen too far behind (see Outbox).
var (
	ErrClosed     = errors.New("runtime: session closed")
	ErrSlowClient = errors.New("runtime: client did not read events in time")
)

// Outbox is the queue of encoded frames between the goroutines that produce
// a stream's events and the one goroutine that writes them (a WebSocket
// session's writer on demand, an SSE handler).
//
// Putting a frame never blocks, so producers may hold their own locks while
// they put: a rollout keeps its events in order under its lock, a suspended
// rollout keeps its replay log in step with the connection under its own.
// A rollout never waits for its client: while frames of its account wait
// for the writer (Delivery.Queued), it holds its deltas back and merges
// them (the runtime's rollout.emitDelta), so a reader that falls behind gets fewer,
// larger deltas rather than a longer queue. A replay that can afford to
// wait calls Room, with no lock held, and waits on the channel it returns.
// A client is too slow when the queue passes its hard bound, or when the
// oldest frame not yet written is older than slowAfter; what a session
// does then is its slow-client rule, in one place (session.tooSlow).
type Outbox struct {
	soft, hard int           // frames
	hardBytes  int           // and bytes: a queue past either bound is a client too slow
	slowAfter  time.Duration // a frame unwritten for longer is a client too slow; 0: no bound

	now func() time.Time

	meter Meter // counts the bytes of the frames queued and in the writer's hands; nil: none

	hold  *flushhold.Policy // by which the writer on demand holds its flush (More); nil: never
	timer flushhold.Timer   // its holds' timer, owned by the writer on demand

	mu     lockrank.Mutex[lockrank.Outbox]
	q      []Frame       // guarded by mu
	bytes  int           // of the frames in q, guarded by mu
	inHand int           // of the writer's batch, counted until it asks for the next; guarded by mu
	spare  []Frame       // the writer's last batch, reused; guarded by mu
	buf    *[]byte       // the bytes of the frames PutCopy queued in q, from frameBufs; guarded by mu
	spareB *[]byte       // those of the writer's last batch; guarded by mu
	taking time.Time     // when the first frame of the batch the writer has in hand was queued; guarded by mu
	closed bool          // guarded by mu
	ended  bool          // no more frames will come: Next returns nil once empty; guarded by mu
	full   chan struct{} // non-nil while len(q) >= soft; closed when it drains; guarded by mu
	ready  chan struct{} // 1-buffered: frames are waiting for the writer

	// A writer on demand (writeOnDemand), guarded by mu.
	write   BatchWriter   // nil: the owner runs a writer of its own
	writer  func()        // o.writeQueued, bound once: a writer starts with no allocation
	woke    time.Time     // when the put that started the running writer queued its frame
	writing bool          // a writer goroutine is running (a broken one until it has told its owner)
	broken  bool          // a write failed: no writer starts again
	stopped chan struct{} // closed once the outbox has ended or closed and no writer runs; made by done
	over    bool          // it has ended or closed and no writer runs
	holding bool          // the writer holds its flush (More): a put signals ready

	flushers *flushers.Flushers // run the writer on demand (FlushBy); nil: a goroutine of its own
	try      TryWriter          // write, as the flushers' TryWriter
}

// Meter counts what outboxes hold (the server's memory budget): Add(n)
// as frames are queued, Add(-n) once they are written or dropped. It
// never refuses: a producer never waits, and a client that does not read
// is bounded by the outbox's own bounds and the slow-client rule, while
// the bytes it holds make the server's next requests wait.
type Meter interface{ Add(n int64) }

// CountIn has m count the bytes o holds. Set before the first put.
func (o *Outbox) CountIn(m Meter) { o.meter = m }

// countLocked tells the meter that the outbox holds n bytes more (less,
// when negative). The caller holds mu.
func (o *Outbox) countLocked(n int) {
	if o.meter != nil && n != 0 {
		o.meter.Add(int64(n))
	}
}

// HoldBy has the writer on demand hold its flushes by p (see More), and
// tell p how long it waited to run once frames woke it. Set before the
// first put.
func (o *Outbox) HoldBy(p *flushhold.Policy) { o.hold = p }

// BatchWriter writes an outbox's batches for its writer on demand:
// WriteBatch writes one, which the writer took at start (by the outbox's
// clock), and returns when it was done, the next batch's start, so that
// the clock is read once a batch; a write's error goes to WriteFailed
// (once: no writer starts again), on the writer's goroutine, which must
// close the outbox.
type BatchWriter interface {
	WriteBatch(batch []Frame, start time.Time) (end time.Time, err error)
	WriteFailed(error)
}

// maxQueuedBytes is an outbox's hard bound in bytes (see outbox). A
// response's end repeats its largest item in four events (the text's done,
// the part's, the item's and the terminal response), which go out at once:
// an item as large as the largest frame a client may send (16 MiB) must fit,
// or a client that reads well is cut for the size of an answer.
const maxQueuedBytes = 64 << 20

func New(soft int, slowAfter time.Duration, now func() time.Time) *Outbox {
	return &Outbox{soft: soft, hard: 4 * soft, hardBytes: maxQueuedBytes, slowAfter: slowAfter, now: now, ready: make(chan struct{}, 1)}
}

// Put queues b for the writer, on acct's account (nil for none); b is the
// outbox's from then on, and must not change. It never blocks; it fails
// once the outbox is closed, beyond the hard bound, or when the client has
// not taken a frame queued slowAfter ago.
func (o *Outbox) Put(b []byte, acct *Delivery) error {
	return o.queue(b, false, acct)
}

// PutCopy is Put for a frame its producer encoded into a buffer of its
// own, which it reuses once putCopy returns: the frame is copied into the
// outbox's frame buffer, which the writer hands back as it calls Next
// again, so that a stream of small frames allocates nothing in steady state.
func (o *Outbox) PutCopy(b []byte, acct *Delivery) error {
	return o.queue(b, true, acct)
}

// Frame buffers: a connection's outbox holds two while it streams (the one
// frames are copied into, the one whose frames the writer is writing) and
// none while it is idle, so that thousands of idle connections (parked
// rollouts) hold no frame bytes. A frame larger than maxCopiedFrame is
// copied on its own (a response object: rare, and a buffer that kept its
// size would hold it long after); a buffer grown past maxPooledBuf is not
// pooled again.
const (
	maxCopiedFrame = 16 << 10
	maxPooledBuf   = 256 << 10
)

var frameBufs = sync.Pool{New: func() any { return new([]byte) }}

// Buf is a frame buffer from the pool the outboxes share, empty: a
// transport that batches frames for one write (the WebSocket's corked
// connection) holds one only while it writes, and gives it back with
// ReleaseBuf.
func Buf() *[]byte { return frameBufs.Get().(*[]byte) }

// ReleaseBuf pools *b, unless it grew too large, and clears *b.
func ReleaseBuf(b **[]byte) {
	if *b != nil && cap(**b) <= maxPooledBuf {
		**b = (**b)[:0]
		frameBufs.Put(*b)
	}
	*b = nil
}

func (o *Outbox) queue(b []byte, copied bool, acct *Delivery) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	switch {
	case o.closed || o.ended:
		return ErrClosed
	case len(o.q) >= o.hard, len(o.q) > 0 && o.bytes+len(b) > o.hardBytes, o.lateLocked(now):
		return ErrSlowClient
	}
	if acct != nil {
		acct.Queued.Add(1)
	}
	switch {
	case copied && len(b) > maxCopiedFrame:
		b = bytes.Clone(b)
	case copied:
		if o.buf == nil {
			o.buf = Buf()
		}
		start := len(*o.buf)
		*o.buf = append(*o.buf, b...)
		b = (*o.buf)[start:len(*o.buf):len(*o.buf)]
	}
	o.q = append(o.q, Frame{Bytes: b, At: now, Acct: acct})
	o.bytes += len(b)
	o.countLocked(len(b))
	if len(o.q) == o.soft {
		o.full = make(chan struct{})
	}
	o.wakeLocked(now)
	return nil
}

// wakeLocked tells the writer that frames wait: the owner's, or one started
// now if none runs (writeOnDemand), or the one holding its flush (More).
func (o *Outbox) wakeLocked(now time.Time) {
	if o.write != nil {
		switch {
		case !o.writing && !o.broken:
			o.writing, o.woke = true, now
			if o.flushers != nil {
				o.flushers.Add(o)
			} else {
				go o.writer()
			}
		case o.holding:
			select {
			case o.ready <- struct{}{}:
			default:
			}
		}
		return
	}
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// WriteOnDemand gives the outbox a writer of its own, started when frames
// are queued and gone once they are written: a connection holds no
// goroutine for its writes while it has nothing to write (a parked
// rollout's, an idle one's). w writes its batches. Set before the first
// put.
func (o *Outbox) WriteOnDemand(w BatchWriter) { o.write, o.writer = w, o.writeQueued }

// writeQueued is the writer on demand: it writes what is queued until the
// queue is empty. woke is set before it starts and not again until it
// returns, so it reads it without the lock.
func (o *Outbox) writeQueued() {
	now := o.now()
	if o.hold != nil {
		o.hold.Waited(o.woke, now) // its time waiting for the CPU
	}
	o.writeFrom(now)
}

// writeFrom is writeQueued from now, the next batch's start.
func (o *Outbox) writeFrom(now time.Time) {
	for {
		batch := o.Next(context.Background()) // nil once empty: it does not wait
		if batch == nil {
			return
		}
		end, err := o.write.WriteBatch(batch, now)
		if err != nil {
			o.writeFailed(err)
			return
		}
		now = end
	}
}

// writeFailed ends the writer on demand on a failed write: no writer starts
// again, and the owner is told.
func (o *Outbox) writeFailed(err error) {
	o.mu.Lock()
	o.broken = true // no writer starts again
	o.mu.Unlock()
	o.write.WriteFailed(err) // before done: its owner's teardown follows the failure
	o.mu.Lock()
	o.writing = false
	o.stoppedLocked()
	o.mu.Unlock()
}

// Done is closed once the outbox has ended or closed and its writer on
// demand is gone: what was queued is written, or dropped. (Made when asked
// for: a connection that never ends holds no channel for it.)
func (o *Outbox) Done() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped == nil {
		o.stopped = make(chan struct{})
		if o.over {
			close(o.stopped)
		}
	}
	return o.stopped
}

func (o *Outbox) stoppedLocked() {
	if o.write == nil || o.over || o.writing || !o.closed && !o.ended {
		return
	}
	o.over = true
	if o.stopped != nil {
		close(o.stopped)
	}
}

// lateLocked reports whether the oldest frame not yet written, in the
// writer's hands or queued, waited longer than slowAfter.
func (o *Outbox) lateLocked(now time.Time) bool {
	oldest := o.taking
	if oldest.IsZero() && len(o.q) > 0 {
		oldest = o.q[0].At
	}
	return o.slowAfter > 0 && !oldest.IsZero() && now.Sub(oldest) > o.slowAfter
}

// Idle reports whether the outbox holds no frame: none queued, and none
// in its writer's hands (the writer has asked for the batch after the last
// one it took, and found none). A frame put before Idle reports true is
// written or dropped, and nothing of the outbox's reads it again.
func (o *Outbox) Idle() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.q) == 0 && o.taking.IsZero() && !o.writing
}

// Room returns nil when the outbox is below its soft bound, and otherwise a
// channel closed when the writer has drained it (or the outbox closes).
func (o *Outbox) Room() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.full == nil {
		return nil
	}
	return o.full
}

// Next waits for frames and returns all of them, oldest first, or nil when
// ctx ends or the outbox has ended and is empty; a writer on demand does
// not wait: nil once the queue is empty, and it is gone. The returned
// slice is the writer's until it calls Next again. A response whose frames it has now all
// taken sends the delta it holds back (see Delivery), into the next batch.
func (o *Outbox) Next(ctx context.Context) []Frame {
	return flushHeld(o.nextBatch(ctx))
}

// flushHeld has the responses whose frames the writer has now all taken
// send the deltas they hold back (see Delivery).
func flushHeld(batch []Frame) []Frame {
	for _, q := range batch {
		if a := q.Acct; a != nil && a.Queued.Load() == 0 && a.Holding.Load() {
			a.Flush()
		}
	}
	return batch
}

// More holds the flush of a writer on demand, by the outbox's policy (see
// package flushhold and HoldBy): while the server is saturated, it waits,
// at most the policy's bound, for frames queued after the batch the writer
// took, and takes them as Next does, to go out in the same write. It
// returns nil at once when the server is not saturated (no hold), and nil
// when the hold ended with nothing queued. The writer calls it from
// WriteBatch, once the batch's frames are in the transport's batch: the
// bytes of the batch Next (or More) returned are reused from then on.
func (o *Outbox) More() []Frame {
	if !o.hold.Saturated() {
		return nil
	}
	o.mu.Lock()
	if o.closed || o.ended && len(o.q) == 0 { // nothing more will come
		o.mu.Unlock()
		return nil
	}
	o.holding = true
	select {
	case <-o.ready: // a signal to a hold before this one
	default:
	}
	if len(o.q) == 0 {
		o.mu.Unlock()
		o.hold.Hold(&o.timer, o.ready)
		o.mu.Lock()
	}
	o.holding = false
	var batch []Frame
	if !o.closed && len(o.q) > 0 {
		batch = o.takeLocked()
	}
	o.mu.Unlock()
	return flushHeld(batch)
}

func (o *Outbox) nextBatch(ctx context.Context) []Frame {
	for {
		o.mu.Lock()
		if !o.closed && len(o.q) > 0 {
			batch := o.takeLocked()
			o.mu.Unlock()
			return batch
		}
		o.taking = time.Time{} // the last batch is written
		o.countLocked(-o.inHand)
		o.inHand = 0
		clear(o.spare) // written: an idle connection keeps no frames
		ReleaseBuf(&o.buf)
		ReleaseBuf(&o.spareB)
		if o.closed || o.ended || o.write != nil {
			if o.write != nil {
				o.writing = false
				o.stoppedLocked()
			}
			o.mu.Unlock()
			return nil
		}
		o.mu.Unlock()
		select {
		case <-o.ready:
		case <-ctx.Done():
			return nil
		}
	}
}

// takeLocked takes the queued frames (at least one) for the writer: the
// last batch it took is written, or in the transport's batch.
func (o *Outbox) takeLocked() []Frame {
	o.countLocked(-o.inHand)
	batch := o.q
	clear(o.spare) // the frames the writer has written
	o.inHand = o.bytes
	o.q, o.spare, o.bytes, o.taking = o.spare[:0], batch, 0, batch[0].At
	// The writer is done with its last batch's bytes: they take
	// the next frames, and this batch's wait for the next call of Next.
	if o.spareB != nil {
		*o.spareB = (*o.spareB)[:0]
	}
	o.buf, o.spareB = o.spareB, o.buf
	untake(batch)
	o.drainedLocked()
	return batch
}

// End tells the writer that no more frames will come: it takes the ones
// queued, then nil.
func (o *Outbox) End() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	if o.write == nil {
		o.wakeLocked(o.now())
	}
	o.stoppedLocked()
}

// Close fails every later Put and releases the producers waiting for room.
// The frames still queued are dropped.
func (o *Outbox) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	untake(o.q)
	o.countLocked(-o.bytes - o.inHand) // dropped, and the batch in hand let go with them
	o.q, o.bytes, o.inHand = nil, 0, 0
	o.drainedLocked()
	if o.write == nil {
		o.wakeLocked(o.now())
	}
	o.stoppedLocked()
}

// Finish drops the frames still queued, queues last alone and ends the
// outbox: the writer writes last after the batch in its hands, then stops.
func (o *Outbox) Finish(last []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.ended {
		return
	}
	untake(o.q)
	o.countLocked(len(last) - o.bytes)
	now := o.now()
	o.q, o.bytes, o.ended = append(o.q[:0], Frame{Bytes: last, At: now}), len(last), true
	o.drainedLocked()
	o.wakeLocked(now)
	o.stoppedLocked()
}

// untake takes frames off their responses' queued counts: the writer has
// them, or nobody will.
func untake(qs []Frame) {
	for _, q := range qs {
		if q.Acct != nil {
			q.Acct.Queued.Add(-1)
		}
	}
}

func (o *Outbox) drainedLocked() {
	if o.full != nil {
		close(o.full)
		o.full = nil
	}
}
