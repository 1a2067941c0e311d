package runtime

import (
	goruntime "runtime"
	"testing"
	"testing/synctest"
	"time"
	"weak"
)

// TestAfterFuncStopped: a stopped afterFunc timer lets go of what it was
// for at once, though the runtime keeps the timer in its heap until it
// sweeps it; one not stopped calls its function when it fires, while what
// it is for is held. The live timers around it (sooner and later, so that
// it is neither the heap's head nor its last) keep the runtime from
// sweeping it, as a minute of tails' expiry timers does in a server.
func TestAfterFuncStopped(t *testing.T) {
	t.Parallel()
	var live []*time.Timer
	for range 32 {
		live = append(live, time.AfterFunc(30*time.Minute, func() {}))
	}
	p := new([1 << 10]byte)
	held := weak.Make(p)
	stopped := afterFunc(time.Hour, p, func(*[1 << 10]byte) { t.Error("a stopped timer fired") })
	for range 32 {
		live = append(live, time.AfterFunc(2*time.Hour, func() {}))
	}
	stopped.Stop()
	p = nil
	goruntime.GC()
	for _, tm := range live {
		tm.Stop()
	}
	if held.Value() != nil {
		t.Error("a stopped timer keeps what it was for alive")
	}

	synctest.Test(t, func(t *testing.T) {
		p := new([1 << 10]byte)
		fired := false
		afterFunc(time.Minute, p, func(got *[1 << 10]byte) { fired = got == p })
		time.Sleep(time.Minute)
		synctest.Wait()
		if !fired {
			t.Error("the timer did not call its function with what it was for")
		}
	})
}
