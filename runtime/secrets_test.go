package runtime_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/quic-go/webtransport-go"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// secretServer is a server with API keys ("sk-acme" for acme, "sk-other"
// for other), whose pages from app.example may connect, over WebSocket and
// WebTransport; offset moves its clock.
type secretServer struct {
	*harness
	offset atomic.Int64
	log    syncBuffer
}

func newSecretServer(t *testing.T, opts runtime.Options) *secretServer {
	t.Helper()
	s := &secretServer{}
	opts.Keys = new(runtime.Keys)
	opts.Keys.Store(map[string]string{"sk-acme": "acme", "sk-other": "other"})
	opts.AccessLog, opts.OriginPatterns = true, []string{"app.example"}
	opts.Logger = slog.New(slog.NewTextHandler(&s.log, nil))
	opts.Now = func() time.Time { return time.Now().Add(time.Duration(s.offset.Load())) }
	s.harness = newHarnessOn(t, opts, wire{webTransport: true, enc: protocol.EncodingJSON})
	return s
}

// mint asks for a client secret with sk-acme and body.
func (s *secretServer) mint(t *testing.T, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.base+"/client_secrets", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Object, Value string
		ExpiresAt     int64 `json:"expires_at"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || !strings.HasPrefix(out.Value, "ek_") || out.ExpiresAt <= time.Now().Unix() {
		t.Fatalf("mint: %d %+v %v", resp.StatusCode, out, err)
	}
	return out.Value
}

// dial opens a WebSocket with secret as its subprotocol, from origin
// (none when ""): the connection and 101, or nil and the status of the
// refusal, with its error body.
func (s *secretServer) dial(t *testing.T, secret, origin string) (*websocket.Conn, int, string) {
	t.Helper()
	header := http.Header{}
	if origin != "" {
		header.Set("Origin", origin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, s.ws, &websocket.DialOptions{HTTPHeader: header, Subprotocols: []string{"json", "openai-insecure-api-key." + secret}})
	if err != nil {
		if resp == nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, string(body)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c, http.StatusSwitchingProtocols, ""
}

// dialWT opens a WebTransport session with secret in its URL, from origin
// (none when ""): its status, 200 when it opened (it is closed at once).
func (s *secretServer) dialWT(t *testing.T, secret, origin string) int {
	t.Helper()
	tr := &webtransport.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	header := http.Header{}
	if origin != "" {
		header.Set("Origin", origin)
	}
	resp, sess, err := tr.Dial(ctx, s.wt.URL()+"/responses?client_secret="+secret, header)
	if err == nil {
		sess.CloseWithError(0, "")
		return resp.StatusCode
	}
	if resp == nil {
		t.Fatalf("WebTransport: %v", err)
	}
	return resp.StatusCode
}

// TestClientSecrets: with API keys, a page's backend mints a client secret
// with its key; a WebSocket that offers it as a subprotocol (beside "json",
// which the server selects: never the secret) and a WebTransport session
// that gives it in its URL are the key's tenant's, once each. A secret
// used twice, expired, for another origin, or altered is refused with 401
// before any frame; none appears in the log.
func TestClientSecrets(t *testing.T) {
	t.Parallel()
	h := newSecretServer(t, runtime.Options{})

	// Minting takes a key.
	if code := status(t, http.MethodPost, h.base+"/client_secrets", "", `{}`); code != 401 {
		t.Fatalf("mint without a key: %d", code)
	}
	secret := h.mint(t, "")
	c, code, _ := h.dial(t, secret, "")
	if code != http.StatusSwitchingProtocols {
		t.Fatalf("a fresh secret: %d", code)
	}
	if c.Subprotocol() != "json" {
		t.Errorf("selected subprotocol %q, want json", c.Subprotocol())
	}
	ws := &wsConn{c: c}
	ws.send(t, create(map[string]any{"model": "tether-scripted", "input": "Stored for acme"}))
	done := decodeEv(t, last(ws.untilTerminal(t)))
	if done.Type != "response.completed" {
		t.Fatalf("over the secret's session: %+v", done)
	}
	// The session was acme's: its stored response is acme's.
	for key, want := range map[string]int{"sk-acme": 200, "sk-other": 404} {
		if code := status(t, http.MethodGet, h.base+"/responses/"+done.Response.ID, key, ""); code != want {
			t.Errorf("GET with %s: %d, want %d", key, code, want)
		}
	}

	// Refused: used twice; bound to another origin; altered; expired.
	if _, code, body := h.dial(t, secret, ""); code != 401 || !strings.Contains(body, `"invalid_api_key"`) {
		t.Errorf("a secret used twice: %d %s", code, body)
	}
	bound := h.mint(t, `{"origin":"https://app.example"}`)
	if _, code, _ := h.dial(t, bound, "https://evil.example"); code != 401 {
		t.Errorf("a secret from another origin: %d", code)
	}
	if _, code, _ := h.dial(t, bound, "https://app.example"); code != http.StatusSwitchingProtocols {
		t.Errorf("a secret from its origin: %d", code)
	}
	altered := h.mint(t, "")
	altered = altered[:len(altered)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(altered, "AA")]
	if _, code, _ := h.dial(t, altered, ""); code != 401 {
		t.Errorf("an altered secret: %d", code)
	}
	short := h.mint(t, `{"expires_after":{"seconds":1}}`)
	h.offset.Store(int64(2 * time.Second))
	if _, code, _ := h.dial(t, short, ""); code != 401 {
		t.Errorf("an expired secret: %d", code)
	}
	h.offset.Store(0)
	if code := status(t, http.MethodPost, h.base+"/client_secrets", "sk-acme", `{"expires_after":{"seconds":3600}}`); code != 400 {
		t.Errorf("a secret of an hour: %d, want 400", code)
	}

	// Handshakes racing with one secret: one is accepted, the others get 401.
	raced := h.mint(t, "")
	codes := make(chan int, 8)
	var wg sync.WaitGroup
	for range cap(codes) {
		wg.Go(func() { // not h.dial, which may call t.Fatal
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, resp, err := websocket.Dial(ctx, h.ws, &websocket.DialOptions{Subprotocols: []string{"json", "openai-insecure-api-key." + raced}})
			switch {
			case err == nil:
				c.CloseNow()
				codes <- http.StatusSwitchingProtocols
			case resp != nil:
				codes <- resp.StatusCode
			default:
				codes <- 0 // no answer
			}
		})
	}
	wg.Wait()
	close(codes)
	accepted := 0
	for code := range codes {
		switch code {
		case http.StatusSwitchingProtocols:
			accepted++
		case http.StatusUnauthorized:
		default:
			t.Errorf("a handshake racing with one secret: %d", code)
		}
	}
	if accepted != 1 {
		t.Errorf("%d of 8 handshakes with one secret accepted, want 1", accepted)
	}

	// WebTransport: the secret in the URL.
	wtSecret := h.mint(t, "")
	for i, want := range []int{200, 401} { // the second time, used
		if code := h.dialWT(t, wtSecret, ""); code != want {
			t.Errorf("WebTransport, try %d: %d, want %d", i+1, code, want)
		}
	}

	for _, s := range []string{secret, bound, altered, short, wtSecret} {
		if strings.Contains(h.log.String(), s) || strings.Contains(h.log.String(), s[:20]) {
			t.Errorf("the log holds a secret:\n%s", h.log.String())
			break
		}
	}
}

// TestClientSecretOpensOnlySessions: a client secret authenticates the
// WebSocket or WebTransport session it was minted for, and no plain HTTP
// request, wherever the request puts it: each is refused with 401
// invalid_api_key, saying where a secret goes, and leaves the secret
// unspent. (A POST /v1/responses that offered it as a subprotocol was once
// served as the secret's tenant.)
func TestClientSecretOpensOnlySessions(t *testing.T) {
	t.Parallel()
	h := newSecretServer(t, runtime.Options{})
	secret := h.mint(t, "")
	create := `{"model":"tether-scripted","input":"hi"}`
	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string
	}{
		{"POST /v1/responses, secret as subprotocol", http.MethodPost, "/responses", create,
			map[string]string{"Sec-WebSocket-Protocol": "json, openai-insecure-api-key." + secret}},
		{"POST /v1/responses, secret as subprotocol with Upgrade", http.MethodPost, "/responses", create,
			map[string]string{"Sec-WebSocket-Protocol": "openai-insecure-api-key." + secret, "Connection": "Upgrade", "Upgrade": "websocket"}},
		{"POST /v1/responses?client_secret", http.MethodPost, "/responses?client_secret=" + secret, create, nil},
		{"POST /v1/responses, secret as bearer", http.MethodPost, "/responses", create,
			map[string]string{"Authorization": "Bearer " + secret}},
		{"GET /v1/responses, secret as subprotocol, no Upgrade", http.MethodGet, "/responses", "",
			map[string]string{"Sec-WebSocket-Protocol": "openai-insecure-api-key." + secret}},
		{"GET /v1/models?client_secret", http.MethodGet, "/models?client_secret=" + secret, "", nil},
		{"POST /v1/client_secrets, secret as bearer", http.MethodPost, "/client_secrets", "{}",
			map[string]string{"Authorization": "Bearer " + secret}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, h.base+tc.path, strings.NewReader(tc.body))
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			code, raw := biDo(t, req)
			biCheckHTTPError(t, code, raw, biWant{401, "invalid_api_key", ""})
			if !strings.Contains(string(raw), "opens only the session") {
				t.Errorf("the refusal does not say where a secret goes: %s", raw)
			}
		})
	}
	if _, code, body := h.dial(t, secret, ""); code != http.StatusSwitchingProtocols {
		t.Errorf("the secret, after HTTP requests that bore it: %d %s", code, body)
	}
}

// TestClientSecretRefusedHandshake: a handshake refused before it is
// accepted (a page from an origin the server does not allow: 403; a
// tenant at its connection limit: 429) leaves its secret unspent, and a
// handshake that is then accepted takes it, over WebSocket and
// WebTransport. (A 403 once spent it, and the page's retry got 401.)
func TestClientSecretRefusedHandshake(t *testing.T) {
	t.Parallel()
	t.Run("origin", func(t *testing.T) {
		t.Parallel()
		h := newSecretServer(t, runtime.Options{})
		secret := h.mint(t, "")
		if _, code, body := h.dial(t, secret, "https://evil.example"); code != http.StatusForbidden {
			t.Fatalf("WebSocket from another origin: %d %s, want 403", code, body)
		}
		if _, code, body := h.dial(t, secret, "https://app.example"); code != http.StatusSwitchingProtocols {
			t.Fatalf("WebSocket from an allowed origin, after a 403: %d %s", code, body)
		}

		wtSecret := h.mint(t, "")
		if code := h.dialWT(t, wtSecret, "https://evil.example"); code != http.StatusForbidden {
			t.Fatalf("WebTransport from another origin: %d, want 403", code)
		}
		for i, want := range []int{200, 401} { // then used
			if code := h.dialWT(t, wtSecret, ""); code != want {
				t.Errorf("WebTransport after a 403, try %d: %d, want %d", i+1, code, want)
			}
		}
	})
	t.Run("tenant connections", func(t *testing.T) {
		t.Parallel()
		h := newSecretServer(t, runtime.Options{Tenant: runtime.TenantLimits{Conns: 1}})
		held, code, body := h.dial(t, h.mint(t, ""), "")
		if code != http.StatusSwitchingProtocols {
			t.Fatalf("acme's one connection: %d %s", code, body)
		}
		secret := h.mint(t, "")
		if _, code, body := h.dial(t, secret, ""); code != http.StatusTooManyRequests {
			t.Fatalf("WebSocket past the tenant's connections: %d %s, want 429", code, body)
		}
		held.Close(websocket.StatusNormalClosure, "")
		// The slot is given back once the server's session has ended, a
		// little after the close: each try until then is refused, and
		// spends nothing.
		waitFor(t, "the tenant's connection slot, and the secret, to be taken", func() bool {
			_, code, body := h.dial(t, secret, "")
			if code != http.StatusSwitchingProtocols && code != http.StatusTooManyRequests {
				t.Fatalf("WebSocket once the tenant has room: %d %s", code, body)
			}
			return code == http.StatusSwitchingProtocols
		})
	})
}

// TestClientSecretsFull: a server whose set of used secrets is full
// refuses a handshake with a fresh secret (503 too_many_client_secrets)
// and still refuses those it holds (401); once they expire, the fresh one
// is taken.
func TestClientSecretsFull(t *testing.T) {
	t.Parallel()
	h := newSecretServer(t, runtime.Options{Limits: runtime.Limits{MaxClientSecrets: 1}})
	first := h.mint(t, "")
	fresh := h.mint(t, `{"expires_after":{"seconds":600}}`)
	if _, code, body := h.dial(t, first, ""); code != http.StatusSwitchingProtocols {
		t.Fatalf("the first secret: %d %s", code, body)
	}
	if _, code, body := h.dial(t, fresh, ""); code != http.StatusServiceUnavailable || !strings.Contains(body, `"too_many_client_secrets"`) {
		t.Errorf("a secret past the bound: %d %s, want 503 too_many_client_secrets", code, body)
	}
	if _, code, body := h.dial(t, first, ""); code != http.StatusUnauthorized {
		t.Errorf("the first secret again, at the bound: %d %s, want 401", code, body)
	}
	h.offset.Store(int64(2 * time.Minute)) // the first, of 60 s, has expired
	if _, code, body := h.dial(t, fresh, ""); code != http.StatusSwitchingProtocols {
		t.Errorf("a secret once the set has room: %d %s", code, body)
	}
}

// status sends a request with key (none when "") and body, and returns its
// status, the body read and closed.
func status(t *testing.T, method, url, key, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
