//go:build !linux

package ablate

import "time"

// procCPU and procRSS read /proc, which only Linux has: elsewhere a load
// run reports no server CPU or memory.
func procCPU(int) time.Duration { return 0 }
func procRSS(int) float64       { return 0 }
