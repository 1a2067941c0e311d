package lockrank_test

import (
	"fmt"

	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// A suspension and a rollout as runtime declares them: each mutex is of its
// rank, and is locked and unlocked as a sync.Mutex is.
type (
	suspension struct {
		mu    lockrank.Mutex[lockrank.Suspension]
		state string // guarded by mu
	}
	rollout struct {
		mu lockrank.Mutex[lockrank.Rollout]
		sp *suspension
	}
)

// The order takes a rollout's lock, then its suspension's. Taken the other
// way round, under go test -race, the second Lock would end the process,
// naming both locks.
func Example() {
	r := &rollout{sp: &suspension{state: "running"}}
	r.mu.Lock()
	r.sp.mu.Lock()
	r.sp.state = "pausing"
	r.sp.mu.Unlock()
	r.mu.Unlock()
	fmt.Println(r.sp.state)
	// Output: pausing
}
