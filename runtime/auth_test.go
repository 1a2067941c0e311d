package runtime_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestAPIKeys: with keys, every endpoint and the WebSocket upgrade refuse a
// missing or wrong key with 401 invalid_api_key and the standard error
// body, /healthz stays open, and a listed key is served.
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice", "sk-bob": "bob"})
	h := newHarness(t, runtime.Options{Keys: keys})
	do := func(method, path, auth, body string) (int, string) { return authed(t, h, method, path, auth, body) }
	create := `{"model":"tether-scripted","input":"hi"}`
	endpoints := []struct{ method, path, body string }{
		{"POST", "/v1/responses", create},
		{"GET", "/v1/responses/resp_x", ""},
		{"DELETE", "/v1/responses/resp_x", ""},
		{"GET", "/v1/responses/resp_x/input_items", ""},
		{"POST", "/v1/responses/compact", `{"model":"tether-scripted","input":"hi"}`},
		{"POST", "/v1/chat/completions", `{"model":"tether-scripted","messages":[{"role":"user","content":"hi"}]}`},
		{"GET", "/v1/models", ""},
		{"GET", "/metrics", ""},
	}
	for _, auth := range []string{"", "Bearer sk-mallory", "sk-alice", "Bearer sk-alic"} {
		for _, e := range endpoints {
			code, body := do(e.method, e.path, auth, e.body)
			var env struct {
				Error struct{ Code, Type string } `json:"error"`
			}
			json.Unmarshal([]byte(body), &env)
			if code != http.StatusUnauthorized || env.Error.Code != "invalid_api_key" || env.Error.Type != "invalid_request_error" {
				t.Errorf("%s %s with %q: %d %s", e.method, e.path, auth, code, body)
			}
			if strings.Contains(body, "sk-") {
				t.Errorf("%s %s: the answer repeats a key: %s", e.method, e.path, body)
			}
		}
		_, resp, err := websocket.Dial(context.Background(), h.ws, testDialOptions(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {auth}}}))
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("WebSocket upgrade with %q: %v %v", auth, resp, err)
		}
	}
	if code, _ := do("GET", "/healthz", "", ""); code != http.StatusOK {
		t.Errorf("healthz without a key: %d", code)
	}
	if code, body := do("POST", "/v1/responses", "Bearer sk-bob", create); code != http.StatusOK {
		t.Errorf("a listed key: %d %s", code, body)
	}
	c, _, err := websocket.Dial(context.Background(), h.ws, testDialOptions(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer sk-alice"}}}))
	if err != nil {
		t.Fatalf("WebSocket with a listed key: %v", err)
	}
	c.Close(websocket.StatusNormalClosure, "")
	// A reload takes effect at once.
	keys.Store(map[string]string{"sk-carol": "carol"})
	if code, _ := do("POST", "/v1/responses", "Bearer sk-bob", create); code != http.StatusUnauthorized {
		t.Errorf("a removed key after the reload: %d", code)
	}
	if code, _ := do("POST", "/v1/responses", "Bearer sk-carol", create); code != http.StatusOK {
		t.Errorf("an added key after the reload: %d", code)
	}
}

// authed sends a request with the Authorization header auth ("" for none)
// and returns the status and body.
func authed(t *testing.T, h *harness, method, path, auth, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, h.hs.URL+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestParseKeys(t *testing.T) {
	keys, err := runtime.ParseKeys(strings.NewReader("# keys\nsk-a alice\n\nsk-b\n"))
	if err != nil || keys["sk-a"] != "alice" || keys["sk-b"] != "line4" || len(keys) != 2 {
		t.Fatalf("%v %v", keys, err)
	}
	for _, bad := range []string{"sk-a alice extra\n", "sk-a a\nsk-a b\n"} {
		if _, err := runtime.ParseKeys(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestTenantsAreApart: a stored response is its tenant's: another tenant's
// GET, input_items, DELETE and previous_response_id (over HTTP, and over a
// WebSocket whose cache does not hold it) answer exactly as for an unknown
// id, and the owner's response is still there.
func TestTenantsAreApart(t *testing.T) {
	t.Parallel()
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice", "sk-bob": "bob"})
	h := newHarness(t, runtime.Options{Keys: keys})
	do := func(method, path, key, body string) (int, string) {
		return authed(t, h, method, path, "Bearer "+key, body)
	}
	code, body := do("POST", "/v1/responses", "sk-alice", `{"model":"tether-scripted","input":"alice's secret plan"}`)
	if code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	var created struct{ ID string }
	json.Unmarshal([]byte(body), &created)
	unknown := "resp_00000000000000000000000000000000000000000000000"
	same := func(what string, code1 int, body1 string, code2 int, body2 string) {
		t.Helper()
		if code1 != code2 || strings.ReplaceAll(body1, created.ID, "ID") != strings.ReplaceAll(body2, unknown, "ID") {
			t.Errorf("%s: another tenant's id %d %s, an unknown id %d %s", what, code1, body1, code2, body2)
		}
		if strings.Contains(body1, "secret") {
			t.Errorf("%s leaks the other tenant's content: %s", what, body1)
		}
	}
	for _, p := range []string{"/v1/responses/", "/v1/responses/%s/input_items"} {
		path := func(id string) string {
			if strings.Contains(p, "%s") {
				return strings.Replace(p, "%s", id, 1)
			}
			return p + id
		}
		c1, b1 := do("GET", path(created.ID), "sk-bob", "")
		c2, b2 := do("GET", path(unknown), "sk-bob", "")
		same("GET "+p, c1, b1, c2, b2)
	}
	cont := func(id string) string {
		return `{"model":"tether-scripted","previous_response_id":"` + id + `","input":[]}`
	}
	c1, b1 := do("POST", "/v1/responses", "sk-bob", cont(created.ID))
	c2, b2 := do("POST", "/v1/responses", "sk-bob", cont(unknown))
	same("previous_response_id over HTTP", c1, b1, c2, b2)
	c1, b1 = do("DELETE", "/v1/responses/"+created.ID, "sk-bob", "")
	c2, b2 = do("DELETE", "/v1/responses/"+unknown, "sk-bob", "")
	same("DELETE", c1, b1, c2, b2)
	if code, _ := do("GET", "/v1/responses/"+created.ID, "sk-alice", ""); code != 200 {
		t.Errorf("the owner's response after another tenant's DELETE: %d", code)
	}
	c, _, err := websocket.Dial(context.Background(), h.ws, testDialOptions(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer sk-bob"}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(websocket.StatusNormalClosure, "")
	ws := &wsConn{c: c}
	ws.send(t, create(map[string]any{"model": "tether-scripted", "store": true, "previous_response_id": created.ID, "input": []any{}}))
	if e := decodeEv(t, ws.recv(t)); e.Type != "error" || e.Error.Code != "previous_response_not_found" {
		t.Errorf("previous_response_id of another tenant over WebSocket: %+v", e.Error)
	}
	if code, _ := do("DELETE", "/v1/responses/"+created.ID, "sk-alice", ""); code != 200 {
		t.Errorf("the owner's DELETE: %d", code)
	}

	// A suspended rollout: another tenant's response.resume (parked, and
	// once it has ended, its tail) answers as for an unknown id.
	ac, _, err := websocket.Dial(context.Background(), h.ws, testDialOptions(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer sk-alice"}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close(websocket.StatusNormalClosure, "")
	alice := &wsConn{c: ac}
	alice.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true,
		"input": "alice's secret plan\n" + script([][]dcall{{{"read_file", `{"path":"plan.txt"}`}}})}))
	pause := last(alice.next(t))
	id := respID(t, pause)
	resumeAs := func(what, rid string) string {
		ws.send(t, refEv("response.resume", rid, ""))
		b := ws.recv(t)
		if strings.Contains(string(b), "secret") {
			t.Errorf("%s leaks the other tenant's content: %s", what, b)
		}
		return strings.ReplaceAll(string(b), rid, "ID")
	}
	if a, b := resumeAs("resume of a parked rollout", id), resumeAs("resume of an unknown id", unknown); a != b {
		t.Errorf("another tenant's parked rollout: %s; an unknown id: %s", a, b)
	}
	alice.send(t, appendEv(id, "", outputsFor(t, pause)...))
	if typ := eventType(t, last(alice.untilTerminal(t))); typ != "response.completed" {
		t.Fatalf("alice's rollout ended with %s", typ)
	}
	if a, b := resumeAs("resume of an ended rollout's tail", id), resumeAs("resume of an unknown id", unknown); a != b {
		t.Errorf("another tenant's tail: %s; an unknown id: %s", a, b)
	}
}

// TestTenantSuspendedLimit: one tenant cannot hold more than
// Tenant.Suspended suspended rollouts, and the others still get theirs.
func TestTenantSuspendedLimit(t *testing.T) {
	t.Parallel()
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice", "sk-bob": "bob"})
	h := newHarness(t, runtime.Options{Keys: keys, Tenant: runtime.TenantLimits{Suspended: 2}})
	dial := func(key string) *wsConn {
		c, _, err := websocket.Dial(context.Background(), h.ws, testDialOptions(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(websocket.StatusNormalClosure, "") })
		return &wsConn{c: c}
	}
	park := func(c *wsConn, lane string) string {
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": lane,
			"tools": []any{map[string]any{"type": "function", "name": "f"}}, "input": "call: f {}"}))
		evs := untilPause(t, c)
		return eventType(t, evs[len(evs)-1])
	}
	alice := dial("sk-alice")
	for _, lane := range []string{"a", "b"} {
		if got := park(alice, lane); got != "response.done" {
			t.Fatalf("alice's rollout on lane %s: %s", lane, got)
		}
	}
	alice.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "c", "input": "hi"}))
	if e := decodeEv(t, alice.recv(t)); e.Type != "error" || e.Error.Code != "tenant_suspended_limit" {
		t.Fatalf("alice's third: %+v", e.Error)
	}
	if got := park(dial("sk-bob"), "a"); got != "response.done" {
		t.Fatalf("bob's rollout: %s", got)
	}
}

