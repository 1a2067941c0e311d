package outbox

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/internal/flushhold"
)

// holdingWriter is a BatchWriter that writes as a session's does: a
// batch, then what More takes with it, in one write.
type holdingWriter struct {
	o      *Outbox
	writes []string // each write's frames, joined
	at     []time.Duration
	start  time.Time
}

func (w *holdingWriter) WriteBatch(batch []Frame, _ time.Time) (time.Time, error) {
	var b []byte
	for _, q := range batch {
		b = append(b, q.Bytes...)
	}
	for _, q := range w.o.More() {
		b = append(b, q.Bytes...)
	}
	w.writes = append(w.writes, string(b))
	w.at = append(w.at, time.Since(w.start))
	return time.Now(), nil
}

func (w *holdingWriter) WriteFailed(error) {}

// TestOutboxMore: a writer on demand holds its write for the next frames,
// at most the policy's bound and once a write, only while the server is
// saturated; a frame put during the hold ends it and joins the write.
// Otherwise each frame is written as it comes, with no hold counted.
func TestOutboxMore(t *testing.T) {
	t.Parallel()
	for _, saturated := range []bool{false, true} {
		t.Run(fmt.Sprintf("saturated=%v", saturated), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				late := time.Duration(0)
				if saturated {
					late = time.Second
				}
				p := flushhold.New(flushhold.Options{Late: func() time.Duration { return late }})
				o := New(64, 0, time.Now)
				w := &holdingWriter{o: o, start: time.Now()}
				o.HoldBy(p)
				o.WriteOnDemand(w)
				put := func(s string) {
					if err := o.PutCopy([]byte(s), nil); err != nil {
						t.Fatal(err)
					}
				}
				put("a")
				time.Sleep(300 * time.Microsecond)
				put("b")
				time.Sleep(300 * time.Microsecond)
				put("c") // a hold ended by b ends its write: c waits for the next
				time.Sleep(10 * time.Millisecond)
				o.End()
				<-o.Done()
				want := "[a b c] [0s 300µs 600µs] 0"
				if saturated {
					// a's write waits for b; c's waits its bound, for nothing.
					want = "[ab c] [300µs 1.6ms] 2"
				}
				if got := fmt.Sprint(w.writes, " ", w.at, " ", p.Holds()); got != want {
					t.Errorf("writes, their times and holds: %s, want %s", got, want)
				}
			})
		})
	}
}

// TestOutboxMoreClosed: a writer asking for more of an outbox closed gets
// nothing, at once.
func TestOutboxMoreClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := flushhold.New(flushhold.Options{Late: func() time.Duration { return time.Second }})
		o := New(64, 0, time.Now)
		o.HoldBy(p)
		o.Put([]byte("a"), nil)
		o.Next(t.Context())
		o.Close()
		start := time.Now()
		if more := o.More(); more != nil || time.Since(start) != 0 || p.Holds() != 0 {
			t.Errorf("More on a closed outbox: %d frames after %v, %d holds", len(more), time.Since(start), p.Holds())
		}
	})
}
