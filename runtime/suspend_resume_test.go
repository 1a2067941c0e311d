package runtime_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/sampler"

	"github.com/tether-run/tether/runtime"
)

// TestSuspendedResume: a rollout parked when its connection drops waits for
// the resume window; the same credentials on a new connection get the
// pending response.done again and finish the same response; others get
// response_not_found. Fake time, in-memory connections.
func TestSuspendedResume(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ended := &endings{}
		p := newPipeHarness(t, runtime.Options{Observer: ended, Suspension: runtime.SuspensionOptions{ResumeWindow: time.Minute, Timeout: 10 * time.Minute}})
		steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"x"}`}, {"list_dir", `{}`}}, {{"run_tests", `{}`}}}
		c1 := p.dial(t, "Bearer alice")
		c1.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "work", "input": script(steps)}))
		events := c1.next(t)
		id := respID(t, last(events))
		c1.send(t, appendEv(id, "work", outputsFor(t, last(events))...))
		events = append(events, c1.next(t)...)
		pause := last(events)
		if eventType(t, pause) != "response.done" {
			t.Fatalf("second step: %s", pause)
		}

		// The connection drops while the rollout is parked: the rollout
		// lives on, a value, with no goroutine of its own.
		c1.drop()
		synctest.Wait()
		if ended.count() != 0 {
			t.Fatal("the parked rollout did not outlive its connection")
		}
		if gs := serverGoroutines(t); len(gs) > 0 {
			t.Fatalf("a parked rollout, its connection gone, holds %d goroutines of the server's:\n%s", len(gs), strings.Join(gs, "\n\n"))
		}
		time.Sleep(50 * time.Second)

		// Other credentials cannot resume it, nor can no credentials.
		for _, auth := range []string{"Bearer mallory", ""} {
			other := p.dial(t, auth)
			other.send(t, refEv("response.resume", id, "work"))
			other.wantError(t, "response_not_found")
			other.send(t, appendEv(id, "work", outputsFor(t, pause)...))
			other.wantError(t, "response_not_found")
			other.drop()
		}

		// The same credentials, on the wrong lane, then the right one.
		c2 := p.dial(t, "Bearer alice")
		c2.send(t, refEv("response.resume", id, ""))
		c2.wantError(t, "stream_id_mismatch")
		c2.send(t, refEv("response.resume", id, "work"))
		again := c2.recv(t)
		if !bytes.Equal(again, pause) {
			t.Fatalf("resume sent\n%s\nwant the pending pause\n%s", again, pause)
		}
		// The window is over for this rollout: it is attached again.
		time.Sleep(2 * time.Minute)
		c2.send(t, appendEv(id, "work", outputsFor(t, pause)...))
		events = append(events, c2.next(t)...)
		c2.send(t, appendEv(id, "work", outputsFor(t, last(events))...))
		events = append(events, c2.next(t)...)
		checkStreamInvariants(t, events)
		end := decodeEv(t, last(events))
		if end.Response.ID != id || len(end.Response.Output) != 5 {
			t.Fatalf("resumed rollout ended with %s", last(events))
		}
		// Settled on the new connection: a resume reads its end back (its
		// tail, kept for the resume window), and its lane continues from it.
		c2.send(t, refEv("response.resume", id, "work"))
		if again := c2.recv(t); !bytes.Equal(again, last(events)) {
			t.Fatalf("resume of a settled rollout sent %s, want its terminal event", again)
		}
		c2.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "work", "previous_response_id": id, "input": "thanks"}))
		if evs := c2.next(t); eventType(t, last(evs)) != "response.completed" {
			t.Fatalf("continuation: %s", last(evs))
		}
	})
}

// TestSuspendedResumeMidStream: a connection that drops while a resumed
// step streams leaves the rollout running; it parks, and the resume sends
// what the client missed, then the pause, in order.
func TestSuspendedResumeMidStream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		opts := slowModel(t)
		opts.Suspension.ResumeWindow = time.Minute
		p := newPipeHarness(t, opts)
		steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"` + strings.Repeat("fox|dog|", 25) + `"}`}}}
		c1 := p.dial(t, "Bearer alice")
		c1.send(t, create(map[string]any{"model": "slow", "store": false, "suspend": true, "input": script(steps)}))
		events := c1.next(t)
		id := respID(t, last(events))
		c1.send(t, appendEv(id, "", outputsFor(t, last(events))...))
		for !isDelta(decodeEv(t, last(events))) {
			events = append(events, c1.recv(t))
		}
		c1.drop()
		time.Sleep(10 * time.Second) // the step streams to its pause, detached

		c2 := p.dial(t, "Bearer alice")
		resume := refEv("response.resume", id, "")
		resume["sequence_number"] = *decodeEv(t, last(events)).Seq
		c2.send(t, resume)
		events = append(events, c2.next(t)...)
		pause := last(events)
		if eventType(t, pause) != "response.done" {
			t.Fatalf("resume gave %s", pause)
		}
		c2.send(t, appendEv(id, "", outputsFor(t, pause)...))
		events = append(events, c2.next(t)...)
		checkStreamInvariants(t, events)
	})
}

