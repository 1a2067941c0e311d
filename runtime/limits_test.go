package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// These tests cover a connection's limits: frame size, lanes, responses in
// flight, queued creates, connection age, and FIFO order within a lane. They
// use badinput_test.go's bi helpers.

// TestLimitLanes opens the default 32 named lanes; the 33rd is refused with
// websocket_stream_limit_reached, and every existing lane keeps working,
// cached responses included.
func TestLimitLanes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	c := h.dial(t, nil)
	ids := map[string]string{}
	for i := 1; i <= runtime.DefaultMaxLanes; i++ {
		lane := fmt.Sprintf("agent_%d", i)
		c.send(t, biCreate(lane, "", "hello from "+lane))
		ids[lane] = biCompleted(t, c, lane)
	}
	// The default lane does not count.
	c.send(t, biCreate("", "", "default"))
	biCompleted(t, c, "")

	c.send(t, biCreate("agent_33", "", "one too many"))
	biCheckWSError(t, biNext(t, c), biWant{400, "websocket_stream_limit_reached", "stream_id"}, "agent_33")
	// A fork into a 33rd lane is refused too, and evicts nothing.
	c.send(t, biCreate("agent_34", ids["agent_1"], "fork"))
	biCheckWSError(t, biNext(t, c), biWant{400, "websocket_stream_limit_reached", "stream_id"}, "agent_34")

	for _, lane := range []string{"agent_1", "agent_32"} {
		c.send(t, biCreate(lane, ids[lane], "still there?"))
		biCompleted(t, c, lane)
	}
}

// biSlow is a harness whose model "slow" is paced, so responses overlap.
func biSlow(t testing.TB, opts runtime.Options) *harness {
	t.Helper()
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	opts.Renderer = r
	opts.Models = map[string]runtime.Sampler{
		biModel: sampler.NewScripted(r, sampler.Timing{}),
		"slow":  sampler.NewScripted(r, sampler.Timing{TPS: 200}),
	}
	return newHarness(t, opts)
}

// biSlowText makes the scripted model answer with about 50 tokens: a quarter
// of a second at 200 tokens per second.
var biSlowText = strings.Repeat("lorem ipsum dolor sit amet ", 8)

func biSlowCreate(lane string) map[string]any {
	f := create(map[string]any{"model": "slow", "store": false, "input": biSlowText})
	if lane != "" {
		f["stream_id"] = lane
	}
	return f
}

// TestLimitInFlight runs 17 lanes at once. OpenAI runs at most 16 responses
// in flight on a connection and queues further creates: the 17th waits for a
// slot, then completes. The 16 are observable as response.created events not
// yet matched by a terminal event.
func TestLimitInFlight(t *testing.T) {
	t.Parallel()
	h := biSlow(t, runtime.Options{})
	c := h.dial(t, nil)
	const lanes = runtime.DefaultMaxInFlight + 1
	for i := range lanes {
		c.send(t, biSlowCreate(fmt.Sprintf("lane_%02d", i)))
	}
	running, most, done := 0, 0, 0
	started := map[string]bool{}
	for done < lanes {
		ev := biNext(t, c)
		switch ev.Type {
		case "response.created":
			if started[ev.StreamID] {
				t.Fatalf("second response on %s", ev.StreamID)
			}
			started[ev.StreamID] = true
			running++
			most = max(most, running)
			if running > runtime.DefaultMaxInFlight {
				t.Fatalf("%d responses in flight, want at most %d", running, runtime.DefaultMaxInFlight)
			}
		case "response.completed":
			running--
			done++
		case "error", "response.failed", "response.incomplete":
			t.Fatalf("lane %s: %s", ev.StreamID, ev.raw)
		}
	}
	if most != runtime.DefaultMaxInFlight {
		t.Errorf("at most %d responses ran at once, want %d (the 17th should have waited)", most, runtime.DefaultMaxInFlight)
	}
	if len(started) != lanes {
		t.Errorf("%d lanes got a response, want %d", len(started), lanes)
	}
	// The connection goes on.
	c.send(t, biCreate("lane_00", "", "next"))
	biCompleted(t, c, "lane_00")
}

