// Package budget is a server's memory budget: the bytes its requests will
// hold, charged as each is admitted and refunded as it ends, and what its
// caches count. It is one atomic, charged and refunded from any goroutine
// without a lock. It knows nothing of requests: the runtime says what each
// costs.
package budget

import (
	"net/http"
	"sync/atomic"

	"github.com/tether-run/tether/protocol"
)

// Budget is a memory budget of Max bytes. A nil Budget, or one whose Max is
// 0, has no bound: every charge succeeds and nothing is counted.
type Budget struct {
	max  int64
	held atomic.Int64
}

// New is a budget of max bytes; 0 bounds nothing.
func New(max int64) *Budget { return &Budget{max: max} }

// Bounded reports whether the budget bounds anything.
func (b *Budget) Bounded() bool { return b != nil && b.max > 0 }

// Charge takes n bytes from the budget, or says there is no room for them,
// with an error its client can act on (the server's Limits.MaxMemory).
func (b *Budget) Charge(n int64) *protocol.Error {
	if !b.Bounded() || n <= 0 {
		return nil
	}
	for {
		held := b.held.Load()
		if held+n > b.max {
			if n > b.max {
				return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeServerMemory, "",
					"This would hold about %d MiB, more than this server's whole memory budget of %d MiB (--max-memory). Send a smaller one.", n>>20, b.max>>20)
			}
			return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeServerMemory, "",
				"What this server's clients have it hold (requests in progress, rollouts' contexts, frames not yet read) takes %d MiB of its memory budget of %d MiB (--max-memory), and this would need about %d MiB more. Retry shortly.", held>>20, b.max>>20, (n+1<<20-1)>>20)
		}
		if b.held.CompareAndSwap(held, held+n) {
			return nil
		}
	}
}

// Add counts n bytes (a cache's), room or not: what is cached is already
// held; it makes the charges that follow wait.
func (b *Budget) Add(n int64) {
	if b.Bounded() {
		b.held.Add(n)
	}
}

// Refund gives back n bytes Charge or Add counted.
func (b *Budget) Refund(n int64) { b.Add(-n) }

// Over reports whether what is held has passed the budget (what Add
// counts may take it there): a cache then lets go of what it can.
func (b *Budget) Over() bool { return b.Bounded() && b.held.Load() > b.max }

// Held is the bytes charged and added, not yet refunded.
func (b *Budget) Held() int64 {
	if b == nil {
		return 0
	}
	return b.held.Load()
}
