package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// soakCounts are what a soak did, summed over its workers.
type soakCounts struct {
	completed, cancelled, resumes, halfOpen, dupAppends, garbage, replayedPauses atomic.Int64
}

// TestFaultSoak drives suspended rollouts over real sockets while it breaks
// their connections at random: dropped (mid-stream and right after an
// append), abandoned half-open (still open, never read again), with
// duplicate appends, cancels and garbage frames. Each client keeps only
// the frames it has not seen (by sequence_number) and resumes from the
// last one. Every rollout must end exactly once: its frames number from 0
// without a gap or a repeat across connections, a completed one holds
// every step, and nothing is lost, including rollouts that ended while
// their connection was dying. Afterwards no server goroutine remains and
// the live heap has not grown, and the memory budget, which counted what
// the rollouts and connections held, holds nothing. TETHER_SOAK=60s runs it longer (2s by
// default); TETHER_SOAK_HEAP=FILE writes the heap profile at its end.
func TestFaultSoak(t *testing.T) {
	for _, c := range []struct {
		name string
		w    wire
	}{
		{"ws", wire{enc: testEncoding}},
		{"wss", wire{enc: testEncoding, tls: true}},
		{"wss-writers", wire{enc: testEncoding, tls: true, tlsWriters: true}},
	} {
		t.Run(c.name, func(t *testing.T) { faultSoak(t, c.w) })
	}
}

func faultSoak(t *testing.T, w wire) {
	d := 2 * time.Second
	if s := os.Getenv("TETHER_SOAK"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("TETHER_SOAK: %v", err)
		}
	}
	// The model's prefix cache kept small: it grows to its bound by design,
	// which is not the growth this looks for.
	scripted := sampler.NewScripted(renderer(t), sampler.Timing{})
	scripted.Cache().Configure(sampler.PrefixCacheOptions{MaxTokens: 1 << 16, MaxConversations: 16})
	h := newHarnessOn(t, runtime.Options{
		Renderer:   renderer(t),
		Models:     map[string]runtime.Sampler{"tether-scripted": scripted},
		Timeouts:   runtime.Timeouts{Write: time.Second},
		Suspension: runtime.SuspensionOptions{ResumeWindow: time.Minute},
		// A budget the soak never fills: what it counts must all come back.
		Limits: runtime.Limits{MaxMemory: 1 << 30},
	}, w)
	baseGoroutines := runtimeGoroutines()
	baseHeap := liveHeap()

	var counts soakCounts
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			auth := http.Header{"Authorization": {fmt.Sprintf("Bearer worker-%d", w)}}
			for n := 0; time.Now().Before(deadline) && !t.Failed(); n++ {
				soakRollout(t, h, auth, rng, &counts)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d completed, %d cancelled; %d resumes (%d from half-open connections), %d duplicate appends, %d garbage frames, %d pauses replayed",
		counts.completed.Load(), counts.cancelled.Load(), counts.resumes.Load(), counts.halfOpen.Load(),
		counts.dupAppends.Load(), counts.garbage.Load(), counts.replayedPauses.Load())
	if counts.completed.Load() == 0 || counts.resumes.Load() == 0 {
		t.Fatal("the soak completed nothing or resumed nothing")
	}

	// The server lets go of every connection and rollout.
	for end := time.Now().Add(10 * time.Second); runtimeGoroutines() > baseGoroutines; {
		if time.Now().After(end) {
			t.Fatalf("%d server goroutines left, %d before the soak", runtimeGoroutines(), baseGoroutines)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if held := h.srv.MemoryHeld(); held != 0 {
		t.Errorf("the memory budget holds %d bytes once every connection and rollout is gone", held)
	}
	if f := os.Getenv("TETHER_SOAK_HEAP"); f != "" {
		w, _ := os.Create(f)
		liveHeap()
		pprof.Lookup("heap").WriteTo(w, 0)
		w.Close()
	}
	if grown := int64(liveHeap()) - int64(baseHeap); grown > 16*mib {
		t.Errorf("the live heap grew by %.1f MiB over the soak", float64(grown)/mib)
	}
}

// soakDial opens a WebSocket that the soak closes itself (harness.dial
// keeps every connection for the test's cleanup, which would read as
// growth).
func soakDial(t *testing.T, h *harness, auth http.Header) *wsConn {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, h.ws, testDialOptions(&websocket.DialOptions{HTTPHeader: auth, HTTPClient: h.client}))
	if err != nil {
		t.Fatal(err)
	}
	return &wsConn{c: c}
}

