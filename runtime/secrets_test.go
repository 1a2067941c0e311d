package runtime_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/quic-go/webtransport-go"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// TestClientSecrets: with API keys, a page's backend mints a client secret
// with its key; a WebSocket that offers it as a subprotocol (beside "json",
// which the server selects: never the secret) and a WebTransport session
// that gives it in its URL are the key's tenant's, once each. A secret
// used twice, expired, for another origin, or altered is refused with 401
// before any frame; none appears in the log.
func TestClientSecrets(t *testing.T) {
	t.Parallel()
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-acme": "acme", "sk-other": "other"})
	var offset atomic.Int64 // the server's clock, moved by the test
	var log syncBuffer
	h := newHarnessOn(t, runtime.Options{Keys: keys, AccessLog: true, OriginPatterns: []string{"app.example"},
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
		Now:    func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }},
		wire{webTransport: true, enc: protocol.EncodingJSON})
	mint := func(body string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, h.base+"/client_secrets", strings.NewReader(body))
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
	dial := func(secret string, origin string) (*websocket.Conn, int) {
		t.Helper()
		header := http.Header{}
		if origin != "" {
			header.Set("Origin", origin)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, resp, err := websocket.Dial(ctx, h.ws, &websocket.DialOptions{HTTPHeader: header, Subprotocols: []string{"json", "openai-insecure-api-key." + secret}})
		if err != nil {
			if resp == nil {
				t.Fatal(err)
			}
			return nil, resp.StatusCode
		}
		t.Cleanup(func() { c.CloseNow() })
		return c, http.StatusSwitchingProtocols
	}

	// Minting takes a key.
	if code := status(t, http.MethodPost, h.base+"/client_secrets", "", `{}`); code != 401 {
		t.Fatalf("mint without a key: %d", code)
	}
	secret := mint("")
	c, code := dial(secret, "")
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
	if _, code := dial(secret, ""); code != 401 {
		t.Errorf("a secret used twice: %d", code)
	}
	bound := mint(`{"origin":"https://app.example"}`)
	if _, code := dial(bound, "https://evil.example"); code != 401 {
		t.Errorf("a secret from another origin: %d", code)
	}
	if _, code := dial(bound, "https://app.example"); code != http.StatusSwitchingProtocols {
		t.Errorf("a secret from its origin: %d", code)
	}
	altered := mint("")
	altered = altered[:len(altered)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(altered, "AA")]
	if _, code := dial(altered, ""); code != 401 {
		t.Errorf("an altered secret: %d", code)
	}
	short := mint(`{"expires_after":{"seconds":1}}`)
	offset.Store(int64(2 * time.Second))
	if _, code := dial(short, ""); code != 401 {
		t.Errorf("an expired secret: %d", code)
	}
	offset.Store(0)
	if code := status(t, http.MethodPost, h.base+"/client_secrets", "sk-acme", `{"expires_after":{"seconds":3600}}`); code != 400 {
		t.Errorf("a secret of an hour: %d, want 400", code)
	}

	// WebTransport: the secret in the URL.
	wtSecret := mint("")
	tr := &webtransport.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, want := range []int{200, 401} { // the second time, used
		resp, sess, err := tr.Dial(ctx, h.wt.URL()+"/responses?client_secret="+wtSecret, nil)
		switch {
		case want == 200 && err != nil:
			t.Fatalf("WebTransport with a secret: %v", err)
		case want == 200:
			sess.CloseWithError(0, "")
		case err == nil || resp == nil || resp.StatusCode != want:
			t.Errorf("WebTransport, try %d: %v %v, want %d", i+1, resp, err, want)
		}
	}

	for _, s := range []string{secret, bound, altered, short, wtSecret} {
		if strings.Contains(log.String(), s) || strings.Contains(log.String(), s[:20]) {
			t.Errorf("the log holds a secret:\n%s", log.String())
			break
		}
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
