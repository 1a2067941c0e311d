//go:build !linux

package streamfloor

import "time"

// threadCPU reports that the thread's clock is not read here: spend spins
// for wall time instead.
func threadCPU() (time.Duration, bool) { return 0, false }
