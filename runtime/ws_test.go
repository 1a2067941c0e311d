package runtime_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestWebSocketCompression: a client that offers permessage-deflate (as
// Codex does) gets it, and turns work over the compressed connection.
func TestWebSocketCompression(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	for _, mode := range []websocket.CompressionMode{websocket.CompressionContextTakeover, websocket.CompressionNoContextTakeover, websocket.CompressionDisabled} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, resp, err := websocket.Dial(ctx, h.ws, testDialOptions(&websocket.DialOptions{CompressionMode: mode,
			HTTPHeader: http.Header{"OpenAI-Beta": {"responses_websockets=2026-02-06"}, "Authorization": {"Bearer test"}}}))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ext := resp.Header.Get("Sec-WebSocket-Extensions")
		if offered := mode != websocket.CompressionDisabled; offered != strings.Contains(ext, "permessage-deflate") {
			t.Fatalf("mode %v: negotiated extensions %q", mode, ext)
		}
		w := &wsConn{c: c}
		long := strings.Repeat("compress me ", 2000)
		w.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": long}))
		events := w.untilTerminal(t)
		if eventType(t, events[len(events)-1]) != "response.completed" {
			t.Fatalf("mode %v: %s", mode, events[len(events)-1])
		}
		c.Close(websocket.StatusNormalClosure, "")
	}
}

// TestShutdownEndsHTTPStreams: Shutdown ends a response still streaming over
// HTTP (Responses SSE and Chat Completions chunks), so that
// http.Server.Shutdown after it does not wait for the stream.
func TestShutdownEndsHTTPStreams(t *testing.T) {
	t.Parallel()
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	const long = "a sentence that takes many seconds at two tokens a second"
	for _, tc := range []struct {
		path, body, first string
	}{
		{"/responses", `{"model":"slow","stream":true,"input":"` + long + `"}`, "event: response.created"},
		{"/chat/completions", `{"model":"slow","stream":true,"messages":[{"role":"user","content":"` + long + `"}]}`, "data: {"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, runtime.Options{Renderer: r, Models: map[string]runtime.Sampler{"slow": sampler.NewScripted(r, sampler.Timing{TPS: 2})}, Timeouts: runtime.Timeouts{Drain: 50 * time.Millisecond}})
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			resp, err := client.Post(h.base+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, tc.first) {
				t.Fatalf("first line %q, %v", line, err)
			}
			done := make(chan error, 1)
			var rest []byte
			go func() {
				var err error
				rest, err = io.ReadAll(br)
				done <- err
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := h.srv.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the HTTP stream outlived Shutdown")
			}
			// A Responses stream that outlasts the drain fails, and says why.
			if tc.path == "/responses" && (!strings.Contains(string(rest), "event: response.failed\ndata: ") || !strings.Contains(string(rest), `"code":"server_shutting_down"`)) {
				t.Errorf("the stream cut by Shutdown ended with %q", tail(string(rest)))
			}
		})
	}
}

// tail is the end of s, for messages.
func tail(s string) string { return s[max(0, len(s)-300):] }