// TestConnectionAndRateLimits: a tenant past Tenant.Conns is refused the
// upgrade (429 tenant_connection_limit) while another tenant connects; the
// server past Limits.MaxConnections refuses everyone (503 too_many_connections);
// a tenant past Tenant.RPM gets 429 rate_limit_exceeded, the others not.
func TestConnectionAndRateLimits(t *testing.T) {
	t.Parallel()
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice", "sk-bob": "bob", "sk-carol": "carol"})
	h := newHarness(t, runtime.Options{Keys: keys, Limits: runtime.Limits{MaxConnections: 3}, Tenant: runtime.TenantLimits{Conns: 2, RPM: 30}})
	dial := func(key string) (*websocket.Conn, int) {
		c, resp, err := websocket.Dial(context.Background(), h.ws, testDialOptions(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}}))
		if err != nil {
			if resp == nil {
				t.Fatal(err)
			}
			return nil, resp.StatusCode
		}
		t.Cleanup(func() { c.Close(websocket.StatusNormalClosure, "") })
		return c, http.StatusSwitchingProtocols
	}
	for i := range 2 {
		if _, code := dial("sk-alice"); code != http.StatusSwitchingProtocols {
			t.Fatalf("alice's connection %d: %d", i, code)
		}
	}
	if _, code := dial("sk-alice"); code != http.StatusTooManyRequests {
		t.Fatalf("alice's third connection: %d, want 429", code)
	}
	if _, code := dial("sk-bob"); code != http.StatusSwitchingProtocols {
		t.Fatalf("bob's connection: %d", code)
	}
	if _, code := dial("sk-carol"); code != http.StatusServiceUnavailable {
		t.Fatalf("a fourth connection on a server of three: %d, want 503", code)
	}
	get := func(key string) int {
		req, _ := http.NewRequest("GET", h.base+"/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	limited := 0
	for range 40 {
		if get("sk-carol") == http.StatusTooManyRequests {
			limited++
		}
	}
	// Carol's bucket held 30, her refused upgrade took one: of 40 more,
	// 11 are refused (10 if the bucket refilled by one meanwhile, at half
	// a request a second).
	if limited < 9 || limited > 11 {
		t.Errorf("%d of carol's 40 requests refused, want 11", limited)
	}
	if code := get("sk-bob"); code != http.StatusOK {
		t.Errorf("bob after carol's burst: %d", code)
	}
}

// TestTenantInFlightAndWebSocketRate: a response.create on a WebSocket is a
// request of its tenant's --tenant-rpm bucket, refused with
// rate_limit_exceeded in its lane's order when the bucket is empty; and a
// tenant with Tenant.InFlight responses in progress (parked suspended
// rollouts count) is refused another with tenant_inflight_limit, over
// WebSocket and HTTP, while another tenant is served.
func TestTenantInFlightAndWebSocketRate(t *testing.T) {
	t.Parallel()
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice", "sk-bob": "bob"})
	h := newHarness(t, runtime.Options{Keys: keys, Tenant: runtime.TenantLimits{InFlight: 2, RPM: 8}})
	dial := func(key string) *wsConn {
		c, _, err := websocket.Dial(context.Background(), h.ws, testDialOptions(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseNow() })
		return &wsConn{c: c}
	}
	alice := dial("sk-alice") // 1 of alice's 8
	park := create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script([][]dcall{{{"read_file", `{}`}}})})
	for _, lane := range []string{"a", "b"} { // 2, 3
		park["stream_id"] = lane
		alice.send(t, park)
		if typ := eventType(t, last(alice.next(t))); typ != "response.done" {
			t.Fatalf("parking on %s: %s", lane, typ)
		}
	}
	park["stream_id"] = "c" // 4
	alice.send(t, park)
	alice.wantError(t, "tenant_inflight_limit")
	if code, body := authed(t, h, "POST", "/v1/responses", "Bearer sk-alice", `{"model":"tether-scripted","input":"hi"}`); code != http.StatusTooManyRequests || !strings.Contains(body, "tenant_inflight_limit") { // 5
		t.Errorf("alice over HTTP at her in-flight limit: %d %s", code, body)
	}
	if code, _ := authed(t, h, "POST", "/v1/responses", "Bearer sk-bob", `{"model":"tether-scripted","input":"hi"}`); code != http.StatusOK {
		t.Errorf("bob while alice is at her limit: %d", code)
	}
	// Alice's bucket: 5 taken; 3 more creates pass the bucket (and are
	// refused for in-flight), the next is rate limited.
	for range 3 {
		alice.send(t, park)
		alice.wantError(t, "tenant_inflight_limit")
	}
	alice.send(t, park)
	alice.wantError(t, "rate_limit_exceeded")
}