// TestSuspendedResumeWindowExpires: nobody resumes in time: the rollout ends
// and none of its goroutines remain, with no connection open; a late resume
// finds nothing.
func TestSuspendedResumeWindowExpires(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ended := &endings{}
		p := newPipeHarness(t, runtime.Options{Observer: ended, Suspension: runtime.SuspensionOptions{ResumeWindow: time.Minute, Timeout: time.Hour}})
		c1 := p.dial(t, "Bearer alice")
		steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}, {"grep", `{}`}}, {{"list_dir", `{}`}}}
		c1.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script(steps)}))
		events := c1.next(t)
		id := respID(t, last(events))
		c1.drop()
		synctest.Wait()
		if ended.count() != 0 {
			t.Fatal("the parked rollout did not outlive its connection")
		}
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		if ended.count() != 0 {
			t.Fatal("the rollout ended before its resume window")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if ended.count() != 1 {
			t.Fatal("the rollout did not end with its resume window")
		}
		if gs := serverGoroutines(t); len(gs) > 0 {
			t.Fatalf("%d server goroutines remain after the resume window:\n%s", len(gs), strings.Join(gs, "\n\n"))
		}
		c2 := p.dial(t, "Bearer alice")
		c2.send(t, refEv("response.resume", id, ""))
		c2.wantError(t, "response_not_found")
	})
}

// TestSuspendedResumeAfterStall: the client stops reading while a step
// streams, then its connection drops, losing the frames the server had queued
// for it. Resuming with the sequence_number of the last event it received,
// the client gets every event after it: the stream has no gap.
func TestSuspendedResumeAfterStall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		opts := slowModel(t)
		opts.Suspension.ResumeWindow = time.Minute
		p := newPipeHarness(t, opts)
		steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"` + strings.Repeat("fox|dog|", 25) + `"}`}}}
		c1 := p.dial(t, "Bearer alice")
		c1.send(t, create(map[string]any{"model": "slow", "store": false, "suspend": true, "input": script(steps)}))
		events := c1.next(t)
		id := respID(t, last(events))
		c1.send(t, appendEv(id, "", outputsFor(t, last(events))...))
		for !isDelta(decodeEv(t, last(events))) {
			events = append(events, c1.recv(t))
		}
		time.Sleep(200 * time.Millisecond) // not reading: the server queues frames
		c1.drop()
		time.Sleep(10 * time.Second)
		c2 := p.dial(t, "Bearer alice")
		resume := refEv("response.resume", id, "")
		resume["sequence_number"] = *decodeEv(t, last(events)).Seq
		c2.send(t, resume)
		events = append(events, c2.next(t)...)
		c2.send(t, appendEv(id, "", outputsFor(t, last(events))...))
		events = append(events, c2.next(t)...)
		checkStreamInvariants(t, events)
	})
}

// TestSuspendedResumeTakesSlot: a resumed rollout is in flight on its new
// connection and counts against Limits.MaxInFlight as a created one does: with one
// slot, a create on another lane waits until the resumed rollout has ended.
func TestSuspendedResumeTakesSlot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newPipeHarness(t, runtime.Options{Limits: runtime.Limits{MaxInFlight: 1}})
		steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"x"}`}}}
		c1 := p.dial(t, "Bearer alice")
		c1.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script(steps)}))
		pause := last(c1.next(t))
		id := respID(t, pause)
		c1.drop()
		synctest.Wait()

		c2 := p.dial(t, "Bearer alice")
		c2.send(t, refEv("response.resume", id, ""))
		if again := c2.recv(t); !bytes.Equal(again, pause) {
			t.Fatalf("resume sent %s", again)
		}
		c2.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "x", "input": "hello"}))
		synctest.Wait()
		// The create must not start while the resumed rollout holds the slot.
		c2.send(t, appendEv(id, "", outputsFor(t, pause)...))
		ended := false
		for done := false; !done; {
			b := c2.recv(t)
			e := decodeEv(t, b)
			switch {
			case e.StreamID == "x" && !ended:
				t.Fatalf("the create ran while the resumed rollout was in flight (Limits.MaxInFlight 1): %s", b)
			case e.StreamID == "x":
				done = isEnd(e.Type)
			case e.Type == "response.done":
				c2.send(t, appendEv(id, "", outputsFor(t, b)...))
			case isEnd(e.Type):
				ended = true
			}
		}
	})
}

