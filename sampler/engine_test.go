package sampler

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// TestEngineBatch: samples due at the same instants are stepped together,
// one wake-up handing every sample its token, and each still gets its
// tokens on the Timing's schedule.
func TestEngineBatch(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	synctest.Test(t, func(t *testing.T) {
		pace := Timing{TPS: 100, TTFT: 20 * time.Millisecond}
		s := NewScripted(r, pace)
		const seqs, tokens = 3, 10
		var wg sync.WaitGroup
		for range seqs {
			wg.Go(func() {
				times, total, res, err := tokenTimes(t, s, t.Context(), longRequest(tokens), nil)
				if err != nil || res.OutputTokens != tokens {
					t.Errorf("Sample: %+v, %v", res, err)
				}
				if want := pace.Duration(0, tokens); total != want {
					t.Errorf("took %v, want %v", total, want)
				}
				for i, at := range times {
					if at != pace.Due(0, i) {
						t.Errorf("token %d at %v, want %v", i, at, pace.Due(0, i))
					}
				}
			})
		}
		wg.Wait()
		st := s.Engine().Stats()
		if st.Active != 0 || st.Tokens != seqs*tokens || st.Stepped != seqs*tokens || st.MaxBatch < 2 {
			t.Errorf("stats %+v: want no sequence left, %d tokens, %d sequences stepped, batches of more than one", st, seqs*tokens, seqs*tokens)
		}
		// One wake-up per token instant and shard (a shard per core), or a
		// few more where the samples were queued apart (one a sample).
		shards := min(seqs, len(s.Engine().shards))
		if st.Wakes < tokens || st.Wakes > uint64(tokens*shards+seqs) {
			t.Errorf("%d wake-ups for %d token instants on %d shards", st.Wakes, tokens, shards)
		}
	})
}

// TestEngineStep: with a step of 4 ms, tokens due every millisecond go out
// four at a time (the first alone, at its time), none before it is due and
// none a step or more after.
func TestEngineStep(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	synctest.Test(t, func(t *testing.T) {
		pace := Timing{TPS: 1000, TTFT: 10 * time.Millisecond}
		s := NewScripted(r, pace)
		const step, tokens = 4 * time.Millisecond, 20
		s.Engine().SetStep(step)
		times, _, res, err := tokenTimes(t, s, t.Context(), longRequest(tokens), nil)
		if err != nil || res.OutputTokens != tokens {
			t.Fatalf("Sample: %+v, %v", res, err)
		}
		instants := map[time.Duration]bool{}
		for i, at := range times {
			if due := pace.Due(0, i); at < due || at >= due+step {
				t.Errorf("token %d at %v, due %v: want within a step after", i, at, due)
			}
			instants[at] = true
		}
		if want := 1 + (tokens-1+3)/4; len(instants) != want {
			t.Errorf("%d tokens went out at %d instants, want %d", tokens, len(instants), want)
		}
	})
}

// TestEngineCancelWaiting: a sample cancelled while it waits for its first
// token leaves the engine at once, the others in the batch go on, and the
// engine's goroutine ends with the last of them (the bubble would report it
// blocked otherwise).
func TestEngineCancelWaiting(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	synctest.Test(t, func(t *testing.T) {
		s := NewScripted(r, Timing{TPS: 100, TTFT: time.Hour})
		other := NewScripted(r, Timing{TPS: 100})
		other.SetEngine(s.Engine())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := s.Sample(ctx, longRequest(5), func(Delta) { t.Error("a delta before the first token was due") })
			done <- err
		}()
		synctest.Wait()
		start := time.Now()
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Sample: %v, want context.Canceled", err)
		}
		if time.Since(start) != 0 {
			t.Errorf("the cancelled sample returned after %v", time.Since(start))
		}
		res, err := other.Sample(t.Context(), longRequest(5), func(Delta) {})
		if err != nil || res.OutputTokens != 5 {
			t.Errorf("the other sample: %+v, %v", res, err)
		}
	})
}

// TestEnginePanic: a panic in a sample's emit is raised on the goroutine
// that called Sample, and the engine steps the next sample.
func TestEnginePanic(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	synctest.Test(t, func(t *testing.T) {
		s := NewScripted(r, Timing{TPS: 1000})
		func() {
			defer func() {
				if p := recover(); p != "emit bug" {
					t.Errorf("recovered %v, want the emit's panic", p)
				}
			}()
			s.Sample(t.Context(), longRequest(5), func(d Delta) {
				if d.Kind == ArgsDelta {
					panic("emit bug")
				}
			})
			t.Error("Sample returned")
		}()
		res, err := s.Sample(t.Context(), longRequest(5), func(Delta) {})
		if err != nil || res.OutputTokens != 5 {
			t.Errorf("the next sample: %+v, %v", res, err)
		}
	})
}

