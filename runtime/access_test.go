package runtime_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/runtime"
)

// syncBuffer is a log destination written by many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAccessLog: with AccessLog, each HTTP request and each WebSocket
// session (when it ends) logs one line with its method, path, status,
// bytes, duration and responses served; a refused key is logged, the key
// never is, nor a body.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice"})
	h := newHarness(t, runtime.Options{Keys: keys, AccessLog: true, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	post := func(key string) int {
		req, _ := http.NewRequest("POST", h.base+"/responses", strings.NewReader(`{"model":"tether-scripted","input":"secret words"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if post("sk-alice") != 200 || post("sk-mallory") != 401 {
		t.Fatal("the requests did not go as planned")
	}
	c := h.dial(t, http.Header{"Authorization": {"Bearer sk-alice"}})
	for range 2 {
		c.send(t, create(map[string]any{"model": "tether-scripted", "input": "more secret words"}))
		c.untilTerminal(t)
	}
	c.c.Close(websocket.StatusNormalClosure, "")

	type line struct {
		Msg       string `json:"msg"`
		Method    string `json:"method"`
		Path      string `json:"path"`
		Status    int    `json:"status"`
		Bytes     int64  `json:"bytes"`
		Duration  int64  `json:"duration"`
		Responses int64  `json:"responses"`
		Tenant    string `json:"tenant"`
	}
	var lines []line
	deadline := time.Now().Add(10 * time.Second)
	for len(lines) < 3 && time.Now().Before(deadline) {
		lines = lines[:0]
		for _, raw := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var l line
			if json.Unmarshal([]byte(raw), &l) == nil && l.Msg == "access" {
				lines = append(lines, l)
			}
		}
		if len(lines) < 3 {
			time.Sleep(10 * time.Millisecond) // the session logs as it winds down
		}
	}
	if len(lines) != 3 {
		t.Fatalf("access lines: %+v\n%s", lines, logs.String())
	}
	ok, refused, ws := lines[0], lines[1], lines[2]
	if ok.Method != "POST" || ok.Path != "/v1/responses" || ok.Status != 200 || ok.Bytes == 0 || ok.Responses != 1 || ok.Tenant != "alice" || ok.Duration <= 0 {
		t.Errorf("the create: %+v", ok)
	}
	if refused.Status != 401 || refused.Responses != 0 || refused.Tenant != "" {
		t.Errorf("the refused key: %+v", refused)
	}
	if ws.Method != "GET" || ws.Status != 101 || ws.Responses != 2 || ws.Bytes == 0 || ws.Tenant != "alice" {
		t.Errorf("the WebSocket session: %+v", ws)
	}
	for _, secret := range []string{"sk-alice", "sk-mallory", "secret words"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs.String())
		}
	}
}
