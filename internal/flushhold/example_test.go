package flushhold_test

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/internal/flushhold"
	"github.com/tether-run/tether/sampler"
)

// conn is the write side of a minimal server's connection: the engine's
// emit callbacks fill buf (they never wait), and one writer goroutine
// writes it, holding its flush by the server's policy.
type conn struct {
	w     io.Writer
	ready chan struct{} // 1-buffered: buf has bytes, or the connection closed

	mu     sync.Mutex
	buf    []byte    // guarded by mu
	filled time.Time // when buf was first filled since the writer took it; guarded by mu
	closed bool      // guarded by mu
}

// emit adds a frame for the writer; the engine's goroutine calls it.
func (c *conn) emit(frame []byte) {
	c.mu.Lock()
	if len(c.buf) == 0 {
		c.filled = time.Now()
	}
	c.buf = append(c.buf, frame...)
	c.mu.Unlock()
	c.wake()
}

func (c *conn) wake() {
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// close has the writer write what is left, and end.
func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wake()
}

// writer writes what emit adds, one write a batch; while the server is
// saturated, it holds each write for what is added next.
func (c *conn) writer(p *flushhold.Policy) error {
	var t flushhold.Timer
	var out []byte
	for range c.ready {
		c.mu.Lock()
		if len(c.buf) > 0 {
			p.Waited(c.filled, time.Now()) // the writers' queue for the CPU, as this one saw it
		}
		out, c.buf = c.buf, out[:0]
		closed := c.closed
		c.mu.Unlock()
		if len(out) > 0 {
			select {
			case <-c.ready: // the signal of bytes just taken
			default:
			}
			if p.Hold(&t, c.ready) { // saturated: wait for the next frames, at most p.Bound()
				c.mu.Lock()
				out = append(out, c.buf...)
				c.buf = c.buf[:0]
				c.mu.Unlock()
			}
			if _, err := c.w.Write(out); err != nil {
				return err
			}
		}
		if closed {
			return nil
		}
	}
	return nil
}

// A minimal server's writer, a goroutine a connection writing a buffer the
// engine's emit callbacks fill, holds its flushes by the policy that
// package runtime's writers follow: one Policy for the server, fed the
// engine's lateness, and one Timer for each writer.
func Example() {
	engine := sampler.NewEngine() // the one whose steps emit the frames
	p := flushhold.New(flushhold.Options{Late: engine.Late})

	var out bytes.Buffer
	c := &conn{w: &out, ready: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() { done <- c.writer(p) }()

	c.emit([]byte("hello, "))
	c.emit([]byte("world"))
	c.close()
	<-done
	fmt.Println(out.String())
	fmt.Println("holds:", p.Holds()) // an idle server never holds
	// Output:
	// hello, world
	// holds: 0
}

// TestMinimalWriter: the example's writer makes one write of two frames
// 0.5 ms apart while the server is saturated (its engine steps late), the
// second frame's time; and one write each, as they come, when it is not.
func TestMinimalWriter(t *testing.T) {
	t.Parallel()
	type write struct {
		b     string
		after time.Duration
	}
	for _, saturated := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			late := time.Duration(0)
			if saturated {
				late = 10 * time.Millisecond
			}
			p := flushhold.New(flushhold.Options{Late: func() time.Duration { return late }})
			w := &recorder{start: time.Now()}
			c := &conn{w: w, ready: make(chan struct{}, 1)}
			done := make(chan error, 1)
			go func() { done <- c.writer(p) }()
			c.emit([]byte("a"))
			time.Sleep(500 * time.Microsecond)
			c.emit([]byte("b"))
			time.Sleep(5 * time.Millisecond)
			c.close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want, holds := []write{{"a", 0}, {"b", 500 * time.Microsecond}}, uint64(0)
			if saturated {
				want, holds = []write{{"ab", 500 * time.Microsecond}}, 1
			}
			var got []write
			for i, b := range w.writes {
				got = append(got, write{b, w.at[i]})
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("writes %v, want %v", got, want)
			}
			if p.Holds() != holds {
				t.Errorf("%d holds, want %d", p.Holds(), holds)
			}
		})
	}
}

// recorder records each write and when it was made, after start.
type recorder struct {
	start  time.Time
	writes []string
	at     []time.Duration
}

func (r *recorder) Write(b []byte) (int, error) {
	r.writes = append(r.writes, string(b))
	r.at = append(r.at, time.Since(r.start))
	return len(b), nil
}
