package streamfloor

import (
	"syscall"
	"testing"
	"time"
)

// TestSpend: spend uses the CPU it is given, not only the time.
func TestSpend(t *testing.T) {
	const d = 20 * time.Millisecond
	before := processCPU(t)
	spend(d)
	if used := processCPU(t) - before; used < d {
		t.Errorf("spend(%v) used %v of CPU", d, used)
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
