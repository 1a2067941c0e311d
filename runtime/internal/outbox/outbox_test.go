package outbox

import (
	"bytes"
	"testing"
	"time"
)

// TestOutboxBounds: a queue that reaches its hard bound in frames, or in
// bytes, refuses the next frame (the slow-client rule), except that one
// frame larger than the byte bound is taken into an empty queue; taking
// the queue resets both.
func TestOutboxBounds(t *testing.T) {
	o := New(2, 0, time.Now)
	for i := range o.hard {
		if err := o.Put([]byte("x"), nil); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if err := o.Put([]byte("x"), nil); err != ErrSlowClient {
		t.Fatalf("past the frame bound: %v", err)
	}
	o.Next(t.Context())

	big := bytes.Repeat([]byte("y"), o.hardBytes+1)
	if err := o.Put(big, nil); err != nil {
		t.Fatalf("one large frame into an empty queue: %v", err)
	}
	if err := o.Put([]byte("x"), nil); err != ErrSlowClient {
		t.Fatalf("past the byte bound: %v", err)
	}
	if batch := o.Next(t.Context()); len(batch) != 1 || len(batch[0].Bytes) != len(big) {
		t.Fatalf("took %d frames", len(batch))
	}
	if err := o.Put([]byte("x"), nil); err != nil {
		t.Fatalf("after the take: %v", err)
	}
}

// meter is a Meter that sums what it is told.
type meter struct{ n int64 }

func (m *meter) Add(n int64) { m.n += n }

// TestOutboxCounts: an outbox's meter counts the bytes of the frames it
// queues, and of the batch in its writer's hands, until the writer asks
// for the next one; a close counts out what it drops, a finish what it
// replaces.
func TestOutboxCounts(t *testing.T) {
	var m meter
	o := New(64, 0, time.Now)
	o.CountIn(&m)
	check := func(when string, want int64) {
		t.Helper()
		if m.n != want {
			t.Fatalf("%s: the meter counts %d bytes, want %d", when, m.n, want)
		}
	}
	o.Put(make([]byte, 100), nil)
	o.PutCopy(make([]byte, 20), nil)
	check("queued", 120)
	o.Next(t.Context())
	o.Put(make([]byte, 5), nil)
	check("a batch in hand, a frame queued", 125)
	o.Next(t.Context())
	check("the first batch written", 5)
	o.Put(make([]byte, 7), nil)
	o.Finish(make([]byte, 3))
	check("finished: the queued frame replaced by the last", 8)
	o.Close()
	check("closed", 0)
	if o.Next(t.Context()); m.n != 0 {
		t.Fatalf("the writer's next call after a close counted %d", m.n)
	}
}

// batchWriter is a BatchWriter whose writes wait for release.
type batchWriter struct {
	started chan struct{}
	release chan struct{}
}

func (w *batchWriter) WriteBatch(batch []Frame, start time.Time) (time.Time, error) {
	w.started <- struct{}{}
	<-w.release
	return start, nil
}
func (w *batchWriter) WriteFailed(error) {}

// TestOutboxIdle: an outbox is idle only with no frame queued and none in
// its writer's hands, whether its owner runs the writer or it runs one on
// demand, which is busy until it has found the queue empty.
func TestOutboxIdle(t *testing.T) {
	o := New(64, 0, time.Now)
	if !o.Idle() {
		t.Fatal("a new outbox is not idle")
	}
	o.Put([]byte("x"), nil)
	if o.Idle() {
		t.Fatal("idle with a frame queued")
	}
	o.Next(t.Context())
	if o.Idle() {
		t.Fatal("idle with a batch in the writer's hands")
	}
	o.End()
	if o.Next(t.Context()) != nil || !o.Idle() {
		t.Fatal("not idle once the writer found nothing more")
	}

	w := &batchWriter{started: make(chan struct{}), release: make(chan struct{})}
	o = New(64, 0, time.Now)
	o.WriteOnDemand(w)
	o.Put([]byte("y"), nil)
	<-w.started
	if o.Idle() {
		t.Fatal("idle while the writer on demand writes")
	}
	close(w.release)
	o.End()
	<-o.Done()
	if !o.Idle() {
		t.Fatal("not idle once the writer on demand is gone")
	}
}
