//go:build !race

package lockrank_test

import (
	"testing"

	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// TestUncheckedCostsNothing: without the race detector a Mutex is a
// sync.Mutex: no allocation, and no check, so an inverted pair is taken
// as sync.Mutex would take it.
func TestUncheckedCostsNothing(t *testing.T) {
	var (
		suspension lockrank.Mutex[lockrank.Suspension]
		outbox     lockrank.Mutex[lockrank.Outbox]
		store      lockrank.RWMutex[lockrank.Store]
	)
	allocs := testing.AllocsPerRun(100, func() {
		outbox.Lock()
		suspension.Lock() // out of order: the race build ends the process here
		suspension.Unlock()
		outbox.Unlock()
		store.RLock()
		store.RUnlock()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a run, want 0", allocs)
	}
}
