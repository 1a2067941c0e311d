package runtime_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/runtime"
)

// TestWebSocketCompression: a client that offers permessage-deflate (as
// Codex does) gets it, and turns work over the compressed connection.
func TestWebSocketCompression(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	for _, mode := range []websocket.CompressionMode{websocket.CompressionContextTakeover, websocket.CompressionNoContextTakeover, websocket.CompressionDisabled} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, resp, err := websocket.Dial(ctx, h.ws, &websocket.DialOptions{CompressionMode: mode,
			HTTPHeader: http.Header{"OpenAI-Beta": {"responses_websockets=2026-02-06"}, "Authorization": {"Bearer test"}}})
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
