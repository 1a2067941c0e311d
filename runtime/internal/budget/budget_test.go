package budget

import (
	"sync"
	"testing"

	"github.com/tether-run/tether/protocol"
)

func TestBudget(t *testing.T) {
	t.Parallel()
	var unbounded *Budget
	if perr := unbounded.Charge(1 << 40); perr != nil || unbounded.Bounded() {
		t.Fatalf("a nil budget refused a charge (%v) or says it bounds", perr)
	}
	b := New(10 << 20)
	if perr := b.Charge(11 << 20); perr == nil || perr.Code != protocol.CodeServerMemory {
		t.Fatalf("a charge past the whole budget: %v, want %s", perr, protocol.CodeServerMemory)
	}
	if perr := b.Charge(6 << 20); perr != nil {
		t.Fatal(perr)
	}
	if perr := b.Charge(6 << 20); perr == nil {
		t.Fatal("a charge past what is left was taken")
	}
	b.Add(2 << 20) // a cache's: counted, room or not
	b.Refund(6 << 20)
	if got := b.Held(); got != 2<<20 {
		t.Fatalf("held %d, want %d", got, 2<<20)
	}
}

// TestBudgetConcurrent: charges from many goroutines never hold more than
// the budget together.
func TestBudgetConcurrent(t *testing.T) {
	t.Parallel()
	const max, n = 1000, 64
	b := New(max)
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range n {
		wg.Go(func() {
			if b.Charge(100) == nil {
				mu.Lock()
				taken++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if taken != max/100 || b.Held() != max {
		t.Fatalf("%d charges of 100 taken, %d held, of a budget of %d", taken, b.Held(), max)
	}
}
