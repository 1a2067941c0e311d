package runtime

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
	o := newOutbox(2, 0, time.Now)
	for i := range o.hard {
		if err := o.put([]byte("x"), nil); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if err := o.put([]byte("x"), nil); err != errSlowClient {
		t.Fatalf("past the frame bound: %v", err)
	}
	o.next(t.Context())

	big := bytes.Repeat([]byte("y"), o.hardBytes+1)
	if err := o.put(big, nil); err != nil {
		t.Fatalf("one large frame into an empty queue: %v", err)
	}
	if err := o.put([]byte("x"), nil); err != errSlowClient {
		t.Fatalf("past the byte bound: %v", err)
	}
	if batch := o.next(t.Context()); len(batch) != 1 || len(batch[0].b) != len(big) {
		t.Fatalf("took %d frames", len(batch))
	}
	if err := o.put([]byte("x"), nil); err != nil {
		t.Fatalf("after the take: %v", err)
	}
}