// detachedFloodSampler streams one delta, waits for gate, then streams more
// than a detached rollout may keep for resume.
type detachedFloodSampler struct{ gate chan struct{} }

func (s detachedFloodSampler) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	emit(sampler.Delta{Kind: sampler.TextStart})
	emit(sampler.Delta{Kind: sampler.TextDelta, Text: "start"})
	select {
	case <-s.gate:
	case <-ctx.Done():
		return sampler.Result{}, ctx.Err()
	}
	chunk := strings.Repeat("x", 64<<10)
	for i := 0; i < 160 && ctx.Err() == nil; i++ { // 10 MiB
		emit(sampler.Delta{Kind: sampler.TextDelta, Text: chunk})
	}
	if ctx.Err() != nil {
		return sampler.Result{}, ctx.Err()
	}
	emit(sampler.Delta{Kind: sampler.PartEnd})
	return sampler.Result{OutputTokens: 161}, nil
}

// TestSuspendedDetachedOverflow: a suspended rollout that streams more while
// detached than a resume can replay is cancelled; the resuming client gets
// every logged event after its last one, then an error event, instead of
// waiting forever for an end. Fake time, in-memory connections.
func TestSuspendedDetachedOverflow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		p := newPipeHarness(t, runtime.Options{
			Models:     map[string]runtime.Sampler{"flood": detachedFloodSampler{gate: gate}},
			Suspension: runtime.SuspensionOptions{ResumeWindow: time.Minute},
		})
		c1 := p.dial(t, "Bearer alice")
		c1.send(t, create(map[string]any{"model": "flood", "store": false, "suspend": true, "input": "go"}))
		var events [][]byte
		for len(events) == 0 || !isDelta(decodeEv(t, last(events))) {
			events = append(events, c1.recv(t))
		}
		id := respID(t, events[0])
		seen := *decodeEv(t, last(events)).Seq
		c1.c.CloseNow()
		synctest.Wait() // the server noticed: the rollout is detached
		close(gate)
		synctest.Wait() // it overflowed its replay log and ended

		c2 := p.dial(t, "Bearer alice")
		resume := refEv("response.resume", id, "")
		resume["sequence_number"] = seen
		c2.send(t, resume)
		next := seen + 1
		for {
			b := recvWithin(t, c2, time.Minute)
			e := decodeEv(t, b)
			if e.Type == "error" {
				if e.Error == nil || e.Error.Code != "server_error" {
					t.Fatalf("ended with %s", b)
				}
				break
			}
			if e.Seq == nil || *e.Seq != next {
				t.Fatalf("replayed %s with sequence_number %v, want %d", e.Type, e.Seq, next)
			}
			if isEnd(e.Type) {
				t.Fatalf("an overflowing detached rollout ended with %s", e.Type)
			}
			next++
		}
		if next <= seen+100 {
			t.Fatalf("replayed only %d events", next-seen-1)
		}
	})
}

// TestParkedLaneHoldsNoGoroutine: while a suspended rollout is parked on an
// open connection, the lane that follows it holds no goroutine (its job
// goes on once the rollout ends); the append that brings the outputs
// drives the rollout to its end, whose terminal frame the lane sends, and
// the lane takes its next job after it.
func TestParkedLaneHoldsNoGoroutine(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newPipeHarness(t, runtime.Options{})
		c := p.dial(t, "Bearer alice")
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "work",
			"input": script([][]dcall{{{"read_file", `{"path":"a.go"}`}}})}))
		events := c.next(t)
		pause := last(events)
		if eventType(t, pause) != "response.done" {
			t.Fatalf("first step ended with %s", pause)
		}
		synctest.Wait()
		for _, g := range serverGoroutines(t) {
			if strings.Contains(g, "laneWorker") || strings.Contains(g, "runJob") {
				t.Fatalf("a parked rollout's lane holds a goroutine:\n%s", g)
			}
		}
		c.send(t, appendEv(respID(t, pause), "work", outputsFor(t, pause)...))
		events = append(events, c.next(t)...)
		if eventType(t, last(events)) != "response.completed" {
			t.Fatalf("the rollout ended with %s", last(events))
		}
		checkStreamInvariants(t, events)
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "work", "input": "hello"}))
		if end := last(c.next(t)); eventType(t, end) != "response.completed" {
			t.Fatalf("the lane's next job ended with %s", end)
		}
	})
}
