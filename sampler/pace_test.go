package sampler

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// tokenTimes samples req in a synctest bubble and returns, for each token
// delta, its fake time since the start, and the total duration.
func tokenTimes(t *testing.T, s *Scripted, ctx context.Context, req *Request, slow func(i int)) ([]time.Duration, time.Duration, Result, error) {
	t.Helper()
	var times []time.Duration
	start := time.Now()
	res, err := s.Sample(ctx, req, func(d Delta) {
		if d.Kind == TextDelta || d.Kind == ArgsDelta {
			times = append(times, time.Since(start))
			if slow != nil {
				slow(len(times) - 1)
			}
		}
	})
	return times, time.Since(start), res, err
}

// TestPacing checks the schedule in fake time: token i at TTFT + i/TPS, and
// a sample of n tokens taking TTFT + (n-1)/TPS (no wait after the last).
func TestPacing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		pace      Timing
		tokens    int
		wantTotal time.Duration
	}{
		{"1000 TPS, 50ms TTFT", Timing{TPS: 1000, TTFT: 50 * time.Millisecond}, 100, 50*time.Millisecond + 99*time.Millisecond},
		{"TTFT only", Timing{TTFT: 30 * time.Millisecond}, 100, 30 * time.Millisecond},
		{"TPS only", Timing{TPS: 100}, 20, 190 * time.Millisecond},
		{"fractional rate", Timing{TPS: 3}, 4, time.Second},
		{"unpaced", Timing{}, 100, 0},
	}
	r := renderer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				times, total, res, err := tokenTimes(t, NewScripted(r, tt.pace), t.Context(), longRequest(tt.tokens), nil)
				if err != nil || res.OutputTokens != tt.tokens {
					t.Fatalf("Sample: %+v, %v; want %d tokens", res, err, tt.tokens)
				}
				if total != tt.wantTotal {
					t.Errorf("took %v, want %v", total, tt.wantTotal)
				}
				for i, at := range times {
					if want := tt.pace.Due(0, i); at != want {
						t.Fatalf("token %d at %v, want %v", i, at, want)
					}
				}
			})
		})
	}
}

// TestPacingNoDrift: a consumer that stalls gets the tokens that fell due
// meanwhile at once, and the schedule resumes where it was.
func TestPacingNoDrift(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := NewScripted(renderer(t), Timing{TPS: 1000, TTFT: 50 * time.Millisecond})
		stall := func(i int) {
			if i == 0 {
				time.Sleep(5500 * time.Microsecond) // fake time: the bubble's clock
			}
		}
		times, total, _, err := tokenTimes(t, s, t.Context(), longRequest(10), stall)
		if err != nil {
			t.Fatal(err)
		}
		ms := time.Millisecond
		want := []time.Duration{50 * ms, 55500 * time.Microsecond, 55500 * time.Microsecond, 55500 * time.Microsecond,
			55500 * time.Microsecond, 55500 * time.Microsecond, 56 * ms, 57 * ms, 58 * ms, 59 * ms}
		for i := range want {
			if times[i] != want[i] {
				t.Errorf("token %d at %v, want %v", i, times[i], want[i])
			}
		}
		if total != 59*ms {
			t.Errorf("took %v, want 59ms", total)
		}
	})
}

// TestPacingFromStart: a request's Start begins the schedule when the
// prompt was ready, so what the server did since (the events it sent while
// its model started) is inside the model's time, not added to it.
func TestPacingFromStart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := NewScripted(renderer(t), Timing{TPS: 1000, TTFT: 50 * time.Millisecond})
		req := longRequest(10)
		req.Start = time.Now()
		time.Sleep(20 * time.Millisecond) // the server's work before it samples, in the bubble's fake time
		times, total, _, err := tokenTimes(t, s, t.Context(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if times[0] != 30*time.Millisecond || total != 39*time.Millisecond {
			t.Errorf("first token %v and last %v after the call, want 30ms and 39ms (TTFT and 9 more tokens from Start)", times[0], total)
		}
	})
}

// TestPacingCancel: Sample returns ctx.Err() the moment ctx ends, whether it
// is waiting for the first token or between tokens.
func TestPacingCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		timeout    time.Duration
		wantTokens int
	}{
		{"during TTFT", 20 * time.Millisecond, 0},
		{"mid stream", 60500 * time.Microsecond, 11}, // tokens due at 50..60ms
	}
	r := renderer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
				defer cancel()
				s := NewScripted(r, Timing{TPS: 1000, TTFT: 50 * time.Millisecond})
				times, total, res, err := tokenTimes(t, s, ctx, longRequest(0), nil)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err %v, want DeadlineExceeded", err)
				}
				if total != tt.timeout {
					t.Errorf("returned after %v, want %v", total, tt.timeout)
				}
				if len(times) != tt.wantTokens || res.OutputTokens != tt.wantTokens {
					t.Errorf("%d tokens (Result %d), want %d", len(times), res.OutputTokens, tt.wantTokens)
				}
			})
		})
	}
}

// TestPacerLate: Late is how long after its token was due the last Wait
// returned; a sample that starts behind its schedule is late by as much.
func TestPacerLate(t *testing.T) {
	if p := NewPacer(Timing{}, time.Time{}, 0); p.Wait(context.Background(), 5) != nil || p.Late() != 0 {
		t.Errorf("unpaced: late %v", p.Late())
	}
	behind := 50 * time.Millisecond
	p := NewPacer(Timing{TPS: 1000}, time.Now().Add(-behind), 0)
	defer p.Stop()
	if err := p.Wait(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if p.Late() < behind {
		t.Errorf("late %v, want at least %v", p.Late(), behind)
	}
}

// TestEnginePace: Pace releases n tokens on the Timing's schedule, after
// the skipped ones, each once and in order, marking those that go out
// with the next in one step; unpaced, all at once on the caller.
func TestEnginePace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := NewEngineShards(1)
		tm := Timing{TPS: 100, TTFT: 10 * time.Millisecond}
		start := time.Now()
		var at []time.Duration
		if err := e.Pace(t.Context(), tm, start, 0, 2, 3, func(i int, more bool) {
			if i != len(at) {
				t.Errorf("token %d after %d tokens", i, len(at))
			}
			at = append(at, time.Since(start))
		}); err != nil {
			t.Fatal(err)
		}
		want := []time.Duration{30 * time.Millisecond, 40 * time.Millisecond, 50 * time.Millisecond}
		if !slices.Equal(at, want) {
			t.Errorf("tokens at %v, want %v", at, want)
		}
		// Late: every token due by now goes out in one step, all but the
		// last marked more.
		var more []bool
		if err := e.Pace(t.Context(), tm, time.Now().Add(-time.Second), 0, 0, 3, func(_ int, m bool) { more = append(more, m) }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(more, []bool{true, true, false}) {
			t.Errorf("a late step's tokens marked %v, want [true true false]", more)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := e.Pace(ctx, tm, time.Time{}, 0, 0, 3, func(int, bool) {}); err == nil {
			t.Error("Pace with an ended context returned nil")
		}
	})
	n := 0
	if err := NewEngine().Pace(t.Context(), Timing{}, time.Time{}, 0, 0, 5, func(int, bool) { n++ }); err != nil || n != 5 {
		t.Errorf("unpaced: %d tokens, %v; want 5, nil", n, err)
	}
	if err := NewEngine().Pace(t.Context(), Timing{}, time.Time{}, 0, 0, 0, func(int, bool) { n++ }); err != nil {
		t.Errorf("no tokens: %v", err)
	}
}
