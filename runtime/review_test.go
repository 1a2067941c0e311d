package runtime_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// This file holds regression tests for bugs found in review.

// reviewPanicSampler streams the start of a message, then panics: a backend bug.
type reviewPanicSampler struct{}

func (reviewPanicSampler) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	emit(sampler.Delta{Kind: sampler.TextStart})
	emit(sampler.Delta{Kind: sampler.TextDelta, Text: "Hello"})
	panic("sampler bug")
}

// TestReviewSamplerPanic: a sampler that panics ends the response with an
// error event, in both designs, and the lane serves on. A suspended rollout
// used to leave the client waiting for an end that never came.
func TestReviewSamplerPanic(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	h := newHarness(t, runtime.Options{Renderer: r, Models: map[string]runtime.Sampler{
		"panics":          reviewPanicSampler{},
		"tether-scripted": sampler.NewScripted(r, sampler.Pacing{}),
	}})
	for _, suspend := range []bool{false, true} {
		t.Run(fmt.Sprintf("suspend=%v", suspend), func(t *testing.T) {
			t.Parallel()
			c := h.dial(t, nil)
			c.send(t, create(map[string]any{"model": "panics", "store": false, "suspend": suspend, "stream_id": "a", "input": "hi"}))
			var events [][]byte
			for len(events) == 0 || eventType(t, last(events)) != "error" {
				b := recvWithin(t, c, 10*time.Second)
				if isEnd(eventType(t, b)) || eventType(t, b) == "response.done" {
					t.Fatalf("a panicking sampler ended the response with %s", b)
				}
				events = append(events, b)
			}
			if e := decodeEv(t, last(events)); e.Error == nil || e.Error.Code != "server_error" || e.StreamID != "a" {
				t.Fatalf("want a server_error on lane a, got %s", last(events))
			}
			c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": suspend, "stream_id": "a", "input": "hello"}))
			if evs := c.next(t); eventType(t, last(evs)) != "response.completed" {
				t.Fatalf("next create on the lane: %s", last(evs))
			}
		})
	}
}

// reviewFloodSampler streams one delta, waits for gate, then streams more than a
// detached rollout may keep for resume.
type reviewFloodSampler struct{ gate chan struct{} }

func (s reviewFloodSampler) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
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

// TestReviewDetachedOverflow: a suspended rollout that streams more while
// detached than a resume can replay is cancelled; the resuming client gets
// every logged event after its last one, then an error event, instead of
// waiting forever for an end. Fake time, in-memory connections.
func TestReviewDetachedOverflow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		p := newPipeHarness(t, runtime.Options{ResumeWindow: time.Minute,
			Models: map[string]runtime.Sampler{"flood": reviewFloodSampler{gate: gate}}})
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

// reviewWrappingStore is a Store whose misses wrap ErrNotStored, as a networked
// store's errors do (context: the key, the backend).
type reviewWrappingStore struct{ runtime.Store }

func (s reviewWrappingStore) Get(ctx context.Context, id string) (*runtime.Record, error) {
	rec, err := s.Store.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("store get %s: %w", id, err)
	}
	return rec, nil
}

// TestReviewWrappedNotStored: an unknown previous_response_id is a 400
// previous_response_not_found even when the Store wraps ErrNotStored, over
// HTTP and WebSocket; it used to be a 500 server_error.
func TestReviewWrappedNotStored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t), Store: reviewWrappingStore{runtime.NewMemoryStore(runtime.MemoryStoreOptions{})}})
	const missing = "resp_0123456789abcdef0123456789abcdef0123456789abcdef"
	status, body := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "previous_response_id": missing, "input": "hi"})
	if status != 400 || !strings.Contains(string(body), `"previous_response_not_found"`) || !strings.Contains(string(body), `"previous_response_id"`) {
		t.Fatalf("HTTP: %d %s", status, body)
	}
	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": "tether-scripted", "previous_response_id": missing, "input": "hi"}))
	c.wantError(t, "previous_response_not_found")
	// A stored chain still loads through the wrapping store.
	status, body = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": "hi"})
	if status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	id, _ := obj(t, body)["id"].(string)
	if status, body = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "previous_response_id": id, "input": "again"}); status != 200 {
		t.Fatalf("chained: %d %s", status, body)
	}
}

// TestReviewTakenOverRollout: once a suspended rollout is resumed on a new
// connection, its old connection (still open, half-open for all it knows)
// may neither append to it nor cancel it: both are response_not_found, as
// for any response not on the connection. The old connection used to be told
// the rollout "is not a suspended rollout", and its cancel went through,
// ending the rollout under the new connection.
func TestReviewTakenOverRollout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t)})
	auth := http.Header{"Authorization": {"Bearer same"}}
	a := h.dial(t, auth)
	a.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true,
		"input": script([][]dcall{{{"read_file", `{"path":"a.go"}`}}})}))
	pause := last(a.next(t))
	id := respID(t, pause)

	b := h.dial(t, auth)
	b.send(t, refEv("response.resume", id, ""))
	if again := b.recv(t); eventType(t, again) != "response.done" {
		t.Fatalf("resume sent %s", again)
	}
	a.send(t, appendEv(id, "", outputsFor(t, pause)...))
	a.wantError(t, "response_not_found")
	a.send(t, refEv("response.cancel", id, ""))
	a.wantError(t, "response_not_found")

	b.send(t, appendEv(id, "", outputsFor(t, pause)...))
	if end := last(b.next(t)); eventType(t, end) != "response.completed" {
		t.Fatalf("the rollout ended with %s", end)
	}
}
