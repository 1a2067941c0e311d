package runtime_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/redisstore"
)

// redisHarness is a server whose store is the Redis at url.
func redisHarness(t *testing.T, url string, opts runtime.Options) *harness {
	t.Helper()
	st, err := redisstore.New(url, redisstore.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opts.Store = st
	return newHarness(t, opts)
}

// storedResp is what these tests read of a response object.
type storedResp struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// respOf decodes a response object.
func respOf(t *testing.T, b []byte) storedResp {
	t.Helper()
	var r storedResp
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("not a response: %v: %s", err, b)
	}
	return r
}

// errCode is the code of an HTTP error body.
func errCode(t *testing.T, b []byte) string {
	t.Helper()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal(b, &e)
	return e.Error.Code
}

// TestRedisTwoServers: two tether servers on one Redis. A chain started on
// A continues over HTTP on B, and over a WebSocket on B whose cache has
// never seen it; a response deleted on B is gone on A.
func TestRedisTwoServers(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	a, b := redisHarness(t, rd.URL(), runtime.Options{}), redisHarness(t, rd.URL(), runtime.Options{})

	status, body := a.post(t, "/responses", map[string]any{"model": "tether-scripted", "store": true, "input": "The code word is papaya."})
	if status != 200 {
		t.Fatalf("A: %d %s", status, body)
	}
	r1 := respOf(t, body)
	status, body = b.post(t, "/responses", map[string]any{"model": "tether-scripted", "store": true, "previous_response_id": r1.ID, "input": "What was it?"})
	if status != 200 || respOf(t, body).Status != "completed" {
		t.Fatalf("B continuing A's chain over HTTP: %d %s", status, body)
	}
	r2 := respOf(t, body)
	if !strings.Contains(string(body), "papaya") && !strings.Contains(string(body), "What was it?") {
		t.Fatalf("B's answer does not read the chain: %s", body)
	}

	c := b.dial(t, nil)
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": true, "previous_response_id": r2.ID, "input": "Once more."}))
	evs := c.untilTerminal(t)
	if eventType(t, last(evs)) != "response.completed" {
		t.Fatalf("B's WebSocket continuing from the store: %s", last(evs))
	}
	r3 := respOf(t, terminalResponse(t, last(evs)))
	fromStore := map[string]string{"transport": "ws", "design": "turns", "state": "store", "status": "completed"}
	if n := counter(t, b.metrics.Registry(), "tether_responses_total", fromStore); n != 1 {
		t.Errorf("B's WebSocket turns loaded from the store: %v, want 1", n)
	}

	// Every response is readable on either server, and its input items.
	for _, h := range []*harness{a, b} {
		for _, id := range []string{r1.ID, r2.ID, r3.ID} {
			if status, body := h.get(t, "/responses/"+id); status != 200 || respOf(t, body).ID != id {
				t.Fatalf("GET %s: %d %s", id, status, body)
			}
		}
		if status, body := h.get(t, "/responses/"+r3.ID+"/input_items"); status != 200 || !strings.Contains(string(body), "Once more.") {
			t.Fatalf("input_items of %s: %d %s", r3.ID, status, body)
		}
	}

	req, _ := newDelete(b.base + "/responses/" + r2.ID)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("DELETE on B: %v %v", res, err)
	}
	res.Body.Close()
	if status, _ := a.get(t, "/responses/"+r2.ID); status != 404 {
		t.Fatalf("GET on A of a response deleted on B: %d", status)
	}
	// The chain through it is broken, on either server.
	status, body = a.post(t, "/responses", map[string]any{"model": "tether-scripted", "previous_response_id": r3.ID, "input": "and?"})
	if status != 400 || errCode(t, body) != "previous_response_not_found" {
		t.Fatalf("continuing past a deleted response: %d %s", status, body)
	}
}

// TestRedisOutage: Redis killed in the middle of a chained conversation.
// Requests that need it fail within a bounded time with store_unavailable;
// store: false requests are served meanwhile; nothing is half-written; once
// Redis is back the conversation continues, tether never restarted.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	h := redisHarness(t, rd.URL(), runtime.Options{})
	status, body := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "store": true, "input": "Remember: papaya."})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	r1 := respOf(t, body)

	rd.Kill()
	start := time.Now()
	status, body = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "store": true, "previous_response_id": r1.ID, "input": "Well?"})
	if took := time.Since(start); status != 503 || errCode(t, body) != "store_unavailable" || took > 5*time.Second {
		t.Fatalf("a continuation while Redis is down: %d %s after %s", status, body, took)
	}
	status, body = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "store": true, "input": "Keep this."})
	lost := respOf(t, body)
	if status != 200 || lost.Status != "failed" || lost.Error == nil || lost.Error.Code != "store_unavailable" {
		t.Fatalf("a store: true response while Redis is down: %d %s", status, body)
	}
	if status, body = h.get(t, "/responses/"+r1.ID); status != 503 || errCode(t, body) != "store_unavailable" {
		t.Fatalf("GET while Redis is down: %d %s", status, body)
	}
	status, body = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "store": false, "input": "Still here?"})
	if status != 200 || respOf(t, body).Status != "completed" {
		t.Fatalf("a store: false response while Redis is down: %d %s", status, body)
	}

	rd.Restart()
	waitFor(t, "the store to answer again", func() bool {
		status, _ := h.get(t, "/responses/"+r1.ID)
		return status == 200
	})
	status, body = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "store": true, "previous_response_id": r1.ID, "input": "Well?"})
	if status != 200 || respOf(t, body).Status != "completed" {
		t.Fatalf("the conversation after Redis came back: %d %s", status, body)
	}
	if status, _ := h.get(t, "/responses/"+lost.ID); status != 404 {
		t.Fatalf("the response that failed to be stored: GET %d, want 404", status)
	}
}

// TestRedisTenants: through Redis, another tenant's id is not found, for
// reading, deleting and continuing alike.
func TestRedisTenants(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice", "sk-bob": "bob"})
	h := redisHarness(t, rd.URL(), runtime.Options{Keys: keys})
	code, body := authed(t, h, "POST", "/v1/responses", "Bearer sk-alice", `{"model":"tether-scripted","store":true,"input":"mine"}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	id := respOf(t, []byte(body)).ID
	for _, probe := range []struct{ method, path, body string }{
		{"GET", "/v1/responses/" + id, ""},
		{"GET", "/v1/responses/" + id + "/input_items", ""},
		{"DELETE", "/v1/responses/" + id, ""},
	} {
		if code, body := authed(t, h, probe.method, probe.path, "Bearer sk-bob", probe.body); code != 404 {
			t.Errorf("bob %s %s: %d %s", probe.method, probe.path, code, body)
		}
	}
	code, body = authed(t, h, "POST", "/v1/responses", "Bearer sk-bob", `{"model":"tether-scripted","previous_response_id":"`+id+`","input":"theirs"}`)
	if code != 400 || !strings.Contains(body, "previous_response_not_found") {
		t.Errorf("bob continuing alice's response: %d %s", code, body)
	}
	if code, _ := authed(t, h, "GET", "/v1/responses/"+id, "Bearer sk-alice", ""); code != 200 {
		t.Errorf("alice reading her own response after bob's attempts: %d", code)
	}
}
