package ablate

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/internal/profiling"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/prommetrics"
	"github.com/tether-run/tether/sampler"
)

// TestLagRecorder checks the lag arithmetic on a step whose arrivals are
// given: tokens due 1 ms apart from the earliest start no token beat, and a
// merged delta's earlier tokens lagging more.
func TestLagRecorder(t *testing.T) {
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(0, 0)
	var now time.Time
	lags := &lagWindows{}
	rec := &lagRecorder{tps: 1000, r: r, out: lags, start: start, now: func() time.Time { return now }, callTurn: -1}
	delta := func(ms float64, text string) {
		now = start.Add(time.Duration(ms * float64(time.Millisecond)))
		rec.event(&protocol.TextDeltaEvent{Delta: text})
	}
	// Tokens 0..4: on time at 10, 11 ms; token 2 late by 3 ms; tokens 3
	// and 4 merged into one delta at 14 ms (token 3 then 1 ms late).
	// A step begins (in_progress, no step of its own) and pauses.
	rec.event(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventInProgress}})
	delta(10, " one")
	delta(11, " two")
	delta(15, " three")
	delta(14.5, " four five") // two tokens
	rec.event(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventDone}})
	h := lags.all()
	if h.n != 5 || rec.tokens != 5 || rec.frames != 4 || rec.steps != 1 {
		t.Fatalf("%d lags, %d tokens, %d frames, %d steps; want 5, 5, 4, 1", h.n, rec.tokens, rec.frames, rec.steps)
	}
	// Lags (ms): 0, 0, 3, 1.5, 0.5: the median 0.5 ms, the largest 3 ms.
	for _, c := range []struct{ q, want float64 }{{0.5, 500}, {1, 3000}, {0.2, 1}} {
		if got := h.quantile(c.q); got < c.want*0.99 || got > c.want*1.01+1 {
			t.Errorf("quantile %.1f: %.0f µs, want %.0f", c.q, got, c.want)
		}
	}
	rec.event(&protocol.ResponseEvent{}) // an empty step records nothing
	if lags.all().n != 5 {
		t.Error("an empty step recorded lags")
	}
	// A suspended rollout's step ends at the first of its pause's calls the
	// client runs, once however many there are; the next pause's calls
	// end the next step.
	rec.steps = 0
	delta(20, " six")
	rec.call(clienttools.Call{Turn: 0})
	rec.call(clienttools.Call{Turn: 0})
	delta(30, " seven")
	delta(31, " eight")
	rec.call(clienttools.Call{Turn: 1})
	if n := lags.all().n; n != 8 || rec.steps != 2 {
		t.Errorf("%d lags, %d steps after two pauses' calls; want 8, 2", n, rec.steps)
	}
}

// TestRunLoad runs two clients for a second against an in-process tether
// at 1000 tokens/s, then writes the files: rollouts done, tokens counted,
// lags measured, no errors, a sample a second.
func TestRunLoad(t *testing.T) {
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := runtime.NewServer(runtime.Options{Renderer: r,
		Models: map[string]runtime.Sampler{sampler.ScriptedModel: sampler.NewScripted(r, sampler.Timing{TPS: 1000})}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(t.Context())
	w, err := SyntheticWorkload(3, 1, 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunLoad(t.Context(), LoadConfig{Clients: 2, Mode: clienttools.ModeSuspend, Workload: w,
		Duration: 2 * time.Second, TPS: 1000, URL: hs.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rollouts < 2 || res.Tokens == 0 || res.Frames == 0 || len(res.Errors) != 0 {
		t.Fatalf("%d rollouts, %d tokens in %d frames, errors %v", res.Rollouts, res.Tokens, res.Frames, res.Errors)
	}
	if res.LagP99US <= 0 || res.LagP50US > res.LagP99US || len(res.Samples) == 0 || res.ClientCPU <= 0 {
		t.Fatalf("lag p50 %.0f p99 %.0f µs, %d samples, client CPU %.2f", res.LagP50US, res.LagP99US, len(res.Samples), res.ClientCPU)
	}
	run := NewLoadRun()
	run.Results = append(run.Results, res)
	dir := t.TempDir()
	if err := run.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"load.json", "load-lag.svg", "load-rss.svg", "load-goroutines.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRunPark parks 20 suspended rollouts of 2,000 tokens of context on an
// in-process tether and reads what they hold: every one parked on its own
// connection, the prompt the size asked for, goroutines counted, the heap
// read.
func TestRunPark(t *testing.T) {
	metrics := prommetrics.New() // RunPark reads go_goroutines off /metrics
	srv, err := runtime.NewServer(runtime.Options{Observer: metrics})
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("GET /metrics", metrics.Handler())
	profiling.Mount(srv)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(t.Context())
	res, err := RunPark(t.Context(), ParkConfig{Rollouts: 20, ContextTokens: 2000, URL: hs.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ContextTokens < 2000 || res.ContextTokens > 2200 {
		t.Errorf("%d tokens of context, want 2,000 and the request's own", res.ContextTokens)
	}
	// The heap is read, not compared: 20 small rollouts are a megabyte,
	// less than what the package's other tests free meanwhile.
	if res.ParkedGoroutines < res.BaselineGoroutines+20 || res.ParkedHeapMiB <= 0 || res.BaselineHeapMiB <= 0 {
		t.Errorf("goroutines %d -> %d, heap %.1f -> %.1f MiB", res.BaselineGoroutines, res.ParkedGoroutines, res.BaselineHeapMiB, res.ParkedHeapMiB)
	}
}

// TestFlushHoldsRead: a load run reads the server's flush holds off its
// /metrics (the counter's own line, not another's that begins alike), and
// 0 from a server that has none.
func TestFlushHoldsRead(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprint(w, "# TYPE tether_flush_holds_total counter\ntether_flush_holds_total_other 7\ntether_flush_holds_total 1234\n")
		}
	}))
	defer hs.Close()
	if n := flushHolds(t.Context(), &server{base: hs.URL + "/v1"}); n != 1234 {
		t.Errorf("read %v flush holds, want 1234", n)
	}
	none := httptest.NewServer(http.NotFoundHandler())
	defer none.Close()
	if n := flushHolds(t.Context(), &server{base: none.URL + "/v1"}); n != 0 {
		t.Errorf("read %v flush holds off a server without them, want 0", n)
	}
}
