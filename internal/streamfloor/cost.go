package streamfloor

import (
	"runtime"
	"time"
)

// Cost is CPU a floor spends besides its own work, spinning, standing for
// a costlier server's work: Step on each message a client sends, on the
// connection's goroutine before the step streams (as a server decodes and
// tokenizes what its client appended), and Token on each token, on the
// engine's goroutine as it releases the token (as a server encodes and
// queues each event). Set to a server's excess over the plain floor (the
// difference of their CPU a step, or a token), it shows what that much CPU
// alone does to the floor's lag, so that a server's lag over the floor's
// reads as its cost or as something else. The zero Cost spends nothing.
type Cost struct {
	Step, Token time.Duration
}

// spend spins until this goroutine's thread has used d of CPU: the thread
// is locked to it meanwhile, so that the thread's clock counts its time
// alone, and time it waits for a core while preempted is not counted.
// Where the thread's clock cannot be read it spins for d of wall time.
func spend(d time.Duration) {
	if d <= 0 {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, ok := threadCPU()
	if !ok {
		for t := time.Now(); time.Since(t) < d; {
		}
		return
	}
	for now := start; now-start < d; now, _ = threadCPU() {
	}
}
