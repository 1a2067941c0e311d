package runtime

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-run/tether/sampler"
)

// gate is a model that waits, each sample, until the gate opens.
type gate struct {
	inner   Sampler
	entered chan struct{}
	open    chan struct{}
}

func (g *gate) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-g.open:
	case <-ctx.Done():
		return sampler.Result{}, ctx.Err()
	}
	return g.inner.Sample(ctx, req, emit)
}

// bgServer is a server of opts on loopback, and a way to call it.
func bgServer(t *testing.T, opts Options) (*Server, func(method, path, body string) (int, string)) {
	t.Helper()
	s, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		hs.Close()
	})
	return s, func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// TestBackgroundPriority: with one worker busy, the queue runs the faster
// completion window first, within a window a request that continues a
// line seen before ahead of the rest, then in arrival order.
func TestBackgroundPriority(t *testing.T) {
	t.Parallel()
	g := &gate{inner: sampler.NewScripted(nil, sampler.Timing{}), entered: make(chan struct{}, 1), open: make(chan struct{})}
	s, do := bgServer(t, Options{Models: map[string]Sampler{"gated": g}, Background: BackgroundOptions{Workers: 1}})
	var mu sync.Mutex
	var order []string
	s.bg.started = func(id string) {
		mu.Lock()
		order = append(order, id)
		mu.Unlock()
	}
	create := func(opts string) string {
		t.Helper()
		code, body := do("POST", "/v1/responses", `{"model":"gated","background":true,"input":"hi","background_options":`+opts+`}`)
		if code != 200 {
			t.Fatalf("create %s: %d %s", opts, code, body)
		}
		var r struct{ ID string }
		json.Unmarshal([]byte(body), &r)
		return r.ID
	}
	blocker := create(`{}`)
	<-g.entered // the one worker runs it
	ids := map[string]string{
		"8h":           create(`{"completion_window":"8h"}`),
		"2h":           create(`{"completion_window":"2h"}`),
		"new line":     create(`{"completion_window":"soonest","continuation_id":"line"}`),
		"no line":      create(`{}`),
		"line again":   create(`{"continuation_id":"line"}`),
		"2h continues": create(`{"completion_window":"2h","continuation_id":"other"}`),
	}
	close(g.open)
	want := []string{blocker, ids["line again"], ids["new line"], ids["no line"], ids["2h"], ids["2h continues"], ids["8h"]}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n == len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, want) {
		name := map[string]string{blocker: "blocker"}
		for k, v := range ids {
			name[v] = k
		}
		var got, wanted []string
		for _, id := range order {
			got = append(got, name[id])
		}
		for _, id := range want {
			wanted = append(wanted, name[id])
		}
		t.Errorf("ran in order %q, want %q", got, wanted)
	}
}

// TestBackgroundRetention: an ended background response is kept
// Background.Retention by the server's clock, to poll, stream again or
// cancel again; then only a stored one is there, and what the kept ones
// held of the memory budget is given back.
func TestBackgroundRetention(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	s, do := bgServer(t, Options{Now: now, Limits: Limits{MaxMemory: 1 << 30}})
	create := func(body string) string {
		t.Helper()
		code, resp := do("POST", "/v1/responses", body)
		if code != 200 {
			t.Fatalf("create: %d %s", code, resp)
		}
		return between(resp, `"id":"`, `"`)
	}
	kept := create(`{"model":"tether-scripted","background":true,"store":false,"input":"not stored"}`)
	stored := create(`{"model":"tether-scripted","background":true,"input":"stored"}`)
	streamed := create(`{"model":"tether-scripted","background":true,"stream":true,"input":"streamed"}`) // stored, as by default
	for _, id := range []string{kept, stored, streamed} {
		e := s.bg.find("", id)
		if e == nil {
			t.Fatalf("%s is not kept", id)
		}
		<-e.done
	}
	status := func(method, path string) int {
		code, _ := do(method, path, "")
		return code
	}
	check := func(when string, want map[string]int) {
		t.Helper()
		for path, code := range want {
			method := "GET"
			if strings.HasSuffix(path, "/cancel") {
				method = "POST"
			}
			if got := status(method, path); got != code {
				t.Errorf("%s: %s %s = %d, want %d", when, method, path, got, code)
			}
		}
	}
	clock.Add(int64(s.opts.Background.Retention - time.Second))
	check("within the retention", map[string]int{
		"/v1/responses/" + kept:                       200,
		"/v1/responses/" + kept + "/cancel":           200,
		"/v1/responses/" + stored:                     200,
		"/v1/responses/" + streamed + "?stream=true":  200,
		"/v1/responses/" + streamed + "?stream=false": 200,
	})
	if s.MemoryHeld() == 0 {
		t.Error("the kept responses hold none of the memory budget")
	}
	clock.Add(int64(time.Second))
	check("past the retention", map[string]int{
		"/v1/responses/" + kept:                      404,
		"/v1/responses/" + kept + "/cancel":          404,
		"/v1/responses/" + kept + "?stream=true":     404,
		"/v1/responses/" + stored:                    200, // from the store
		"/v1/responses/" + stored + "/cancel":        400, // a stored response, no longer a background one to cancel
		"/v1/responses/" + streamed + "?stream=true": 400, // stored, its events not kept
	})
	if held := s.MemoryHeld(); held != 0 { // the store keeps what it stored in bounds of its own
		t.Errorf("the memory budget holds %d bytes once no background response is kept", held)
	}
}

// between is the text of s between the first before and the after that
// follows it.
func between(s, before, after string) string {
	_, rest, _ := strings.Cut(s, before)
	v, _, _ := strings.Cut(rest, after)
	return v
}
