package protocol_test

import (
	"testing"

	"github.com/tether-run/tether/protocol"
)

// TestAPIBase: every base URL form a user types means one base.
func TestAPIBase(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"http://127.0.0.1:8080":        "http://127.0.0.1:8080/v1",
		"http://127.0.0.1:8080/":       "http://127.0.0.1:8080/v1",
		"http://127.0.0.1:8080/v1":     "http://127.0.0.1:8080/v1",
		"http://127.0.0.1:8080/v1/":    "http://127.0.0.1:8080/v1",
		" https://api.example.com/v1 ": "https://api.example.com/v1",
		"https://host/openai/v1":       "https://host/openai/v1",
		"http://[::1]:9000":            "http://[::1]:9000/v1",
	} {
		if got, err := protocol.APIBase(raw); err != nil || got != want {
			t.Errorf("APIBase(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://h/v1", "http://", "http://h/v1?x=1", "ws://h/v1"} {
		if got, err := protocol.APIBase(bad); err == nil {
			t.Errorf("APIBase(%q) = %q, want an error", bad, got)
		}
	}
	if got, err := protocol.APIBase("ws://h:1", "ws", "wss"); err != nil || got != "ws://h:1/v1" {
		t.Errorf("ws: %q %v", got, err)
	}
}
