package runtime_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/sampler"
)

// closedWith reads c to its end and returns the close status it got.
func closedWith(t *testing.T, c *wsConn) websocket.StatusCode {
	t.Helper()
	for {
		_, b, err := c.c.Read(context.Background())
		if err != nil {
			return websocket.CloseStatus(err)
		}
		t.Fatalf("a frame after the last one: %s", b)
	}
}

// TestShutdownTellsEveryone: Shutdown with a response that finishes within
// the drain, one that does not, one queued behind it, a parked rollout and
// a detached one. During the drain new work is refused; the first response
// completes; the others fail with server_shutting_down (the queued one gets
// the error event), each client on a connection then gets close status
// 1001; Shutdown returns within the drain budget with no goroutine left.
// Fake time, in-memory connections.
func TestShutdownTellsEveryone(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		opts := slowModel(t) // "slow": 50 tokens a second
		opts.Models["slower"] = sampler.NewScripted(opts.Renderer, sampler.Timing{TPS: 5})
		opts.Timeouts.Drain = 3 * time.Second
		opts.Suspension.ResumeWindow = time.Minute
		p := newPipeHarness(t, opts)
		const short = "Say: done soon."

		quick := p.dial(t, "Bearer a")
		quick.send(t, create(map[string]any{"model": "slow", "store": false, "input": short}))
		slow := p.dial(t, "Bearer a")
		slow.send(t, create(map[string]any{"model": "slower", "store": false, "input": longText})) // 10 s
		slow.send(t, create(map[string]any{"model": "slow", "store": false, "input": short}))      // queued behind it
		parked := p.dial(t, "Bearer a")
		parked.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script([][]dcall{{{"read_file", `{}`}}})}))
		if typ := eventType(t, last(parked.next(t))); typ != "response.done" {
			t.Fatalf("parked rollout: %s", typ)
		}
		detached := p.dial(t, "Bearer b")
		detached.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script([][]dcall{{{"read_file", `{}`}}})}))
		detached.next(t)
		detached.c.CloseNow()
		synctest.Wait()

		start := time.Now()
		shut := make(chan error, 1)
		go func() { shut <- p.srv.Shutdown(context.Background()) }()
		synctest.Wait()

		// Draining: no new response, no new connection.
		parked.send(t, create(map[string]any{"model": "slow", "store": false, "stream_id": "other", "input": short}))
		parked.wantError(t, "server_shutting_down")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, resp, err := websocket.Dial(ctx, "ws://tether.test/v1/responses", &websocket.DialOptions{HTTPClient: p.client}); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("a new connection during the drain: %v", err)
		}

		if end := decodeEv(t, last(quick.untilTerminal(t))); end.Type != "response.completed" {
			t.Fatalf("a response that fits the drain ended with %+v", end)
		}
		failed := func(c *wsConn, what string) {
			t.Helper()
			evs := c.untilTerminal(t)
			if e := decodeEv(t, last(evs)); e.Type != "response.failed" || !strings.Contains(string(last(evs)), `"code":"server_shutting_down"`) {
				t.Fatalf("%s ended with %s", what, last(evs))
			}
		}
		failed(slow, "a response longer than the drain")
		slow.wantError(t, "server_shutting_down")
		failed(parked, "a parked rollout")
		for name, c := range map[string]*wsConn{"quick": quick, "slow": slow, "parked": parked} {
			if st := closedWith(t, c); st != websocket.StatusGoingAway {
				t.Errorf("%s: close status %d, want 1001", name, st)
			}
		}
		if err := <-shut; err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > opts.Timeouts.Drain+time.Second {
			t.Errorf("Shutdown took %s, drain %s", took, opts.Timeouts.Drain)
		}
		synctest.Wait()
		if g := serverGoroutines(t); len(g) != 0 {
			t.Fatalf("%d goroutines left:\n%s", len(g), strings.Join(g, "\n\n"))
		}
	})
}

// TestShutdownStuckWriter: a client that reads nothing does not hold
// Shutdown past its budget: the drain, then the stalled write cut after
// Timeouts.Write, then the close handshake's own bound. Fake time.
func TestShutdownStuckWriter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		opts := slowModel(t)
		opts.Timeouts.Drain, opts.Timeouts.Write = 2*time.Second, 3*time.Second
		p := newPipeHarness(t, opts)
		c := p.dial(t, "Bearer a")
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": longText}))
		c.recv(t) // response.created; then the client reads nothing, ever
		synctest.Wait()
		start := time.Now()
		if err := p.srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		// coder/websocket waits 5 s for the client's close frame.
		if took, budget := time.Since(start), opts.Timeouts.Drain+opts.Timeouts.Write+5*time.Second+time.Second; took > budget {
			t.Fatalf("Shutdown took %s with a stuck writer, budget %s", took, budget)
		}
		synctest.Wait()
		if g := serverGoroutines(t); len(g) != 0 {
			t.Fatalf("%d goroutines left:\n%s", len(g), strings.Join(g, "\n\n"))
		}
	})
}