// TestLimitQueued sets Limits.MaxQueued to 2: a third create while two are accepted
// and unfinished is refused with websocket_queue_full (429); the two complete
// and the connection goes on.
func TestLimitQueued(t *testing.T) {
	t.Parallel()
	h := biSlow(t, runtime.Options{Limits: runtime.Limits{MaxQueued: 2}})
	c := h.dial(t, nil)
	c.send(t, biSlowCreate("a"))
	c.send(t, biSlowCreate("a")) // queued behind the first, on the same lane
	c.send(t, biSlowCreate("b"))
	refused, completed := 0, 0
	for completed < 2 {
		ev := biNext(t, c)
		switch ev.Type {
		case "error":
			biCheckWSError(t, ev, biWant{429, "websocket_queue_full", ""}, "b")
			refused++
		case "response.completed":
			if ev.StreamID != "a" {
				t.Fatalf("completed on %q: %s", ev.StreamID, ev.raw)
			}
			completed++
		case "response.failed", "response.incomplete":
			t.Fatalf("%s", ev.raw)
		}
	}
	if refused != 1 {
		t.Fatalf("%d refusals, want 1", refused)
	}
	// Room again: both lanes accept creates.
	for _, lane := range []string{"b", "a"} {
		c.send(t, biCreate(lane, "", "room now?"))
		biCompleted(t, c, lane)
	}
}

// TestFIFOWithinLane sends two creates back to back on one lane: the second
// waits for the first to end (its response.created comes after the first's
// terminal event), their events do not interleave, and both complete. A
// second lane runs alongside.
func TestFIFOWithinLane(t *testing.T) {
	t.Parallel()
	for _, lane := range []string{"", "a"} {
		t.Run("lane="+lane, func(t *testing.T) {
			t.Parallel()
			h := biSlow(t, runtime.Options{})
			c := h.dial(t, nil)
			c.send(t, biSlowCreate(lane))
			c.send(t, biSlowCreate(lane))
			c.send(t, biSlowCreate("other"))
			var ids []string
			seq := 0
			otherStarted, otherDone := false, false
			for len(ids) < 2 {
				ev := biNext(t, c)
				if ev.StreamID == "other" && lane != "other" {
					switch ev.Type {
					case "response.created":
						otherStarted = true
					case "response.completed":
						otherDone = true
					}
					continue
				}
				if ev.StreamID != lane {
					t.Fatalf("event on stream %q: %s", ev.StreamID, ev.raw)
				}
				if ev.Seq == nil || *ev.Seq != seq {
					t.Fatalf("response %d: sequence_number %v, want %d (interleaved?): %s", len(ids)+1, ev.Seq, seq, ev.raw)
				}
				seq++
				switch ev.Type {
				case "response.created":
					if seq != 1 {
						t.Fatalf("response.created mid-stream: %s", ev.raw)
					}
				case "response.completed":
					ids = append(ids, ev.Response.ID)
					seq = 0
				case "error", "response.failed", "response.incomplete":
					t.Fatalf("%s", ev.raw)
				}
				if len(ids) == 1 && seq == 0 && !otherStarted {
					t.Errorf("lane %q finished a response before lane \"other\" started: lanes did not run concurrently", lane)
				}
			}
			if ids[0] == ids[1] {
				t.Fatalf("same response twice: %s", ids[0])
			}
			if !otherDone {
				evs := biTurn(t, c)
				if last := evs[len(evs)-1]; last.Type != "response.completed" || last.StreamID != "other" {
					t.Fatalf("lane other ended with %s", last.raw)
				}
			}
		})
	}
}

