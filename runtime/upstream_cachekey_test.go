package runtime_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// cacheKeys records the prompt_cache_key of every request that passes it
// on to next, in order ("" for none).
type cacheKeys struct {
	mu   sync.Mutex
	keys []string
	next http.Handler
}

func (c *cacheKeys) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var b struct {
		Key string `json:"prompt_cache_key"`
	}
	json.Unmarshal(body, &b)
	c.mu.Lock()
	c.keys = append(c.keys, b.Key)
	c.mu.Unlock()
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	c.next.ServeHTTP(w, r)
}

func (c *cacheKeys) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.keys
	c.keys = nil
	return k
}

// TestUpstreamCacheKey: through either upstream API, every step of a
// suspended rollout reaches the upstream with the rollout's response id as
// its prompt_cache_key, so that an upstream that routes or pins by the key
// keeps the rollout's prefix for its whole life; a client's own key goes
// instead; a turn of its own sends none, and the turns that continue it
// the first's id.
func TestUpstreamCacheKey(t *testing.T) {
	t.Parallel()
	b := newHarness(t, runtime.Options{Renderer: renderer(t)})
	target, err := url.Parse(b.hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	rec := &cacheKeys{next: httputil.NewSingleHostReverseProxy(target)}
	fake := httptest.NewServer(rec)
	t.Cleanup(fake.Close)
	models := map[string]runtime.Sampler{}
	for name, api := range remoteModels {
		models[name] = newUpstream(t, sampler.UpstreamConfig{BaseURL: fake.URL + "/v1", API: api, Model: "tether-scripted", APIKey: "sk-test"})
	}
	a := newHarness(t, runtime.Options{Models: models, Renderer: renderer(t)})
	steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"run_tests", `{}`}}}
	for _, model := range sortedRemotes() {
		c := a.dial(t, nil)
		events, pauses := driveSuspended(t, c, map[string]any{"model": model, "store": false,
			"input": script(steps), "tools": []any{functionTool("read_file"), functionTool("run_tests")}})
		id := respID(t, events[0])
		keys := rec.take()
		if pauses != 2 || len(keys) != 3 {
			t.Fatalf("%s: %d pauses, upstream keys %q", model, pauses, keys)
		}
		for i, k := range keys {
			if k != id {
				t.Errorf("%s: step %d's prompt_cache_key %q, want the rollout's %s", model, i, k, id)
			}
		}
		driveSuspended(t, c, map[string]any{"model": model, "store": false, "prompt_cache_key": "mine",
			"input": script(steps), "tools": []any{functionTool("read_file"), functionTool("run_tests")}})
		for i, k := range rec.take() {
			if k != "mine" {
				t.Errorf("%s: step %d with the client's key: %q", model, i, k)
			}
		}
		if code, body := a.post(t, "/responses", map[string]any{"model": model, "store": false, "input": "Say hi."}); code != http.StatusOK {
			t.Fatalf("%s: a turn: %d %s", model, code, body)
		}
		if keys := rec.take(); len(keys) != 1 || keys[0] != "" {
			t.Errorf("%s: a turn of its own sent %q", model, keys)
		}
		// A chain of stored turns: the second and third go with the first's id.
		prev := ""
		var first string
		for i := range 3 {
			body := map[string]any{"model": model, "store": true, "input": "Say hi."}
			if prev != "" {
				body["previous_response_id"] = prev
			}
			code, resp := a.post(t, "/responses", body)
			if code != http.StatusOK {
				t.Fatalf("%s: turn %d: %d %s", model, i, code, resp)
			}
			var r struct{ ID string }
			json.Unmarshal(resp, &r)
			if prev = r.ID; i == 0 {
				first = r.ID
			}
		}
		if keys := rec.take(); len(keys) != 3 || keys[0] != "" || keys[1] != first || keys[2] != first {
			t.Errorf("%s: a chain of turns sent %q, want none and then %s", model, keys, first)
		}
	}
}
