package runtime_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// These tests run two servers on one BackgroundStore (in memory here; on
// Redis, redisstore's conformance suite checks the store and cmd/tether's
// TestBackgroundKill two processes and a kill -9): a background
// response made on one is polled, streamed again and cancelled on the
// other, and taken over when its server stops writing.

// partitioned is a BackgroundStore whose writes fail once cut is set: its
// server is gone, as far as the store can tell.
type partitioned struct {
	runtime.BackgroundStore
	cut atomic.Bool
}

func (p *partitioned) WriteBackground(ctx context.Context, w *runtime.BackgroundWrite) (bool, error) {
	if p.cut.Load() {
		return false, errors.New("partitioned")
	}
	return p.BackgroundStore.WriteBackground(ctx, w)
}

// anyModel is a model that does not say it says the same whenever asked.
type anyModel struct{ runtime.Sampler }

// stalling is a model that streams its first few deltas and then nothing,
// until it is stopped: a server that would never end its response.
type stalling struct{ runtime.Sampler }

func (m stalling) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	n := 0
	m.Sampler.Sample(ctx, req, func(d sampler.Delta) {
		if n++; n <= 3 {
			emit(d)
		}
	})
	<-ctx.Done()
	return sampler.Result{}, ctx.Err()
}

// pair is two servers sharing a BackgroundStore and a response store,
// serving modelA and modelB; a's writes to the BackgroundStore go through
// partitioned. Both serve "stalling" too.
func pair(t *testing.T, modelA, modelB runtime.Sampler, ttl time.Duration) (a, b *harness, cut *partitioned) {
	t.Helper()
	var logs strings.Builder
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(logs.String(), "diverged") {
			t.Errorf("a run again diverged:\n%s", logs.String())
		}
	})
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	shared := runtime.NewMemoryBackgrounds()
	store := runtime.NewMemoryStore(runtime.MemoryStoreOptions{})
	cut = &partitioned{BackgroundStore: shared}
	opts := func(model runtime.Sampler, st runtime.BackgroundStore) runtime.Options {
		models := map[string]runtime.Sampler{sdkModel: model, "stalling": stalling{sampler.NewScripted(renderer(t), sampler.Timing{})}}
		return runtime.Options{Models: models, Store: store, Backgrounds: st, Logger: logger,
			Suspension: runtime.SuspensionOptions{LeaseTTL: ttl}, Timeouts: runtime.Timeouts{Drain: 50 * time.Millisecond}}
	}
	return newHarness(t, opts(modelA, cut)), newHarness(t, opts(modelB, shared)), cut
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// sse reads server-sent events from body: each event's type and sequence
// number, and the response id, until the body ends or stop says so.
func sse(t *testing.T, body io.Reader, stop func(typ string, seq int) bool) (id string, types []string, seqs []int) {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type           string `json:"type"`
			SequenceNumber int    `json:"sequence_number"`
			Response       struct {
				ID string `json:"id"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		if id == "" {
			id = ev.Response.ID
		}
		types, seqs = append(types, ev.Type), append(seqs, ev.SequenceNumber)
		if stop != nil && stop(ev.Type, ev.SequenceNumber) {
			break
		}
	}
	return id, types, seqs
}

func open(t *testing.T, h *harness, method, path, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, h.hs.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// wantSequence fails unless seqs count on from first, with no gap or
// repeat, and types end with want.
func wantSequence(t *testing.T, what string, types []string, seqs []int, first int, want string) {
	t.Helper()
	for i, seq := range seqs {
		if seq != first+i {
			t.Fatalf("%s: event %d (%s) has sequence_number %d, want %d: a gap or a repeat", what, i, types[i], seq, first+i)
		}
	}
	if len(types) == 0 || types[len(types)-1] != want {
		t.Fatalf("%s ended with %v, want %s", what, types[max(0, len(types)-3):], want)
	}
}

// TestBackgroundAcrossServers: a stream begun on A resumes on B while A
// still produces, with no gap and no repeat; B polls it; a cancel on B ends
// a response A runs.
func TestBackgroundAcrossServers(t *testing.T) {
	t.Parallel()
	scripted := sampler.NewScripted(renderer(t), sampler.Timing{TPS: 100})
	a, b, _ := pair(t, scripted, scripted, runtime.DefaultLeaseTTL)

	resp := open(t, a, "POST", "/v1/responses", `{"model":"tether-scripted","background":true,"stream":true,"input":"`+longInput+`"}`)
	id, types, _ := sse(t, resp.Body, func(_ string, seq int) bool { return seq == 5 })
	resp.Body.Close() // A runs on
	if len(types) != 6 || types[0] != "response.created" {
		t.Fatalf("first events on A: %v", types)
	}
	code, body := authed(t, b, "GET", "/v1/responses/"+id, "", "")
	if code != 200 || !strings.Contains(body, `"background":true`) {
		t.Fatalf("poll on B: %d %s", code, body)
	}
	resumed := open(t, b, "GET", "/v1/responses/"+id+"?stream=true&starting_after=5", "")
	if resumed.StatusCode != 200 {
		b, _ := io.ReadAll(resumed.Body)
		t.Fatalf("resume on B: %d %s", resumed.StatusCode, b)
	}
	_, types, seqs := sse(t, resumed.Body, nil)
	wantSequence(t, "resumed on B", types, seqs, 6, "response.completed")
	code, body = authed(t, b, "GET", "/v1/responses/"+id, "", "")
	if code != 200 || !strings.Contains(body, `"status":"completed"`) {
		t.Fatalf("poll on B once it ended: %d %s", code, body)
	}

	// A cancel on B of a response A runs: A hears of it at its next write.
	resp = open(t, a, "POST", "/v1/responses", `{"model":"stalling","background":true,"stream":true,"input":"`+longInput+`"}`)
	id, _, _ = sse(t, resp.Body, func(typ string, _ int) bool { return typ == "response.output_text.delta" })
	code, body = authed(t, b, "POST", "/v1/responses/"+id+"/cancel", "", "")
	if code != 200 || !strings.Contains(body, `"status":"cancelled"`) {
		t.Fatalf("cancel on B: %d %s", code, body)
	}
	_, types, _ = sse(t, resp.Body, nil)
	if len(types) == 0 || types[len(types)-1] != "response.cancelled" {
		t.Errorf("the create's stream on A ended with %v, want response.cancelled", types)
	}
}

// TestBackgroundTakenOver: when the server running a background response
// stops writing (its lease runs out), a stream that follows it on another
// server takes it over: a model that says the same is run again there and
// the stream goes on with no gap or repeat to its end; any other ends
// failed, background_server_lost.
func TestBackgroundTakenOver(t *testing.T) {
	t.Parallel()
	scripted := sampler.NewScripted(renderer(t), sampler.Timing{})
	for _, c := range []struct {
		name  string
		model runtime.Sampler // B's; A's streams the same, stalls and stops writing
		want  string
	}{
		{"deterministic", scripted, "response.completed"},
		{"not deterministic", anyModel{scripted}, "response.failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, b, cut := pair(t, stalling{scripted}, c.model, 600*time.Millisecond)
			resp := open(t, a, "POST", "/v1/responses", `{"model":"tether-scripted","background":true,"stream":true,"input":"`+longInput+`"}`)
			id, _, _ := sse(t, resp.Body, func(typ string, _ int) bool { return typ == "response.output_text.delta" })
			// A mirrors its events a write at a time: the store has the
			// response in progress only once a write after the client's
			// delta has landed. Before that, B would take it over as
			// queued, which any model runs again.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if _, body := authed(t, b, "GET", "/v1/responses/"+id, "", ""); strings.Contains(body, `"status":"in_progress"`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the store never had the response begun")
				}
			}
			cut.cut.Store(true) // A is gone, as far as the store can tell
			resumed := open(t, b, "GET", "/v1/responses/"+id+"?stream=true&starting_after=0", "")
			_, types, seqs := sse(t, resumed.Body, nil)
			wantSequence(t, "followed on B", types, seqs, 1, c.want)
			code, body := authed(t, b, "GET", "/v1/responses/"+id, "", "")
			if c.want == "response.failed" && !strings.Contains(body, "background_server_lost") || code != 200 {
				t.Errorf("poll on B: %d %s", code, body)
			}
		})
	}
}

// TestBackgroundHandedOver: a server that shuts down leaves its shared
// background responses to the others, queued and running alike: a stream
// that follows one on another server goes on to its end there at once, the
// lease ended by the last write.
func TestBackgroundHandedOver(t *testing.T) {
	t.Parallel()
	scripted := sampler.NewScripted(renderer(t), sampler.Timing{})
	a, b, _ := pair(t, stalling{scripted}, scripted, time.Minute) // a lease that would outlast the test: the hand-over ends it
	resp := open(t, a, "POST", "/v1/responses", `{"model":"tether-scripted","background":true,"stream":true,"input":"`+longInput+`"}`)
	id, _, _ := sse(t, resp.Body, func(typ string, _ int) bool { return typ == "response.output_text.delta" })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown A: %v", err)
	}
	resumed := open(t, b, "GET", "/v1/responses/"+id+"?stream=true&starting_after=0", "")
	_, types, seqs := sse(t, resumed.Body, nil)
	wantSequence(t, "followed on B", types, seqs, 1, "response.completed")
}
