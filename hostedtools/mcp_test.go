package hostedtools_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-run/tether/hostedtools"
)

// mcpServer is a real MCP server (the official SDK's) on a loopback port,
// over Streamable HTTP: add sums two numbers, fail reports an error, hang
// answers only when its call is abandoned, big returns 3 MB. It records
// the Authorization header of the last request.
func mcpServer(t *testing.T) (url string, lastAuth func() string) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	type addIn struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Add two numbers."}, func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(in.A + in.B)}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("the disk is full")
	})
	stop := make(chan struct{}) // a server that hangs hangs until the test ends
	mcp.AddTool(srv, &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		return nil, nil, errors.New("gave up")
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "big"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 3<<20)}}}, nil, nil
	})
	var auth atomic.Value // of the last request: requests come concurrently
	auth.Store("")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(stop) }) // first: hs.Close waits for the hanging call
	return hs.URL + "/mcp", func() string { return auth.Load().(string) }
}

// TestMCP: against a real MCP server, the client lists the tools, calls
// one, gets a tool's own error as the call's error (not a failure), gives
// up on a tool that hangs within its timeout, caps a large output, sends
// the configured headers, and refuses a server outside its allow-list
// before any connection.
func TestMCP(t *testing.T) {
	t.Parallel()
	url, lastAuth := mcpServer(t)
	m := hostedtools.NewMCP(hostedtools.MCPOptions{Timeout: 20 * time.Second, MaxOutput: 1 << 20})
	ctx := t.Context()
	s, err := m.Connect(ctx, url, map[string]string{"Authorization": "Bearer mcp-key"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	tools, err := s.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "add,big,fail,hang" || tools[0].Description == nil || !strings.Contains(string(tools[0].InputSchema), `"a"`) {
		t.Fatalf("tools %v, the first %+v", names, tools[0])
	}
	if lastAuth() != "Bearer mcp-key" {
		t.Errorf("the server saw Authorization %q", lastAuth())
	}

	if out, toolErr, err := s.Call(ctx, "add", `{"a":2,"b":3}`); err != nil || toolErr != "" || out != "5" {
		t.Errorf("add: %q %q %v", out, toolErr, err)
	}
	if out, toolErr, err := s.Call(ctx, "fail", `{}`); err != nil || out != "" || !strings.Contains(toolErr, "the disk is full") {
		t.Errorf("fail: %q %q %v", out, toolErr, err)
	}
	impatient, err := hostedtools.NewMCP(hostedtools.MCPOptions{Timeout: time.Second}).Connect(ctx, url, nil)
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
	if _, _, err := s.Call(ctx, "add", `[1,2]`); err == nil {
		t.Error("arguments that are not an object: no error")
	}

	for _, bad := range []string{"https://example.com/mcp", "http://10.0.0.8:8080/mcp", "file:///etc/passwd", "mcp.example.com"} {
		if _, err := m.Connect(ctx, bad, nil); err == nil {
			t.Errorf("%s: connected", bad)
		}
	}
	if _, err := m.Connect(ctx, "https://example.com/mcp", nil); !errors.Is(err, hostedtools.ErrMCPNotAllowed) {
		t.Errorf("a server outside the allow-list: %v", err)
	}
}
