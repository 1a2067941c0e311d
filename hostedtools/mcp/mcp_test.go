package mcp_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-run/tether/hostedtools/mcp"
	"github.com/tether-run/tether/internal/mcptest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// TestClient: against a real MCP server, the client lists the tools, calls
// one, gets a tool's own error as the call's error (not a failure), gives
// up on a tool that hangs within its timeout, caps a large output, sends
// the tool's headers and authorization, and refuses a server outside its
// allow-list before any connection.
func TestClient(t *testing.T) {
	t.Parallel()
	url, _ := mcptest.HTTP(t)
	m := mcp.NewClient(mcp.Options{Timeout: 20 * time.Second, MaxOutput: 1 << 20})
	ctx := t.Context()
	s, err := m.Connect(ctx, protocol.MCPServer{ServerLabel: "calc", ServerURL: url, Authorization: "mcp-key"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkTools(t, s)
	if out, _, err := s.Call(ctx, "whoami", `{}`); err != nil || out != "Bearer mcp-key" {
		t.Errorf("the server saw Authorization %q (%v)", out, err)
	}
	if out, toolErr, err := s.Call(ctx, "fail", `{}`); err != nil || out != "" || !strings.Contains(toolErr, "the disk is full") {
		t.Errorf("fail: %q %q %v", out, toolErr, err)
	}
	impatient, err := mcp.NewClient(mcp.Options{Timeout: time.Second}).Connect(ctx, protocol.MCPServer{ServerLabel: "calc", ServerURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	start := time.Now()
	if _, _, err := impatient.Call(ctx, "hang", `{}`); err == nil || !strings.Contains(err.Error(), "did not answer within 1s") || time.Since(start) > 10*time.Second {
		t.Errorf("hang: %v after %s", err, time.Since(start))
	}
	if out, _, err := s.Call(ctx, "big", `{}`); err != nil || len(out) > 1<<20+100 || !strings.Contains(out, "[truncated") {
		t.Errorf("big: %d bytes, %v", len(out), err)
	}
	if _, toolErr, err := s.Call(ctx, "add", `[1,2]`); err != nil || !strings.Contains(toolErr, "not a JSON object") {
		t.Errorf("arguments that are not an object: %q, %v", toolErr, err)
	}

	for _, bad := range []string{"https://example.com/mcp", "http://10.0.0.8:8080/mcp", "file:///etc/passwd", "mcp.example.com", ""} {
		if _, err := m.Connect(ctx, protocol.MCPServer{ServerLabel: "x", ServerURL: bad}); err == nil {
			t.Errorf("%q: connected", bad)
		}
	}
	for _, bad := range []string{"https://example.com/mcp", ""} {
		if err := m.Check(protocol.MCPServer{ServerLabel: "x", ServerURL: bad}); !errors.Is(err, runtime.ErrMCPNotAllowed) {
			t.Errorf("%q: Check says %v", bad, err)
		}
	}
}

// TestClientStdio: a server the operator configured as a command runs as a
// subprocess speaking MCP on stdio, reached by its label alone; the
// process ends with the session.
func TestClientStdio(t *testing.T) {
	t.Parallel()
	command, env := mcptest.StdioCommand()
	m := mcp.NewClient(mcp.Options{Timeout: 20 * time.Second,
		Servers: map[string]mcp.ServerConfig{"calc": {Command: command, Env: env}}})
	if err := m.Check(protocol.MCPServer{ServerLabel: "calc"}); err != nil {
		t.Fatal(err)
	}
	s, err := m.Connect(t.Context(), protocol.MCPServer{ServerLabel: "calc"})
	if err != nil {
		t.Fatal(err)
	}
	checkTools(t, s)
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// checkTools lists s's tools and calls add.
func checkTools(t *testing.T, s runtime.MCPSession) {
	t.Helper()
	tools, err := s.ListTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "add,big,fail,hang,whoami" || tools[0].Description == nil || !strings.Contains(string(tools[0].InputSchema), `"a"`) ||
		!strings.Contains(string(tools[0].Annotations), `"readOnlyHint":true`) {
		t.Fatalf("tools %v, the first %+v", names, tools[0])
	}
	if out, toolErr, err := s.Call(t.Context(), "add", `{"a":2,"b":3}`); err != nil || toolErr != "" || out != "5" {
		t.Errorf("add: %q %q %v", out, toolErr, err)
	}
}

// TestClientRedirect: a server that redirects to another host is refused:
// the request's credentials never reach that host.
func TestClientRedirect(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer other.Close()
	redirect := httptest.NewServer(http.RedirectHandler(other.URL+"/mcp", http.StatusTemporaryRedirect))
	defer redirect.Close()
	m := mcp.NewClient(mcp.Options{Timeout: 5 * time.Second})
	_, err := m.Connect(t.Context(), protocol.MCPServer{ServerLabel: "x", ServerURL: redirect.URL + "/mcp", Authorization: "secret"})
	if err == nil || !strings.Contains(err.Error(), "redirected to another host") || reached.Load() != 0 {
		t.Errorf("a redirect to another host: %v, that host reached %d times", err, reached.Load())
	}
}
