package flushhold

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestSaturated: the server is saturated when every writer for LateFor
// waited, or the engine's steps were, later than LateAfter; not otherwise
// (writers late for less, or a writer on time among them), and never for
// a nil policy.
func TestSaturated(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	for _, tc := range []struct {
		name         string
		waited, late time.Duration
		engine       bool // the policy has the engine's signal
		want         bool
	}{
		{name: "idle", engine: true},
		{name: "writers on time", waited: 300 * time.Microsecond, late: DefaultLateAfter, engine: true},
		{name: "writers late", waited: DefaultLateAfter + 1, want: true},
		{name: "engine late", waited: 10 * time.Microsecond, late: DefaultLateAfter + 1, engine: true, want: true},
		{name: "both late", waited: time.Second, late: time.Second, engine: true, want: true},
		{name: "no engine", late: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts Options
			if tc.engine {
				opts.Late = func() time.Duration { return tc.late }
			}
			p := New(opts)
			// A writer every 100 µs, each having waited tc.waited, since
			// the first began to wait: for less than LateFor, then for
			// LateFor.
			begin, end := t0.Add(-tc.waited), t0.Add(-tc.waited+DefaultLateFor)
			at := t0
			for ; at.Before(end); at = at.Add(100 * time.Microsecond) {
				p.Waited(at.Add(-tc.waited), at)
			}
			if tc.waited > DefaultLateAfter && tc.waited < DefaultLateFor && tc.late <= DefaultLateAfter && p.Saturated() {
				t.Errorf("saturated with the writers late for %v, less than LateFor", at.Add(-100*time.Microsecond).Sub(begin))
			}
			p.Waited(end.Add(-tc.waited), end)
			if got := p.Saturated(); got != tc.want {
				t.Errorf("Saturated() = %v, want %v", got, tc.want)
			}
			if tc.waited > DefaultLateAfter && tc.late <= DefaultLateAfter {
				p.Waited(at, at) // one writer on time
				if p.Saturated() {
					t.Error("saturated with the latest writer on time")
				}
			}
		})
	}
	var p *Policy
	p.Waited(t0, t0.Add(time.Second))
	if p.Saturated() || p.Hold(&Timer{}, nil) || p.Holds() != 0 {
		t.Error("a nil policy holds")
	}
}

// TestHoldUnsaturated: a server that is not saturated adds no latency: Hold
// returns at once, without a hold counted.
func TestHoldUnsaturated(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := New(Options{Late: func() time.Duration { return 0 }})
		now := time.Now()
		p.Waited(now.Add(-100*time.Microsecond), now)
		var tm Timer
		start := time.Now()
		for range 3 {
			if p.Hold(&tm, make(chan struct{})) {
				t.Fatal("held on a server not saturated")
			}
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Hold took %v, want no time at all", d)
		}
		if n := p.Holds(); n != 0 {
			t.Errorf("%d holds counted, want 0", n)
		}
	})
}

// TestHoldBound: on a saturated server a hold with nothing more to take
// lasts the bound exactly, the default's or the one given, and one that is
// told of more ends then; each is counted. The timer is reused, and none
// runs once Hold has returned.
func TestHoldBound(t *testing.T) {
	t.Parallel()
	for _, bound := range []time.Duration{0, 300 * time.Microsecond} {
		synctest.Test(t, func(t *testing.T) {
			p := New(Options{Bound: bound})
			want := bound
			if bound == 0 {
				want = DefaultBound
			}
			if p.Bound() != want {
				t.Fatalf("Bound() = %v, want %v", p.Bound(), want)
			}
			now := time.Now()
			p.Waited(now.Add(-DefaultLateFor), now) // the writers' queue has been long for LateFor
			var tm Timer
			more := make(chan struct{}, 1)
			for i := range 2 {
				start := time.Now()
				if !p.Hold(&tm, more) {
					t.Fatal("did not hold on a saturated server")
				}
				if d := time.Since(start); d != want {
					t.Errorf("hold %d lasted %v, want the bound, %v", i, d, want)
				}
			}
			// Told of more at a third of the bound: the hold ends then.
			start := time.Now()
			go func() {
				time.Sleep(want / 3)
				more <- struct{}{}
			}()
			if !p.Hold(&tm, more) {
				t.Fatal("did not hold on a saturated server")
			}
			if d := time.Since(start); d != want/3 {
				t.Errorf("a hold told of more at %v ended at %v", want/3, d)
			}
			if n := p.Holds(); n != 3 {
				t.Errorf("%d holds counted, want 3", n)
			}
			// The timer was stopped: nothing fires after the hold.
			synctest.Wait()
			select {
			case <-tm.t.C:
				t.Error("the hold's timer fired after the hold ended")
			default:
			}
		})
	}
}