// BenchmarkEngine streams samples of 50 tokens at 1000 tokens/s, seqs at
// once, through an engine, and reports the process's CPU per token; the
// samples are made beforehand (parts tokenized), so that the figure is the
// pacing and the hand-off alone. The sub-benchmarks "goroutines" pace each
// sample on its own goroutine and timer instead (Pacer), waking per token,
// for the same tokens.
func BenchmarkEngine(b *testing.B) {
	r, err := NewRenderer()
	if err != nil {
		b.Fatal(err)
	}
	const tokens = 50
	pace := Timing{TPS: 1000}
	toks := r.Tokens(strings.Repeat("lorem ipsum dolor sit amet ", 20))[:tokens]
	parts := []part{{text: "-", toks: toks}}
	for _, seqs := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("seqs=%d", seqs), func(b *testing.B) {
			e := NewEngine()
			benchCPUPerToken(b, seqs*tokens, func() {
				var wg sync.WaitGroup
				for range seqs {
					wg.Go(func() {
						ctx := context.Background()
						e.run(ctx, newSequence(ctx, r, pace, time.Now(), 0, 0, parts, 0, func(Delta) {}))
					})
				}
				wg.Wait()
			})
			st := e.Stats()
			b.ReportMetric(float64(st.Stepped)/float64(st.Wakes), "seqs/wake")
		})
		b.Run(fmt.Sprintf("goroutines/seqs=%d", seqs), func(b *testing.B) {
			benchCPUPerToken(b, seqs*tokens, func() {
				var wg sync.WaitGroup
				for range seqs {
					wg.Go(func() {
						p := NewPacer(pace, time.Time{}, 0)
						defer p.Stop()
						for i := range tokens {
							p.Wait(context.Background(), i)
						}
					})
				}
				wg.Wait()
			})
		})
	}
}

// benchCPUPerToken runs round b.N times and reports the process's CPU per
// token, round streaming tokens tokens.
func benchCPUPerToken(b *testing.B, tokens int, round func()) {
	b.Helper()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Skip("no rusage:", err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	for b.Loop() {
		round()
	}
	b.ReportMetric(float64((cpu()-start).Nanoseconds())/float64(b.N*tokens), "cpu-ns/token")
}

// TestEngineGoexit: an emit that ends the engine's goroutine
// (runtime.Goexit) fails its own sample, on the caller's goroutine, and the
// samples in the same batch go on, stepped by a goroutine that takes over.
func TestEngineGoexit(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	synctest.Test(t, func(t *testing.T) {
		engine := NewEngineShards(1) // one batch for both samples
		s := NewScripted(r, Timing{TPS: 1000})
		s.SetEngine(engine)
		var wg sync.WaitGroup
		wg.Go(func() {
			defer func() {
				if p := recover(); p != errEmitExited {
					t.Errorf("recovered %v, want errEmitExited", p)
				}
			}()
			s.Sample(t.Context(), longRequest(5), func(d Delta) {
				if d.Kind == ArgsDelta {
					goruntime.Goexit()
				}
			})
		})
		res, err := s.Sample(t.Context(), longRequest(5), func(Delta) {})
		if err != nil || res.OutputTokens != 5 {
			t.Errorf("the other sample: %+v, %v", res, err)
		}
		wg.Wait()
	})
}

// TestEngineTogether: tokens a late step releases together are marked so
// (Delta.More on all but the last), and only those.
func TestEngineTogether(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	synctest.Test(t, func(t *testing.T) {
		s := NewScripted(r, Timing{TPS: 1000})
		var more []bool
		tokens := 0
		res, err := s.Sample(t.Context(), longRequest(8), func(d Delta) {
			if d.Kind != ArgsDelta {
				return
			}
			more = append(more, d.More)
			if tokens++; tokens == 2 {
				time.Sleep(3 * time.Millisecond) // a slow consumer: tokens 2, 3 and 4 come due meanwhile
			}
		})
		if err != nil || res.OutputTokens != 8 {
			t.Fatalf("Sample: %+v, %v", res, err)
		}
		want := []bool{false, false, true, true, false, false, false, false}
		if !slices.Equal(more, want) {
			t.Errorf("More %v, want %v", more, want)
		}
	})
}

// TestEngineLate: the engine is late when its steps wake late four in a
// row, by the least of them; one late step is not (a collection's pause, a
// timer late on an idle machine); an idle engine is not late.
func TestEngineLate(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	synctest.Test(t, func(t *testing.T) {
		s := NewScripted(r, Timing{TPS: 1000}) // a token a millisecond
		e := s.Engine()
		var late []time.Duration // as each token's emit saw it
		_, _, res, err := tokenTimes(t, s, t.Context(), longRequest(10), func(i int) {
			late = append(late, e.Late())
			if i == 2 {
				time.Sleep(4 * time.Millisecond) // tokens 3 to 6 fall due meanwhile: one late step
			}
		})
		if err != nil || res.OutputTokens != 10 {
			t.Fatalf("Sample: %+v, %v", res, err)
		}
		if slices.Max(late) != 0 {
			t.Errorf("Late at each token: %v, want 0 throughout: one step woke late", late)
		}
		// Each emit takes 2 ms, twice a token's time: every step wakes
		// later than the one before (steps of 1, 2, 4, … tokens, 1, 3, 7,
		// 15 and 31 ms late), Late the least of the last four.
		late = late[:0]
		if _, _, _, err := tokenTimes(t, s, t.Context(), longRequest(60), func(int) {
			late = append(late, e.Late())
			time.Sleep(2 * time.Millisecond)
		}); err != nil {
			t.Fatal(err)
		}
		if late[3] != 0 || late[len(late)-1] < 2*time.Millisecond {
			t.Errorf("Late at each token of a step late every time: %v, want 0 until four late steps, then 2 ms and more", late)
		}
		synctest.Wait() // the shard's goroutine ends
		if l, st := e.Late(), e.Stats(); l != 0 || st.Late != 0 {
			t.Errorf("an idle engine is %v (stats %v) late, want 0", l, st.Late)
		}
	})
}