// runtimeGoroutines counts the goroutines running code of package runtime.
func runtimeGoroutines() int {
	var all bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&all, 2)
	n := 0
	for _, g := range strings.Split(all.String(), "\n\n") {
		if strings.Contains(g, "tether/runtime.") && !strings.Contains(g, "runtime_test.") {
			n++
		}
	}
	return n
}

// soakRollout runs one suspended rollout of three steps to its end,
// breaking its connection at random, and checks what its client got.
func soakRollout(t *testing.T, h *harness, auth http.Header, rng *rand.Rand, counts *soakCounts) {
	steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"x"}`}, {"list_dir", `{}`}}, {{"run_tests", `{}`}}}
	c := soakDial(t, h, auth)
	defer func() { c.c.CloseNow() }()
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script(steps)}))
	var (
		id       string
		events   [][]byte // every frame, once, in sequence order
		lastSeq  = -1
		appended []any // the outputs sent for the current pause
		wantEnd  = "response.completed"
		// extra counts the appends sent again (duplicates, and answers to
		// a pause replayed) not yet refused. One may reach the rollout
		// after its last step has ended it: no suspended response is
		// there to take it (response_not_found), and the end follows.
		extra int
	)
	resume := func(halfOpen bool) {
		old := c
		if halfOpen {
			counts.halfOpen.Add(1)
			later := time.Duration(rng.IntN(200)) * time.Millisecond
			go func() { // still open, never read: closed a little later, as a dead peer's would time out
				time.Sleep(later)
				old.c.CloseNow()
			}()
		} else {
			old.c.CloseNow()
		}
		counts.resumes.Add(1)
		c = soakDial(t, h, auth)
		r := refEv("response.resume", id, "")
		r["sequence_number"] = lastSeq
		c.send(t, r)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		typ, b, err := c.c.Read(ctx)
		cancel()
		if err != nil {
			t.Errorf("rollout %s after sequence_number %d: %v (lost)", id, lastSeq, err)
			return
		}
		b = c.frame(t, typ, b)
		e := decodeEv(t, b)
		if e.Type == "error" {
			switch code := e.Error.Code; {
			case code == "invalid_json":
				continue // the garbage frame's answer
			case code == "duplicate_tool_output", code == "response_not_suspended", code == "tool_call_not_found",
				code == "response_not_found" && extra > 0:
				extra = max(extra-1, 0) // an append sent again, refused
				continue
			}
			t.Errorf("rollout %s: error %s", id, b)
			return
		}
		seq := *e.Seq
		if seq <= lastSeq {
			// Only a pause may come again, on a resume, while it waits: the
			// append sent for it was not taken. The client sends it again.
			if e.Type != "response.done" || appended == nil {
				t.Errorf("rollout %s: %s with sequence_number %d again (after %d)", id, e.Type, seq, lastSeq)
				return
			}
			counts.replayedPauses.Add(1)
			extra++
			c.send(t, appendEv(id, "", appended...))
			continue
		}
		if seq != lastSeq+1 {
			t.Errorf("rollout %s: sequence_number %d after %d: frames lost", id, seq, lastSeq)
			return
		}
		events, lastSeq = append(events, b), seq
		if id == "" {
			id = respID(t, b)
		}
		switch {
		case isEnd(e.Type):
			if e.Type != wantEnd && !(wantEnd == "response.cancelled" && e.Type == "response.completed") {
				t.Errorf("rollout %s ended with %s, want %s", id, e.Type, wantEnd)
				return
			}
			if e.Type == "response.completed" {
				checkStreamInvariants(t, events)
				if n := len(e.Response.Output); n != 5 {
					t.Errorf("rollout %s completed with %d output items, want 5", id, n)
				}
				counts.completed.Add(1)
			} else {
				checkSeq(t, events)
				counts.cancelled.Add(1)
			}
			c.send(t, map[string]any{"type": "response.processed", "response_id": id})
			c.c.Close(websocket.StatusNormalClosure, "")
			return
		case e.Type == "response.done":
			if rng.IntN(10) == 0 {
				counts.garbage.Add(1)
				c.send(t, []byte(`{"type":"response.append","input":[`))
			}
			if rng.IntN(20) == 0 && wantEnd != "response.cancelled" {
				wantEnd = "response.cancelled"
				c.send(t, refEv("response.cancel", id, ""))
				continue
			}
			appended = outputsFor(t, b)
			c.send(t, appendEv(id, "", appended...))
			if rng.IntN(7) == 0 {
				counts.dupAppends.Add(1)
				extra++
				c.send(t, appendEv(id, "", appended...))
			}
			switch rng.IntN(10) {
			case 0:
				resume(false) // dropped right after the append
			case 1:
				resume(true)
			}
		case rng.IntN(60) == 0:
			resume(rng.IntN(2) == 0) // mid-stream
		}
	}
}