// TestFrameTooBig sends a frame over Limits.MaxFrame: the server closes with 1009
// (message too big) and a reason.
func TestFrameTooBig(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Limits: runtime.Limits{MaxFrame: 1 << 16}})

	t.Run("under the limit", func(t *testing.T) {
		t.Parallel()
		c := h.dial(t, nil)
		c.send(t, biCreate("", "", strings.Repeat("x", 60<<10)))
		biCompleted(t, c, "")
	})
	t.Run("over the limit", func(t *testing.T) {
		t.Parallel()
		c := h.dial(t, nil)
		c.send(t, biCreate("", "", "hi"))
		biCompleted(t, c, "")
		big, _ := json.Marshal(biCreate("", "", strings.Repeat("x", 1<<17)))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The write may fail: the server stops reading at the limit and
		// closes, possibly before the client has sent the rest.
		c.c.Write(ctx, websocket.MessageText, big)
		_, b, err := c.c.Read(ctx)
		if err == nil {
			t.Fatalf("read %s, want the connection closed", b)
		}
		if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
			t.Fatalf("close status %v (%v), want %v", got, err, websocket.StatusMessageTooBig)
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Reason == "" {
			t.Fatalf("close without a reason: %v", err)
		}
	})
	t.Run("HTTP body over the limit", func(t *testing.T) {
		t.Parallel()
		status, raw := h.post(t, "/responses", biWith("", "", map[string]any{"type": nil, "input": strings.Repeat("x", 1<<17)}))
		biCheckHTTPError(t, status, raw, biWant{413, "request_too_large", ""})
		// The server goes on.
		if status, raw := h.post(t, "/responses", map[string]any{"model": biModel, "input": "hi"}); status != 200 {
			t.Fatalf("status %d: %s", status, raw)
		}
	})
}

// TestFrameTooBigStreamed streams a 64 MiB frame against a 64 KiB limit. The
// server must refuse it without reading it whole: it closes the connection
// after about 64 KiB, so the client's write fails long before the end.
func TestFrameTooBigStreamed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Limits: runtime.Limits{MaxFrame: 1 << 16}})
	c := h.dial(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := c.c.Writer(ctx, websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	const total = 64 << 20
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	written := 0
	var werr error
	for written < total {
		var n int
		n, werr = w.Write(chunk)
		written += n
		if werr != nil {
			break
		}
	}
	if werr == nil {
		werr = w.Close()
	}
	if werr == nil {
		t.Fatalf("wrote all %d bytes of a frame over the %d-byte limit: the server read it whole", total, 1<<16)
	}
	if written >= total {
		t.Fatalf("the write failed only after all %d bytes: %v", written, werr)
	}
	t.Logf("write failed after %d of %d bytes: %v", written, total, werr)
}

// biClock is a fake clock that tests advance.
type biClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *biClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *biClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestAgeLimit advances a fake clock past Timeouts.WSMaxAge: the next create gets
// websocket_connection_limit_reached (400) and is not run; a new connection
// works. The clock's jumps would make a frame the writer has not quite
// finished with look an hour old: the slow-client bound is set past them.
func TestAgeLimit(t *testing.T) {
	t.Parallel()
	clock := &biClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	h := newHarness(t, runtime.Options{Now: clock.Now, Timeouts: runtime.Timeouts{WSMaxAge: time.Hour, SlowClient: 24 * time.Hour}})
	c := h.dial(t, nil)
	c.send(t, biCreate("", "", "hi"))
	prev := biCompleted(t, c, "")

	clock.Advance(59 * time.Minute)
	c.send(t, biCreate("", prev, "still young"))
	prev = biCompleted(t, c, "")

	clock.Advance(time.Minute)
	for _, lane := range []string{"", "late"} {
		c.send(t, biCreate(lane, prev, "too old"))
		biCheckWSError(t, biNext(t, c), biWant{400, "websocket_connection_limit_reached", ""}, lane)
	}

	// A new connection starts a new hour.
	c2 := h.dial(t, nil)
	c2.send(t, biCreate("", "", "hello again"))
	biCompleted(t, c2, "")
}

// TestLimitSettledBeforeTerminal acts on each terminal event at once: with
// room for one create, the next create is accepted, and a store: false fork
// from another lane finds the response just completed. The connection's
// state must be settled before the terminal event goes out.
func TestLimitSettledBeforeTerminal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Limits: runtime.Limits{MaxQueued: 1}})
	c := h.dial(t, nil)
	for range 300 {
		c.send(t, biCreate("a", "", "x"))
		id := biCompleted(t, c, "a")
		c.send(t, biCreate("b", id, "fork"))
		biCompleted(t, c, "b")
	}
}
