package clienttools_test

import (
	"context"
	"strings"

	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// durableServer is a tether whose suspended rollouts are checkpointed in
// cps; the test may shut it down.
func durableServer(t *testing.T, cps runtime.Checkpoints) (*runtime.Server, string) {
	t.Helper()
	r, err := sharedRenderer()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := runtime.NewServer(runtime.Options{Renderer: r, Checkpoints: cps,
		Models: map[string]runtime.Sampler{sampler.ScriptedModel: sampler.NewScripted(r, sampler.Timing{})}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		hs.Close()
	})
	return srv, hs.URL + "/v1"
}

// TestResumeFallback: the server a suspended rollout runs on shuts down
// while the rollout is parked on its first call; the server hands the
// rollout over (its connection closes with 1012), and the client kit
// resumes it on the next of its Fallbacks, which shares the store, and
// runs it to its end: every call answered once, the same text as a
// rollout never moved.
func TestResumeFallback(t *testing.T) {
	t.Parallel()
	cps := runtime.NewMemoryCheckpoints()
	a, baseA := durableServer(t, cps)
	_, baseB := durableServer(t, cps)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var once sync.Once
	var calls []string
	var mu sync.Mutex
	run := func(ctx context.Context, args string) (string, error) {
		mu.Lock()
		calls = append(calls, args)
		mu.Unlock()
		// At the first call the server the rollout runs on goes down.
		once.Do(func() { go a.Shutdown(context.Background()) })
		return "ok " + args, nil
	}
	rollout := func() clienttools.Rollout {
		return clienttools.Rollout{Mode: clienttools.ModeSuspend,
			Request: &protocol.CreateRequest{Model: sampler.ScriptedModel,
				Input: protocol.Items{protocol.UserMessage("call: step {\"n\":1}\ncall: step {\"n\":2}\ncall: step {\"n\":3}")}},
			Funcs: []clienttools.Func{{Name: "step", Parameters: []byte(`{"type":"object"}`), Run: run}}}
	}
	c := &clienttools.Client{BaseURL: baseA, Fallbacks: []string{baseB}}
	res, err := c.Run(ctx, rollout())
	if err != nil {
		t.Fatal(err)
	}
	if res.Response.Status != protocol.ResponseCompleted || res.Reconnects == 0 {
		t.Fatalf("status %s after %d reconnects, want completed after one at least", res.Response.Status, res.Reconnects)
	}
	if len(calls) != 3 {
		t.Fatalf("the tool ran %d times (%v), want 3", len(calls), calls)
	}
	want, err := (&clienttools.Client{BaseURL: baseB}).Run(ctx, rollout())
	if err != nil {
		t.Fatal(err)
	}
	if res.Text() != want.Text() {
		t.Fatalf("the moved rollout answered %q, want %q", res.Text(), want.Text())
	}
}

// TestResumeOwnedElsewhere: a rollout parked on server A is taken over by
// another connection on server B while the kit's client is still attached
// to A; the kit's append there is answered with response_owned_elsewhere
// and a close 1012, and the kit resumes the rollout on its next server, B,
// where it answers the pause again and runs it to its end.
func TestResumeOwnedElsewhere(t *testing.T) {
	t.Parallel()
	cps := runtime.NewMemoryCheckpoints()
	_, baseA := durableServer(t, cps)
	_, baseB := durableServer(t, cps)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var id string
	var once sync.Once
	run := func(ctx context.Context, args string) (string, error) {
		// At the first call, another client takes the rollout over on B
		// (and stays, attached there).
		once.Do(func() {
			c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(baseB, "http")+"/responses", nil)
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { c.CloseNow() })
			if err := wsjson.Write(ctx, c, map[string]any{"type": "response.resume", "response_id": id}); err != nil {
				t.Error(err)
				return
			}
			for {
				var ev struct{ Type string }
				if err := wsjson.Read(ctx, c, &ev); err != nil || ev.Type == "response.done" || ev.Type == "error" {
					if ev.Type != "response.done" {
						t.Errorf("the takeover on B: %v %s", err, ev.Type)
					}
					return
				}
			}
		})
		return "ok " + args, nil
	}
	c := &clienttools.Client{BaseURL: baseA, Fallbacks: []string{baseB}}
	res, err := c.Run(ctx, clienttools.Rollout{Mode: clienttools.ModeSuspend,
		Request: &protocol.CreateRequest{Model: sampler.ScriptedModel,
			Input: protocol.Items{protocol.UserMessage("call: step {\"n\":1}\ncall: step {\"n\":2}")}},
		Funcs: []clienttools.Func{{Name: "step", Parameters: []byte(`{"type":"object"}`), Run: run}},
		OnEvent: func(ev protocol.Event) {
			if re, ok := ev.(*protocol.ResponseEvent); ok && re.Type == protocol.EventCreated {
				id = re.Response.ID
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Response.Status != protocol.ResponseCompleted || res.Reconnects == 0 {
		t.Fatalf("status %s after %d reconnects, want completed after one at least", res.Response.Status, res.Reconnects)
	}
}
