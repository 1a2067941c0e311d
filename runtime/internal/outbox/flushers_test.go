package outbox

import (
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-run/tether/internal/flushers"
)

// tryWriter is a TryWriter that records what it wrote, reports its first
// try blocked when told to, and counts the tries running at once.
type tryWriter struct {
	mu       sync.Mutex
	wrote    []string
	block    bool // the first try blocks
	finished int
	running  *atomic.Int32
	most     *atomic.Int32
}

func (w *tryWriter) record(batch []Frame) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range batch {
		w.wrote = append(w.wrote, string(f.Bytes))
	}
}

func (w *tryWriter) WriteBatch(batch []Frame, start time.Time) (time.Time, error) {
	w.record(batch)
	return start, nil
}

func (w *tryWriter) TryBatch(batch []Frame, start time.Time) (time.Time, bool, error) {
	n := w.running.Add(1)
	defer w.running.Add(-1)
	for m := w.most.Load(); n > m && !w.most.CompareAndSwap(m, n); m = w.most.Load() {
	}
	time.Sleep(100 * time.Microsecond) // a write: long enough for tries to overlap, if more ran
	w.record(batch)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.block {
		w.block = false
		return start, true, nil
	}
	return start, false, nil
}

func (w *tryWriter) FinishBatch(start time.Time) (time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finished++
	return start, nil
}

func (w *tryWriter) WriteFailed(error) {}

// TestFlushers: the outboxes of many writers are written by at most the
// flushers' bound of goroutines at once, each outbox's frames in order;
// one whose try blocks is finished by a writer of its own, which goes on
// with its queue; and the flushers are gone once every outbox is empty.
func TestFlushers(t *testing.T) {
	const outboxes, frames, most = 12, 50, 2
	f := flushers.New(most)
	var running, highest atomic.Int32
	ws := make([]*tryWriter, outboxes)
	os := make([]*Outbox, outboxes)
	for i := range ws {
		ws[i] = &tryWriter{block: i%3 == 0, running: &running, most: &highest}
		os[i] = New(1<<10, 0, time.Now)
		os[i].WriteOnDemand(ws[i])
		os[i].FlushBy(f)
	}
	var wg sync.WaitGroup
	for i, o := range os {
		wg.Go(func() {
			for k := range frames {
				if err := o.Put([]byte(fmt.Sprint(i, ":", k)), nil); err != nil {
					t.Error(err)
				}
				if k%10 == 0 {
					time.Sleep(50 * time.Microsecond) // let the writers drain, so that they start again
				}
			}
			o.End()
			<-o.Done()
		})
	}
	wg.Wait()
	for i, w := range ws {
		if len(w.wrote) != frames {
			t.Fatalf("outbox %d: %d frames written, want %d", i, len(w.wrote), frames)
		}
		for k, got := range w.wrote {
			if want := fmt.Sprint(i, ":", k); got != want {
				t.Fatalf("outbox %d: frame %d is %q, want %q", i, k, got, want)
			}
		}
		if want := map[bool]int{true: 1, false: 0}[i%3 == 0]; w.finished != want {
			t.Errorf("outbox %d: %d batches finished off the flushers, want %d", i, w.finished, want)
		}
	}
	if n := highest.Load(); n > most || n < 1 {
		t.Errorf("%d tries at once, want 1 to %d", n, most)
	}
	// A flusher that wrote an outbox's last frame goes once it finds the
	// queue empty, just after the outbox is done.
	for deadline := time.Now().Add(10 * time.Second); ; goruntime.Gosched() {
		running, waiting := f.Running()
		if running == 0 && waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d flushers running, %d outboxes waiting, with every outbox empty", running, waiting)
		}
	}
}
