package runtime_test

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/runtime"
)

// TestTrickledBody: a request body that does not arrive within BodyTimeout
// is refused with 408 request_timeout and its connection closed, instead
// of holding a goroutine for as long as the client likes.
func TestTrickledBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{BodyTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers and one byte of a 100-byte body, then nothing.
	if _, err := conn.Write([]byte("POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound on the test, not the thing measured
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	var body strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&body)
	if !strings.Contains(body.String(), `"code":"request_timeout"`) {
		t.Fatalf("body %s", body.String())
	}
}

// TestTooManyCallsPerStep: a step that makes more calls than
// MaxCallsPerStep fails the response with too_many_tool_calls, in both
// designs, instead of parking thousands of calls; the connection stays
// usable.
func TestTooManyCallsPerStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{MaxCallsPerStep: 8})
	calls := strings.TrimSuffix(strings.Repeat("f {} | ", 20), " | ")
	c := h.dial(t, nil)
	for _, suspend := range []bool{false, true} {
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": suspend,
			"tools": []any{map[string]any{"type": "function", "name": "f"}}, "input": "call: " + calls}))
		evs := untilPause(t, c)
		e := decodeEv(t, evs[len(evs)-1])
		if e.Type != "response.failed" || e.Response.Error == nil || e.Response.Error.Code != "too_many_tool_calls" {
			t.Fatalf("suspend %v: ended with %s", suspend, evs[len(evs)-1])
		}
	}
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "hi"}))
	if evs := c.untilTerminal(t); eventType(t, evs[len(evs)-1]) != "response.completed" {
		t.Fatalf("after the refusals: %s", evs[len(evs)-1])
	}
}
