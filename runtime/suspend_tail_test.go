package runtime_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/runtime"
)

// drainLost reads and discards whatever c receives until it fails: frames
// the server wrote and the client never got, as on a half-open connection.
func drainLost(c *wsConn) {
	go func() {
		for {
			if _, _, err := c.c.Read(context.Background()); err != nil {
				return
			}
		}
	}()
}

// TestSuspendedTailAfterHalfOpen: a rollout whose end went out on a
// connection that was dying keeps its tail for the resume window: a resume
// with the last sequence_number the client saw gets the rest of the stream
// and the terminal event, store false or not; other credentials get
// response_not_found; after the window, or once the client says
// response.processed, the tail is gone. Fake time, in-memory connections.
func TestSuspendedTailAfterHalfOpen(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newPipeHarness(t, runtime.Options{Suspension: runtime.SuspensionOptions{ResumeWindow: time.Minute}})
		start := func(lane string) (id string, seen [][]byte) {
			c1 := p.dial(t, "Bearer alice")
			c1.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": lane,
				"input": script([][]dcall{{{"read_file", `{"path":"a.go"}`}}})}))
			seen = c1.next(t)
			id = respID(t, last(seen))
			c1.send(t, appendEv(id, lane, outputsFor(t, last(seen))...))
			seen = append(seen, c1.recv(t)) // response.in_progress: the last frame the client gets
			if typ := eventType(t, last(seen)); typ != "response.in_progress" {
				t.Fatalf("after the append: %s", last(seen))
			}
			drainLost(c1) // the rest of the stream goes out and is lost
			return id, seen
		}
		id, seen := start("a")
		id2, _ := start("b")
		synctest.Wait()
		time.Sleep(700 * time.Millisecond)

		other := p.dial(t, "Bearer mallory")
		other.send(t, refEv("response.resume", id, "a"))
		other.wantError(t, "response_not_found")

		c2 := p.dial(t, "Bearer alice")
		c2.send(t, refEv("response.resume", id, "b"))
		c2.wantError(t, "stream_id_mismatch")
		resume := refEv("response.resume", id, "a")
		resume["sequence_number"] = *decodeEv(t, last(seen)).Seq
		c2.send(t, resume)
		rest := c2.untilTerminal(t)
		all := append(seen, rest...)
		checkStreamInvariants(t, all)
		if end := decodeEv(t, last(all)); end.Type != "response.completed" || end.Response.ID != id {
			t.Fatalf("resumed tail ended with %s", last(all))
		}
		// Without a sequence_number: the terminal event alone.
		c2.send(t, refEv("response.resume", id, "a"))
		if again := c2.recv(t); string(again) != string(last(all)) {
			t.Fatalf("resume without sequence_number sent %s, want the terminal event", again)
		}

		// response.processed lets a tail go.
		c2.send(t, map[string]any{"type": "response.processed", "response_id": id})
		c2.send(t, refEv("response.resume", id, "a"))
		c2.wantError(t, "response_not_found")

		// The other one lasts the resume window, no longer.
		c2.send(t, refEv("response.resume", id2, "b"))
		if end := decodeEv(t, c2.recv(t)); end.Type != "response.completed" {
			t.Fatalf("second tail: %+v", end)
		}
		time.Sleep(time.Minute)
		c2.send(t, refEv("response.resume", id2, "b"))
		c2.wantError(t, "response_not_found")
	})
}

// TestSuspendedResumeAfterAppend: a connection that drops right after an
// accepted append leaves no pause to replay: the client proved it saw the
// pause, so a resume that claims an earlier sequence_number gets what
// follows the append, never the answered pause again, and the rollout ends
// once.
func TestSuspendedResumeAfterAppend(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		opts := slowModel(t)
		opts.Suspension.ResumeWindow = time.Minute
		p := newPipeHarness(t, opts)
		steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"fox"}`}}}
		c1 := p.dial(t, "Bearer alice")
		c1.send(t, create(map[string]any{"model": "slow", "store": false, "suspend": true, "input": script(steps)}))
		events := c1.next(t)
		pause := last(events)
		id := respID(t, pause)
		c1.send(t, appendEv(id, "", outputsFor(t, pause)...))
		c1.drop()
		synctest.Wait()

		c2 := p.dial(t, "Bearer alice")
		resume := refEv("response.resume", id, "")
		resume["sequence_number"] = *decodeEv(t, pause).Seq - 1
		c2.send(t, resume)
		rest := c2.next(t)
		if e := decodeEv(t, rest[0]); e.Type != "response.in_progress" || *e.Seq != *decodeEv(t, pause).Seq+1 {
			t.Fatalf("resume after an accepted append began with %s, want the in_progress after the pause", rest[0])
		}
		events = append(events, rest...)
		c2.send(t, appendEv(id, "", outputsFor(t, last(events))...))
		events = append(events, c2.next(t)...)
		checkStreamInvariants(t, events)
		if end := decodeEv(t, last(events)); end.Type != "response.completed" {
			t.Fatalf("rollout ended with %s", last(events))
		}
	})
}

// TestSuspendedAppendThenClose: an append followed at once by a close never
// loses the rest of the stream, whichever wins the race, the rollout's end
// or the connection's: a resume from the pause's sequence_number gets every
// frame after it and the terminal event. Real sockets, 40 tries.
func TestSuspendedAppendThenClose(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		h := newHarnessOn(t, runtime.Options{Suspension: runtime.SuspensionOptions{ResumeWindow: time.Minute}}, w)
		auth := http.Header{"Authorization": {"Bearer alice"}}
		for range 40 {
			c1 := h.dial(t, auth)
			c1.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true,
				"input": script([][]dcall{{{"read_file", `{"path":"a.go"}`}}})}))
			events := c1.next(t)
			pause := last(events)
			id := respID(t, pause)
			c1.send(t, appendEv(id, "", outputsFor(t, pause)...))
			c1.drop()

			c2 := h.dial(t, auth)
			resume := refEv("response.resume", id, "")
			resume["sequence_number"] = *decodeEv(t, pause).Seq
			c2.send(t, resume)
			rest := c2.next(t)
			if e := decodeEv(t, rest[0]); e.Type == "response.done" {
				// The resume overtook the append, which the server read from
				// the first connection only after: it was refused there, and
				// the pause is pending again. The client appends again.
				c2.send(t, appendEv(id, "", outputsFor(t, pause)...))
				rest = c2.next(t)
			}
			events = append(events, rest...)
			checkStreamInvariants(t, events)
			if end := decodeEv(t, last(events)); end.Type != "response.completed" {
				t.Fatalf("rollout ended with %s", last(events))
			}
			c2.drop()
		}
	})
}
