package runtime

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestHandoff: a drive offered to a shut handoff is the offerer's; one
// offered to an open handoff is the reader's, taken once; and when offer and
// take race, exactly one of the two runs it.
func TestHandoff(t *testing.T) {
	var nilHandoff *handoff
	nilHandoff.begin()
	if nilHandoff.offer(func() {}) || nilHandoff.take() != nil {
		t.Fatal("a nil handoff took a drive")
	}

	var h handoff
	if h.offer(func() {}) {
		t.Fatal("a shut handoff took a drive")
	}
	if h.take() != nil {
		t.Fatal("a shut handoff gave a drive it was not offered")
	}

	ran := 0
	h.begin()
	if !h.offer(func() { ran++ }) {
		t.Fatal("an open handoff refused a drive")
	}
	if h.offer(func() { ran += 10 }) {
		t.Fatal("an open handoff took a second drive")
	}
	if d := h.take(); d == nil {
		t.Fatal("take found no drive")
	} else {
		d()
	}
	if ran != 1 || h.take() != nil {
		t.Fatalf("ran %d; a second take found a drive", ran)
	}

	for range 2000 {
		var h handoff
		var runs atomic.Int32
		drive := func() { runs.Add(1) }
		h.begin()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if !h.offer(drive) {
				drive() // the offerer's own goroutine
			}
		}()
		go func() {
			defer wg.Done()
			if d := h.take(); d != nil {
				d()
			}
		}()
		wg.Wait()
		if n := runs.Load(); n != 1 {
			t.Fatalf("the drive ran %d times", n)
		}
	}
}
