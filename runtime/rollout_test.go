package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tether-run/tether/internal/schematest"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestMaxOutputTokens: a response cut off by max_output_tokens ends
// incomplete, with its last item incomplete, over SSE and JSON alike.
func TestMaxOutputTokens(t *testing.T) {
	t.Parallel()
	v := schematest.Load(t)
	h := newHarness(t, runtime.Options{})
	body := map[string]any{"model": "tether-scripted", "max_output_tokens": 3,
		"input": "Please repeat this rather long sentence back to me, word for word, without changing anything."}
	events := h.sse(t, body)
	checkStreamInvariants(t, events)
	last := events[len(events)-1]
	if typ := eventType(t, last); typ != "response.incomplete" {
		t.Fatalf("terminal event %s", typ)
	}
	r := checkResponse(t, v, terminalResponse(t, last), "incomplete")
	if d := r["incomplete_details"].(map[string]any); d["reason"] != "max_output_tokens" {
		t.Fatalf("incomplete_details %v", d)
	}
	out := r["output"].([]any)
	if item := out[len(out)-1].(map[string]any); item["status"] != "incomplete" {
		t.Fatalf("last item status %v", item["status"])
	}
	if u := r["usage"].(map[string]any); u["output_tokens"].(float64) != 3 {
		t.Fatalf("output_tokens %v, want 3", u["output_tokens"])
	}
}

// TestStoredResponse: store defaults to true; GET returns the response,
// input_items lists its input (newest first by default), DELETE removes it,
// and an HTTP continuation loads the chain from the store.
func TestStoredResponse(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	status, raw := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": []any{userMsg("one"), userMsg("two")}})
	if status != 200 {
		t.Fatalf("%d %s", status, raw)
	}
	id := obj(t, raw)["id"].(string)
	if status, got := h.get(t, "/responses/"+id); status != 200 || obj(t, got)["id"] != id {
		t.Fatalf("GET: %d %s", status, got)
	}
	status, list := h.get(t, "/responses/"+id+"/input_items")
	data := obj(t, list)["data"].([]any)
	if status != 200 || len(data) != 2 || data[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "two" {
		t.Fatalf("input_items: %d %s", status, list)
	}
	// Sent without ids, the messages have one (msg_), and after pages past it.
	newest, _ := data[0].(map[string]any)["id"].(string)
	if !strings.HasPrefix(newest, "msg_") {
		t.Fatalf("an input message's id: %q", newest)
	}
	status, list = h.get(t, "/responses/"+id+"/input_items?after="+newest)
	if data := obj(t, list)["data"].([]any); status != 200 || len(data) != 1 || data[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "one" {
		t.Fatalf("input_items after the newest: %d %s", status, list)
	}
	status, raw = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "previous_response_id": id, "input": "three"})
	if status != 200 {
		t.Fatalf("chained: %d %s", status, raw)
	}
	if obj(t, raw)["previous_response_id"] != id {
		t.Fatalf("chained response: %s", raw)
	}
	req, _ := newDelete(h.base + "/responses/" + id)
	resp, err := h.hs.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("DELETE: %v %v", err, resp)
	}
	resp.Body.Close()
	if status, _ := h.get(t, "/responses/"+id); status != 404 {
		t.Fatalf("GET after DELETE: %d", status)
	}
	status, raw = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "previous_response_id": id, "input": "four"})
	if status != 400 || obj(t, raw)["error"].(map[string]any)["code"] != "previous_response_not_found" {
		t.Fatalf("continuation of a deleted response: %d %s", status, raw)
	}
}

// startRecorder records the Start of every sample it is asked for.
type startRecorder struct {
	runtime.Sampler
	mu     sync.Mutex
	starts []time.Time // guarded by mu
}

func (s *startRecorder) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	s.mu.Lock()
	s.starts = append(s.starts, req.Start)
	s.mu.Unlock()
	return s.Sampler.Sample(ctx, req, emit)
}

// TestModelStartsWhenPromptReady: every step hands its model the moment
// its prompt was ready, taken before the events that announce the step
// (response.created and in_progress, or the in_progress ending a pause),
// so that a paced model reads the prompt while they go out, as an engine
// beside the API would.
func TestModelStartsWhenPromptReady(t *testing.T) {
	r := renderer(t)
	rec := &startRecorder{Sampler: sampler.NewScripted(r, sampler.Timing{})}
	h := newHarness(t, runtime.Options{Renderer: r, Models: map[string]runtime.Sampler{"rec": rec}})
	c := h.dial(t, nil)
	before := time.Now()
	c.send(t, create(suspendedBody("rec", [][]dcall{{{"read_file", `{"path":"a.go"}`}}}, false)))
	pause := last(c.next(t))
	c.send(t, appendEv(respID(t, pause), "", outputsFor(t, pause)...))
	if end := decodeEv(t, last(c.next(t))); end.Type != "response.completed" {
		t.Fatalf("the rollout ended with %s", end.Type)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.starts) != 2 {
		t.Fatalf("%d samples, want 2", len(rec.starts))
	}
	for i, start := range rec.starts {
		if start.Before(before) || start.After(time.Now()) {
			t.Errorf("step %d: the model's start %v is not when its prompt was ready", i, start)
		}
	}
}

// panicSampler streams the start of a message, then panics: a backend bug.
type panicSampler struct{}

func (panicSampler) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	emit(sampler.Delta{Kind: sampler.TextStart})
	emit(sampler.Delta{Kind: sampler.TextDelta, Text: "Hello"})
	panic("sampler bug")
}

// TestSamplerPanic: a sampler that panics ends the response with an
// error event, in both designs, and the lane serves on. It guards the
// suspended design against leaving the client waiting for an end that
// never comes.
func TestSamplerPanic(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	h := newHarness(t, runtime.Options{Renderer: r, Models: map[string]runtime.Sampler{
		"panics":          panicSampler{},
		"tether-scripted": sampler.NewScripted(r, sampler.Timing{}),
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

// togetherSampler streams "a", "b", "c" as one message, the first two
// marked as released together with the next (sampler.Delta.More).
type togetherSampler struct{}

func (togetherSampler) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	emit(sampler.Delta{Kind: sampler.TextStart})
	emit(sampler.Delta{Kind: sampler.TextDelta, Text: "a", More: true})
	emit(sampler.Delta{Kind: sampler.TextDelta, Text: "b", More: true})
	emit(sampler.Delta{Kind: sampler.TextDelta, Text: "c"})
	emit(sampler.Delta{Kind: sampler.PartEnd})
	return sampler.Result{OutputTokens: 3}, nil
}

// TestDeltasTogether: tokens the model released together go out in one
// delta event, or one each with EveryDelta; the text is the same.
func TestDeltasTogether(t *testing.T) {
	t.Parallel()
	for _, every := range []bool{false, true} {
		t.Run(fmt.Sprintf("every=%v", every), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, runtime.Options{Renderer: renderer(t), EveryDelta: every,
				Models: map[string]runtime.Sampler{"together": togetherSampler{}}})
			c := h.dial(t, nil)
			c.send(t, create(map[string]any{"model": "together", "store": false, "input": "hi"}))
			var deltas []string
			for _, f := range c.untilTerminal(t) {
				if e := decodeEv(t, f); e.Type == "response.output_text.delta" {
					deltas = append(deltas, e.Delta)
				}
			}
			want := []string{"abc"}
			if every {
				want = []string{"a", "b", "c"}
			}
			if !slices.Equal(deltas, want) {
				t.Errorf("deltas %q, want %q", deltas, want)
			}
		})
	}
}
