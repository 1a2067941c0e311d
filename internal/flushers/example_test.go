package flushers_test

import (
	"fmt"
	"sync"

	"github.com/tether-run/tether/internal/flushers"
)

// conn is a connection whose queued batches a flusher writes, two a turn.
type conn struct {
	name string
	out  *[]string
	mu   *sync.Mutex
	left int
	done *sync.WaitGroup
	gate chan struct{} // its first turn waits for it to close; nil: none
}

func (c *conn) FlushTurn() (more bool) {
	if c.gate != nil {
		<-c.gate
		c.gate = nil
	}
	for range 2 {
		if c.left == 0 {
			c.done.Done()
			return false
		}
		c.mu.Lock()
		*c.out = append(*c.out, fmt.Sprint(c.name, c.left))
		c.mu.Unlock()
		c.left--
	}
	if c.left == 0 {
		c.done.Done()
		return false
	}
	return true
}

// Two connections, with five and three batches, share one flusher: each
// writes two a turn, then lets the other go.
func Example() {
	f := flushers.New(1)
	var (
		mu   sync.Mutex
		out  []string
		done sync.WaitGroup
	)
	done.Add(2)
	gate := make(chan struct{}) // a's first turn waits until b is queued behind it
	f.Add(&conn{name: "a", out: &out, mu: &mu, left: 5, done: &done, gate: gate})
	f.Add(&conn{name: "b", out: &out, mu: &mu, left: 3, done: &done})
	close(gate)
	done.Wait()
	fmt.Println(out)
	// Output: [a5 a4 b3 b2 a3 a2 b1 a1]
}
