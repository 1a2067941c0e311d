package clienttools_test

import (
	"context"
	"net"
	"strings"

	"net/http"
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

// TestResumeOwnedElsewhere: the kit's connection to server A drops while
// it runs its first call, and another client, with the same key, takes the
// rollout over on server B and stays there. The kit resumes on A, which
// refuses it (B's lease is live: response_owned_elsewhere); the kit moves
// on to B after a back-off, resumes there and runs the rollout to its end.
func TestResumeOwnedElsewhere(t *testing.T) {
	t.Parallel()
	cps := runtime.NewMemoryCheckpoints()
	_, baseA := durableServer(t, cps)
	_, baseB := durableServer(t, cps)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var kitConns openConns
	var id string
	var once sync.Once
	run := func(ctx context.Context, args string) (string, error) {
		once.Do(func() {
			kitConns.cutAll() // A detaches the rollout and lets its lease go
			// The other client retries until A has let it go.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
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
				var ev struct {
					Type  string
					Error struct{ Code string }
				}
				if err := wsjson.Read(ctx, c, &ev); err != nil {
					t.Error(err)
					return
				}
				if ev.Type == "response.done" {
					return // B holds it, for this client
				}
				if ev.Error.Code != protocol.CodeResponseOwnedElsewhere || time.Now().After(deadline) {
					t.Errorf("the takeover on B: %+v", ev)
					return
				}
				c.CloseNow()
			}
		})
		return "ok " + args, nil
	}
	c := &clienttools.Client{BaseURL: baseA, Fallbacks: []string{baseB},
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: kitConns.dial}}}
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
	if res.Response.Status != protocol.ResponseCompleted || res.Reconnects < 2 {
		t.Fatalf("status %s after %d reconnects, want completed after two at least (A, which refused, then B)", res.Response.Status, res.Reconnects)
	}
}

// openConns dials connections the test may cut all at once.
type openConns struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (o *openConns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		o.mu.Lock()
		o.conns = append(o.conns, c)
		o.mu.Unlock()
	}
	return c, err
}

func (o *openConns) cutAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.conns {
		c.Close()
	}
	o.conns = nil
}