// gatedSampler holds every sample at its start until open is closed; entered
// receives once a sample has begun. It makes the window between a create's
// admission and its rollout's start as wide as a test needs.
type gatedSampler struct {
	inner   runtime.Sampler
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedSampler) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	g.entered <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
		return sampler.Result{}, ctx.Err()
	}
	return g.inner.Sample(ctx, req, emit)
}

// TestTenantInFlightConcurrent: Tenant.InFlight holds when one tenant's
// creates arrive together. Guards the check and the taking of a place being
// one step: checked first and counted when the rollout began, every create
// that arrived in between was admitted.
func TestTenantInFlightConcurrent(t *testing.T) {
	t.Parallel()
	const limit, creates = 2, 24
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	gate := &gatedSampler{inner: sampler.NewScripted(r, sampler.Timing{}), entered: make(chan struct{}, creates), open: make(chan struct{})}
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice"})
	h := newHarness(t, runtime.Options{Keys: keys, Renderer: r, Models: map[string]runtime.Sampler{"gated": gate}, Tenant: runtime.TenantLimits{InFlight: limit}})
	// A long input: its rendering widens the window between the check and
	// the rollout's start.
	body := `{"model":"gated","store":false,"input":"` + strings.Repeat("the quick brown fox jumps over the lazy dog ", 4000) + `"}`
	codes := make(chan int, creates)
	start := make(chan struct{})
	for range creates {
		go func() {
			<-start
			code, _ := authed(t, h, "POST", "/v1/responses", "Bearer sk-alice", body)
			codes <- code
		}()
	}
	close(start)
	// Every create is either refused or holding a sample open: count both
	// until they add up.
	admitted, refused := 0, 0
	deadline := time.After(30 * time.Second)
	for admitted+refused < creates {
		select {
		case <-gate.entered:
			admitted++
		case code := <-codes:
			if code != http.StatusTooManyRequests {
				t.Fatalf("a create finished with %d while the gate was shut", code)
			}
			refused++
		case <-deadline:
			t.Fatalf("after 30 s: %d admitted, %d refused of %d", admitted, refused, creates)
		}
	}
	close(gate.open)
	for range admitted {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("an admitted create: %d", code)
		}
	}
	if admitted != limit {
		t.Errorf("%d of %d concurrent creates admitted with Tenant.InFlight %d", admitted, creates, limit)
	}
}

// TestTenantInFlightRefusedFork: a fork refused before it runs gives back
// no place among its tenant's responses in progress, since it took none.
// Guards a refused fork giving back a create's place, which let the tenant
// past Tenant.InFlight for good.
func TestTenantInFlightRefusedFork(t *testing.T) {
	t.Parallel()
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice"})
	h := newHarness(t, runtime.Options{Keys: keys, Tenant: runtime.TenantLimits{InFlight: 1, Suspended: 1}})
	c, _, err := websocket.Dial(context.Background(), h.ws, testDialOptions(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer sk-alice"}}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	alice := &wsConn{c: c}
	park := create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "a",
		"input": script([][]dcall{{{"read_file", `{}`}}})})
	alice.send(t, park)
	pause := last(alice.next(t))
	if typ := eventType(t, pause); typ != "response.done" {
		t.Fatalf("parking: %s", typ)
	}
	alice.send(t, map[string]any{"type": "response.fork", "stream_id": "a", "response_id": respID(t, pause), "stream_ids": []string{"b", "c", "d"}})
	for range 3 {
		alice.wantError(t, "tenant_suspended_limit")
	}
	park["stream_id"] = "e"
	alice.send(t, park)
	alice.wantError(t, "tenant_inflight_limit")
}
