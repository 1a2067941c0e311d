package flushhold

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestSaturated: the server is saturated when the latest four writers
// waited, or the engine was, later than LateAfter; not otherwise (one
// writer late among them is not), and never for a nil policy.
func TestSaturated(t *testing.T) {
	t.Parallel()
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
			for range 4 {
				p.Waited(tc.waited)
			}
			if got := p.Saturated(); got != tc.want {
				t.Errorf("Saturated() = %v, want %v", got, tc.want)
			}
			if tc.waited > DefaultLateAfter && tc.late <= DefaultLateAfter {
				p.Waited(0) // one writer on time among the four
				if p.Saturated() {
					t.Error("saturated with one of the latest four writers on time")
				}
			}
		})
	}
	var p *Policy
	p.Waited(time.Second)
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
		p.Waited(100 * time.Microsecond)
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
			for range 4 {
				p.Waited(5 * time.Millisecond) // the writers' queue is long
			}
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
