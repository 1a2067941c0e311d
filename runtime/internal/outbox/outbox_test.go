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
